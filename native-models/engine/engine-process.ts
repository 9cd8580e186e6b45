/**
 * The server's handle on one engine process: start it, load the model, run jobs over IPC, and turn a
 * dead or stuck process into clean errors for the requests it was serving.
 */
import { fork, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { ModelError } from '../errors.ts'
import type { EngineJob, EngineLoadSpec, EngineModelInfo, EngineResult, FromEngine, JobProgress, ToEngine } from './engine-protocol.ts'

export interface RunOptions {
  onProgress?: (progress: JobProgress) => void
  signal?: AbortSignal
}

/** What the scheduler needs from a loaded model; tests may hand it fakes. */
export interface Engine {
  readonly pid: number | undefined
  readonly info: EngineModelInfo
  readonly alive: boolean
  run(job: EngineJob, options?: RunOptions): Promise<EngineResult>
  /** Resident memory of the engine process, as it reports it. */
  memoryBytes(): Promise<number>
  stop(): Promise<void>
  onExit(listener: () => void): void
}

/**
 * What an engine handle needs of its process: a `child_process.fork` child headless, or an Electron
 * utility process behind an adapter in the desktop app.
 */
export interface EngineChild {
  readonly pid?: number | undefined
  readonly stdout: NodeJS.ReadableStream | null
  readonly stderr: NodeJS.ReadableStream | null
  readonly connected: boolean
  send(message: ToEngine): boolean
  kill(signal?: NodeJS.Signals): boolean
  on(event: 'message', listener: (message: any) => void): unknown
  on(event: 'exit', listener: (code: number | null, signal: NodeJS.Signals | null) => void): unknown
  on(event: 'error', listener: (error: Error) => void): unknown
}

/** Starts the engine entry (the TypeScript one through tsx, or a built .js) as a process. */
export type SpawnEngine = (entry: { path: string; execArgv: string[]; forwardLog: boolean }) => EngineChild

export interface EngineProcessOptions {
  /** How to start the process; `child_process.fork` unless the desktop app says otherwise. */
  spawn?: SpawnEngine
  /** How long loading may take before the process is killed. */
  loadTimeoutMs?: number
  /** How long a cancelled job may keep running before the process is judged stuck and killed. */
  cancelGraceMs?: number
  /** Copy the engine's native log to this process's stderr (HEARTH_ENGINE_LOG=1). */
  forwardLog?: boolean
}

const LOG_TAIL_BYTES = 4096

interface PendingJob {
  resolve: (r: EngineResult) => void
  reject: (e: Error) => void
  onProgress: ((p: JobProgress) => void) | undefined
}

export class EngineProcess implements Engine {
  private readonly pending = new Map<number, PendingJob>()
  private nextJobId = 1
  private exited = false
  private logTail = ''
  private readonly exitListeners: Array<() => void> = []
  private exitReason = 'stopped'
  private loadWaiter: { resolve: (info: EngineModelInfo) => void; reject: (e: Error) => void } | undefined
  private statsWaiters: Array<(rss: number) => void> = []
  info: EngineModelInfo = { devices: [], loadMs: 0, vision: false }

  private constructor(
    private readonly child: EngineChild,
    private readonly spec: EngineLoadSpec,
    private readonly options: EngineProcessOptions,
  ) {
    const keepTail = (chunk: Buffer) => {
      this.logTail = (this.logTail + chunk.toString('utf8')).slice(-LOG_TAIL_BYTES)
      if (options.forwardLog) process.stderr.write(chunk)
    }
    child.stdout?.on('data', keepTail)
    child.stderr?.on('data', keepTail)
    child.on('message', (m: FromEngine) => this.handle(m))
    child.on('exit', (code, signal) => this.handleExit(code, signal))
    child.on('error', () => undefined) // 'exit' follows and reports it
  }

  static async start(spec: EngineLoadSpec, options: EngineProcessOptions = {}): Promise<EngineProcess> {
    const child = (options.spawn ?? forkEngine)({ ...childEntry, forwardLog: options.forwardLog ?? false })
    const engine = new EngineProcess(child, spec, options)
    await engine.load(options.loadTimeoutMs ?? 120_000)
    return engine
  }

  get pid(): number | undefined {
    return this.child.pid
  }

  get alive(): boolean {
    return !this.exited
  }

  onExit(listener: () => void): void {
    if (this.exited) listener()
    else this.exitListeners.push(listener)
  }

  run(job: EngineJob, { onProgress, signal }: RunOptions = {}): Promise<EngineResult> {
    if (this.exited) return Promise.reject(this.crashError())
    const id = this.nextJobId++
    return new Promise<EngineResult>((resolve, reject) => {
      let graceTimer: NodeJS.Timeout | undefined
      const cancel = () => {
        this.send({ type: 'cancel', id })
        // A job that ignores its cancel holds the model: the process is stuck, so it goes.
        graceTimer = setTimeout(() => this.kill(), this.options.cancelGraceMs ?? 5_000)
        graceTimer.unref()
      }
      const settle = () => {
        clearTimeout(graceTimer)
        signal?.removeEventListener('abort', cancel)
      }
      this.pending.set(id, {
        resolve: (r) => (settle(), resolve(r)),
        reject: (e) => (settle(), reject(e)),
        onProgress,
      })
      signal?.addEventListener('abort', cancel, { once: true })
      this.send({ type: 'run', id, job })
      if (signal?.aborted) cancel()
    })
  }

  memoryBytes(): Promise<number> {
    if (this.exited) return Promise.resolve(0)
    return new Promise<number>((resolve) => {
      this.statsWaiters.push(resolve)
      if (this.statsWaiters.length === 1) this.send({ type: 'stats' })
    })
  }

  async stop(): Promise<void> {
    if (this.exited) return
    const gone = new Promise<void>((resolve) => this.onExit(resolve))
    this.send({ type: 'shutdown' })
    const killTimer = setTimeout(() => this.kill(), 3_000)
    await gone
    clearTimeout(killTimer)
  }

  private load(timeoutMs: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.kill()
        reject(new ModelError('engine_load_failed', `model "${this.spec.modelId}" did not load within ${timeoutMs} ms`))
      }, timeoutMs)
      this.loadWaiter = {
        resolve: (info) => {
          clearTimeout(timer)
          this.info = info
          resolve()
        },
        reject: (e) => {
          clearTimeout(timer)
          this.kill()
          reject(e)
        },
      }
      this.send({ type: 'load', spec: this.spec })
    })
  }

  private handle(message: FromEngine): void {
    switch (message.type) {
      case 'loaded':
        this.loadWaiter?.resolve(message.info)
        this.loadWaiter = undefined
        break
      case 'load-failed':
        this.loadWaiter?.reject(
          new ModelError('engine_load_failed', `model "${this.spec.modelId}" failed to load: ${message.error.message}`),
        )
        this.loadWaiter = undefined
        break
      case 'stats':
        for (const waiter of this.statsWaiters.splice(0)) waiter(message.rssBytes)
        break
      case 'devices':
        break
      case 'progress':
        this.pending.get(message.id)?.onProgress?.(message.progress)
        break
      case 'done':
        this.pending.get(message.id)?.resolve(message.result)
        this.pending.delete(message.id)
        break
      case 'failed':
        this.pending.get(message.id)?.reject(ModelError.fromJSON(message.error))
        this.pending.delete(message.id)
        break
    }
  }

  private handleExit(code: number | null, signal: NodeJS.Signals | null): void {
    this.exited = true
    const why = signal ? `was killed by ${signal}` : `exited with code ${code}`
    this.exitReason = why
    this.loadWaiter?.reject(
      new ModelError('engine_load_failed', `model "${this.spec.modelId}" failed to load: the engine ${why}${this.tailForMessage()}`),
    )
    this.loadWaiter = undefined
    for (const waiter of this.statsWaiters.splice(0)) waiter(0)
    for (const job of this.pending.values()) job.reject(this.crashError())
    this.pending.clear()
    for (const listener of this.exitListeners.splice(0)) listener()
  }

  private crashError(): ModelError {
    return new ModelError('engine_crashed', `the engine for model "${this.spec.modelId}" ${this.exitReason}; the next request reloads it`)
  }

  private tailForMessage(): string {
    const lines = this.logTail.trim().split('\n').filter(Boolean)
    // Node ends a crash report with its version; the line naming the error says more.
    const telling = lines.findLast((l) => /error|failed|abort/i.test(l)) ?? lines.at(-1)
    return telling ? ` (engine log: ${telling.trim().slice(0, 300)})` : ''
  }

  private send(message: ToEngine): void {
    if (this.exited || !this.child.connected) return
    this.child.send(message)
  }

  private kill(): void {
    if (!this.exited) this.child.kill('SIGKILL')
  }
}

const forkEngine: SpawnEngine = ({ path, execArgv, forwardLog }): ChildProcess =>
  fork(path, [], {
    execArgv,
    // The binding prints several info lines to stdout for every embedding (and decode); piping
    // them cost an embedding model up to a quarter of its throughput. Errors and asserts go to
    // stderr, which is all the crash explanations need.
    stdio: ['ignore', forwardLog ? 'pipe' : 'ignore', 'pipe', 'ipc'],
    serialization: 'advanced',
    env: process.env,
  })

/** The child runs the TypeScript entry through tsx in development, or a built .js beside it. */
const childEntry = (() => {
  const built = fileURLToPath(new URL('./engine-child.js', import.meta.url))
  if (existsSync(built)) return { path: built, execArgv: [] as string[] }
  const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href
  return { path: fileURLToPath(new URL('./child/engine-child.ts', import.meta.url)), execArgv: ['--import', tsxLoader] }
})()
