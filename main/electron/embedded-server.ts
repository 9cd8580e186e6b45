/**
 * The API server inside the app: the same startServer as `npm run serve`, restarted on another
 * host for LAN access, switched off and on from the window or the tray. Operations run one at a
 * time, so a quick on-off-on never leaves two servers or none.
 */
import { readFile } from 'node:fs/promises'
import type { RunningServer } from '../server/server.ts'
import { OLLAMA_DEFAULT_PORT, type ServerSettings } from '../server/settings.ts'
import type { DesktopServerState } from '../../preload/hearth-bridge.ts'
import { APP_ORIGIN } from './app-protocol.ts'

export type StartServer = (settings: ServerSettings, log?: (line: string) => void) => Promise<RunningServer>

const LOOPBACK = '127.0.0.1'
const EVERY_INTERFACE = '0.0.0.0'

export class EmbeddedServer {
  private running: RunningServer | undefined
  private lan = false
  private ollama: boolean
  private lend: boolean
  private error: string | undefined
  private queue: Promise<unknown> = Promise.resolve()
  private readonly listeners = new Set<(state: DesktopServerState) => void>()

  constructor(
    private readonly settings: ServerSettings,
    private readonly startServer: StartServer,
    private readonly log: (line: string) => void = console.log,
  ) {
    this.ollama = settings.ollamaPort !== undefined
    this.lend = settings.lend === true
  }

  get state(): DesktopServerState {
    const port = this.running ? new URL(this.running.url).port : undefined
    return {
      running: this.running !== undefined,
      // The page always talks to the server on loopback, whatever interface it listens on.
      url: port ? `http://${LOOPBACK}:${port}` : undefined,
      lan: this.lan,
      ollama: this.ollama,
      ollamaUrl: this.running?.ollamaUrl,
      ollamaNote: this.running?.ollamaNote,
      lend: this.lend,
      error: this.error,
    }
  }

  onChange(listener: (state: DesktopServerState) => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  start(lan = this.lan, ollama = this.ollama, lend = this.lend): Promise<DesktopServerState> {
    return this.serially(async () => {
      this.lan = lan
      this.ollama = ollama
      this.lend = lend
      await this.startNow()
    })
  }

  stop(): Promise<DesktopServerState> {
    return this.serially(() => this.stopNow())
  }

  setRunning(running: boolean): Promise<DesktopServerState> {
    return this.serially(() => (running ? this.startNow() : this.stopNow()))
  }

  /** Restarts the server on the other host when it is running. */
  setLan(lan: boolean): Promise<DesktopServerState> {
    return this.switchTo('lan', lan)
  }

  /** Serves Ollama's API on its port, or stops: the server restarts when it is running. */
  setOllama(on: boolean): Promise<DesktopServerState> {
    return this.switchTo('ollama', on)
  }

  /** Lends this computer's memory, or stops: the server restarts when it is running. */
  setLending(on: boolean): Promise<DesktopServerState> {
    return this.switchTo('lend', on)
  }

  /** Sets one of the server's switches; a running server restarts with it (nothing happens when it is already so). */
  private switchTo(name: 'lan' | 'ollama' | 'lend', on: boolean): Promise<DesktopServerState> {
    return this.serially(async () => {
      if (on === this[name]) return
      this[name] = on
      if (this.running) {
        await this.stopNow()
        await this.startNow()
      }
    })
  }

  /** The key the server accepts: read fresh, since the page may have regenerated it. */
  async apiKey(): Promise<string | undefined> {
    if (!this.settings.auth) return undefined
    if (this.settings.apiKeys.length > 0) return this.settings.apiKeys[0]
    const file = this.running?.keyFile
    if (!file) return undefined
    return (await readFile(file, 'utf8')).trim() || undefined
  }

  private async startNow(): Promise<void> {
    if (this.running) return
    const settings: ServerSettings = {
      ...this.settings,
      host: this.lan ? EVERY_INTERFACE : LOOPBACK,
      corsOrigins: [...(this.settings.corsOrigins ?? []), APP_ORIGIN],
      ollamaPort: this.ollama ? (this.settings.ollamaPort ?? OLLAMA_DEFAULT_PORT) : undefined,
      lend: this.lend,
    }
    try {
      this.running = await this.startServer(settings, this.log)
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE' || settings.port === 0) {
        this.error = `The server could not start: ${(e as Error).message}`
        return
      }
      // Another program (perhaps `npm run serve`) has the port: take any free one instead.
      this.log(`port ${settings.port} is in use; starting on a free port`)
      try {
        this.running = await this.startServer({ ...settings, port: 0 }, this.log)
      } catch (inner) {
        this.error = `The server could not start: ${(inner as Error).message}`
        return
      }
    }
    this.error = undefined
    this.log(`listening on ${this.running.url}`)
  }

  private async stopNow(): Promise<void> {
    const running = this.running
    this.running = undefined
    await running?.close()
  }

  private serially(operation: () => Promise<void>): Promise<DesktopServerState> {
    const next = this.queue.then(operation).then(() => {
      const state = this.state
      for (const listener of this.listeners) listener(state)
      return state
    })
    this.queue = next.catch(() => undefined)
    return next
  }
}
