/**
 * The MCP servers configured on the server (the Tools page), and the tools of the ones a chat
 * turned on, started when needed. What the key may do comes with the list, so pages can explain.
 */
import { ApiError } from '../services/api-client.ts'
import { type McpCallBody, type McpPermission, type McpServerView, type McpServersBody } from '../services/mcp-tools.ts'
import { api } from './connection.svelte.ts'

class McpStore {
  servers = $state<McpServerView[]>([])
  permission = $state<McpPermission>('none')
  configFile = $state<string | undefined>(undefined)
  configError = $state<string | null>(null)
  loaded = $state(false)
  /** The server has no /api/mcp (an older or other server). */
  unavailable = $state(false)
  error = $state<string | undefined>(undefined)
  /** Per server name: what is being done to it. */
  busy = $state<Record<string, string>>({})
  /** Per server name: the last action's failure. */
  actionErrors = $state<Record<string, string>>({})

  enabled = $derived(this.servers.filter((s) => s.enabled))

  async refresh(): Promise<void> {
    try {
      this.apply(await api.json<McpServersBody>('/api/mcp/servers'))
      this.error = undefined
      this.unavailable = false
    } catch (e) {
      if (e instanceof ApiError && e.missingEndpoint) this.unavailable = true
      else this.error = (e as Error).message
    } finally {
      this.loaded = true
    }
  }

  private apply(body: McpServersBody): void {
    this.servers = body.servers
    this.permission = body.permission
    this.configFile = body.config_file
    this.configError = body.config_error
  }

  private replace(view: McpServerView): void {
    const i = this.servers.findIndex((s) => s.name === view.name)
    if (i === -1) this.servers.push(view)
    else this.servers[i] = view
  }

  /** Runs one action on a server; its failure is kept per server (or thrown for the add form). */
  private async act(name: string, doing: string, action: () => Promise<void>): Promise<boolean> {
    this.busy[name] = doing
    delete this.actionErrors[name]
    try {
      await action()
      return true
    } catch (e) {
      this.actionErrors[name] = (e as Error).message
      return false
    } finally {
      delete this.busy[name]
    }
  }

  async add(body: Record<string, unknown>): Promise<void> {
    const view = await api.json<McpServerView>('/api/mcp/servers', { body })
    this.replace(view)
  }

  setEnabled(name: string, enabled: boolean): Promise<boolean> {
    return this.act(name, enabled ? 'Turning on' : 'Turning off', async () => {
      this.replace(await api.json<McpServerView>(`/api/mcp/servers/${encodeURIComponent(name)}`, { method: 'PATCH', body: { disabled: !enabled } }))
    })
  }

  start(name: string): Promise<boolean> {
    return this.act(name, 'Starting', async () => {
      this.replace(await api.json<McpServerView>(`/api/mcp/servers/${encodeURIComponent(name)}/start`, { body: {} }))
    })
  }

  stop(name: string): Promise<boolean> {
    return this.act(name, 'Stopping', async () => {
      this.replace(await api.json<McpServerView>(`/api/mcp/servers/${encodeURIComponent(name)}/stop`, { body: {} }))
    })
  }

  remove(name: string): Promise<boolean> {
    return this.act(name, 'Removing', async () => {
      await api.json(`/api/mcp/servers/${encodeURIComponent(name)}`, { method: 'DELETE' })
      this.servers = this.servers.filter((s) => s.name !== name)
    })
  }

  /**
   * The chosen servers with their tools, each started first when it is not running. A server that
   * cannot start is an error naming it: the person chose it, so it is not left out silently.
   */
  async serversWithTools(names: readonly string[], signal: AbortSignal): Promise<McpServerView[]> {
    this.apply(await api.json<McpServersBody>('/api/mcp/servers', { signal }))
    const out: McpServerView[] = []
    for (const name of names) {
      let view = this.servers.find((s) => s.name === name)
      if (!view || !view.enabled) continue
      if (view.state !== 'ready') {
        view = await api.json<McpServerView>(`/api/mcp/servers/${encodeURIComponent(name)}/start`, { body: {}, signal })
        this.replace(view)
      }
      if (view.state !== 'ready') throw new Error(`The tool server "${name}" did not start: ${view.error ?? 'no reason given'}`)
      out.push(view)
    }
    return out
  }

  /** Runs a tool; the chat's Stop aborts the request, which cancels the call on the server. */
  call(server: string, tool: string, args: Record<string, unknown>, signal: AbortSignal): Promise<McpCallBody> {
    return api.json<McpCallBody>('/api/mcp/call', { body: { server, tool, arguments: args }, signal })
  }
}

export const mcp = new McpStore()
