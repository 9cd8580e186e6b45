/**
 * The MCP servers configured on the server (the Tools page), and the tools of the ones a chat
 * turned on, started when needed. What the key may do comes with the list, so pages can explain.
 */
import { ApiError } from '../services/api-client.ts'
import { type McpPermission, type McpServerView, type McpServersBody } from '../services/mcp-tools.ts'
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

  /** Of the chosen servers, those configured and on: the server starts them when a chat uses them. */
  async usable(names: readonly string[], signal: AbortSignal): Promise<string[]> {
    if (names.length === 0) return []
    this.apply(await api.json<McpServersBody>('/api/mcp/servers', { signal }))
    return names.filter((name) => this.servers.find((s) => s.name === name)?.enabled)
  }
}

export const mcp = new McpStore()
