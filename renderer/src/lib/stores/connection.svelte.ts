/**
 * Where the server is and which key to send. In the desktop app both come from the preload, so the
 * person is never asked; in a browser the key is pasted once and kept in localStorage.
 */
import { ApiClient, ApiError, type Connection } from '../services/api-client.ts'
import { desktopBridge, type DesktopServerState } from '../services/bridge.ts'
import type { HealthBody } from '../../../../main/server/wire-types.ts'

const KEY_STORAGE = 'hearth.apiKey'

class ConnectionStore {
  baseUrl = $state('')
  apiKey = $state<string | undefined>(undefined)
  /** The page must ask for a key before it can do anything. */
  needsKey = $state(false)
  keyProblem = $state<string | undefined>(undefined)
  desktop = $state(false)
  /** The embedded server, in the desktop app. */
  serverState = $state<DesktopServerState | undefined>(undefined)
  ready = $state(false)

  async init(): Promise<void> {
    const bridge = desktopBridge()
    if (bridge) {
      this.desktop = true
      this.applyServerState(await bridge.getServerState())
      this.apiKey = await bridge.getApiKey()
      bridge.onServerState((state) => {
        this.applyServerState(state)
        void bridge.getApiKey().then((key) => (this.apiKey = key))
      })
      this.ready = true
      return
    }
    this.apiKey = localStorage.getItem(KEY_STORAGE) ?? undefined
    // /health says, without a key, whether this server wants one (not with --no-auth): with none
    // saved, the page asks for it first rather than making a request that fails with 401.
    const health = await fetch(`${this.baseUrl}/health`).then(
      (r) => (r.ok ? (r.json() as Promise<HealthBody>) : undefined),
      () => undefined,
    )
    if (health?.auth_required && !this.apiKey) {
      this.needsKey = true
    } else if (this.apiKey) {
      try {
        await api.request('/v1/models')
      } catch {
        // A 401 has asked for the key anew (unauthorized below); other failures show on the pages.
      }
    }
    this.ready = true
  }

  /** Checks a pasted key against the server before keeping it. */
  async useKey(key: string): Promise<boolean> {
    const candidate = key.trim()
    if (!candidate) {
      this.keyProblem = 'Paste the key first'
      return false
    }
    const previous = this.apiKey
    this.apiKey = candidate
    try {
      await api.request('/v1/models')
    } catch (e) {
      this.apiKey = previous
      this.keyProblem = e instanceof ApiError && e.status === 401 ? 'The server does not accept this key' : (e as Error).message
      return false
    }
    this.remember(candidate)
    return true
  }

  /** After the key was regenerated: the old one no longer works. */
  remember(key: string): void {
    this.apiKey = key
    this.needsKey = false
    this.keyProblem = undefined
    if (!this.desktop) localStorage.setItem(KEY_STORAGE, key)
  }

  unauthorized(): void {
    if (this.desktop) return // the preload's key is the server's own; a 401 here is a real error
    this.needsKey = true
    this.keyProblem = this.apiKey ? 'The saved key is no longer accepted (was it regenerated?)' : undefined
  }

  private applyServerState(state: DesktopServerState): void {
    this.serverState = state
    this.baseUrl = state.url ?? ''
  }
}

export const connection = new ConnectionStore()

export const api = new ApiClient(
  (): Connection => ({ baseUrl: connection.baseUrl, apiKey: connection.apiKey }),
  () => connection.unauthorized(),
)
