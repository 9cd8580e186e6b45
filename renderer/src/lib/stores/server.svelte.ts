/**
 * The Server page: where the server listens, its key, the desktop app's server switches, and the
 * live request log (its event stream is reopened when it drops).
 */
import { ApiError } from '../services/api-client.ts'
import { desktopBridge, type DesktopServerState } from '../services/bridge.ts'
import type { McpPermission } from '../services/mcp-tools.ts'
import { readSseJson } from '../services/sse.ts'
import { api, connection } from './connection.svelte.ts'
import type { EngineInfo, RequestRecord, ServerInfo, SystemInfo } from '../../../../main/server/wire-types.ts'

/** A key made under /api/keys, as GET /api/keys lists it (the parts this page shows). */
export interface ProgramKey {
  id: string
  label: string | null
  hint: string
  /** What the key may do with tool servers; absent on servers without MCP. */
  mcp?: McpPermission
}

const LOG_SIZE = 200
const RECONNECT_MS = 3000

class ServerStore {
  info = $state<ServerInfo | undefined>(undefined)
  engine = $state<EngineInfo | undefined>(undefined)
  error = $state<string | undefined>(undefined)
  requests = $state<RequestRecord[]>([])
  logState = $state<'off' | 'live' | 'reconnecting' | 'unavailable'>('off')
  keyMessage = $state<string | undefined>(undefined)
  regenerating = $state(false)
  keepRunningInTray = $state<boolean | undefined>(undefined)
  switching = $state(false)
  programKeys = $state<ProgramKey[]>([])
  programKeysError = $state<string | undefined>(undefined)

  private logController: AbortController | undefined

  async refresh(): Promise<void> {
    try {
      this.info = await api.json<ServerInfo>('/api/server')
      this.engine = (await api.json<SystemInfo>('/api/system')).engine
      this.error = undefined
    } catch (e) {
      this.error = e instanceof ApiError && e.missingEndpoint ? 'This server does not describe itself yet' : (e as Error).message
    }
    const bridge = desktopBridge()
    if (bridge) this.keepRunningInTray = (await bridge.getPreferences()).keepRunningInTray
  }

  /** Starts following the request log; the stream stays open while the page shows it. */
  watch(): void {
    if (this.logController) return
    const controller = new AbortController()
    this.logController = controller
    void (async () => {
      while (!controller.signal.aborted) {
        try {
          const response = await api.request('/api/requests/events', { signal: controller.signal })
          this.requests = []
          this.logState = 'live'
          for await (const record of readSseJson<RequestRecord>(response.body!, controller.signal)) {
            this.requests.unshift(record)
            if (this.requests.length > LOG_SIZE) this.requests.length = LOG_SIZE
          }
        } catch (e) {
          if (controller.signal.aborted) break
          if (e instanceof ApiError && (e.missingEndpoint || e.status === 401)) {
            this.logState = 'unavailable'
            break
          }
        }
        this.logState = 'reconnecting'
        await new Promise((r) => setTimeout(r, RECONNECT_MS))
      }
    })()
  }

  unwatch(): void {
    this.logController?.abort()
    this.logController = undefined
    this.logState = 'off'
  }

  async regenerateKey(): Promise<void> {
    this.regenerating = true
    this.keyMessage = undefined
    try {
      const { key } = await api.json<{ key: string }>('/api/keys/regenerate', { body: {} })
      connection.remember(key)
      this.keyMessage = 'A new key was made. Programs using the old key must be given the new one.'
    } catch (e) {
      this.keyMessage = e instanceof ApiError && e.missingEndpoint ? 'This server cannot regenerate its key' : (e as Error).message
    } finally {
      this.regenerating = false
    }
  }

  /** Keys for programs; a key that may not list them (a program key itself) sees none. */
  async loadProgramKeys(): Promise<void> {
    try {
      this.programKeys = (await api.json<{ keys: ProgramKey[] }>('/api/keys')).keys
      this.programKeysError = undefined
    } catch {
      this.programKeys = []
    }
  }

  async setMcpPermission(id: string, mcp: McpPermission): Promise<void> {
    try {
      const updated = await api.json<ProgramKey>(`/api/keys/${encodeURIComponent(id)}`, { method: 'PATCH', body: { mcp } })
      const i = this.programKeys.findIndex((k) => k.id === id)
      if (i !== -1) this.programKeys[i] = updated
      this.programKeysError = undefined
    } catch (e) {
      this.programKeysError = (e as Error).message
    }
  }

  /** Desktop app only: the embedded server on or off, or reachable from the network. */
  async switchServer(change: { running?: boolean; lan?: boolean; ollama?: boolean; lend?: boolean }): Promise<void> {
    const bridge = desktopBridge()
    if (!bridge) return
    this.switching = true
    try {
      let state: DesktopServerState | undefined
      if (change.running !== undefined) state = await bridge.setServerRunning(change.running)
      if (change.lan !== undefined) state = await bridge.setLanAccess(change.lan)
      if (change.ollama !== undefined) state = await bridge.setOllamaPort(change.ollama)
      if (change.lend !== undefined) state = await bridge.setLending(change.lend)
      if (state) connection.serverState = state
      if (state?.running) {
        this.unwatch()
        await this.refresh()
        this.watch()
      }
    } finally {
      this.switching = false
    }
  }

  async setKeepRunningInTray(keep: boolean): Promise<void> {
    const bridge = desktopBridge()
    if (bridge) this.keepRunningInTray = (await bridge.setKeepRunningInTray(keep)).keepRunningInTray
  }
}

export const server = new ServerStore()
