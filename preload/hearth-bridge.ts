/**
 * What the desktop app's preload gives the page: a few typed calls, nothing generic. Types only,
 * shared by the preload, the main process and the renderer.
 */

export interface DesktopServerState {
  running: boolean
  /** Where the page reaches the embedded server (always on this computer). */
  url: string | undefined
  /** Listening on every interface, so other computers can reach it. */
  lan: boolean
  /** Also serving Ollama's API on 127.0.0.1:11434 (or the settings' port), keyless for this computer's programs. */
  ollama: boolean
  /** That port's address, while it is served. */
  ollamaUrl: string | undefined
  /** Why the Ollama port is not served while switched on (Ollama itself holds 11434, say). */
  ollamaNote?: string | undefined
  /** Lending this computer's memory to other Hearths' pooled models (docs/pool.md). */
  lend: boolean
  /** Why the server is not running, when it failed to start. */
  error: string | undefined
}

export interface DesktopPreferences {
  /** Closing the window leaves the server running in the tray. */
  keepRunningInTray: boolean
}

export interface HearthBridge {
  getServerState(): Promise<DesktopServerState>
  /** The key the embedded server accepts, so the person is never asked for it. */
  getApiKey(): Promise<string | undefined>
  setServerRunning(running: boolean): Promise<DesktopServerState>
  setLanAccess(lan: boolean): Promise<DesktopServerState>
  setOllamaPort(on: boolean): Promise<DesktopServerState>
  setLending(on: boolean): Promise<DesktopServerState>
  getPreferences(): Promise<DesktopPreferences>
  setKeepRunningInTray(keep: boolean): Promise<DesktopPreferences>
  /** A native file dialog for importing a model file; undefined when cancelled. */
  pickModelFile(): Promise<string | undefined>
  /** The page asks no clipboard permission: copying goes through the main process. */
  copyText(text: string): Promise<void>
  /** Called whenever the server starts, stops or moves; returns the function that stops listening. */
  onServerState(listener: (state: DesktopServerState) => void): () => void
}
