/**
 * One engine program (llama-server, whisper-server) as a child process: started on a private
 * loopback port (with its own random key where the program takes one), ready when its /health
 * says so, its log tail kept to explain a crash, and never outliving the server (the kernel kills
 * it when its parent dies, where the platform allows). A load is given up only once it stops making
 * progress (its memory stops growing and its log falls silent) for the load limit, as Ollama does:
 * a large model on a slow disk loads, a hung one does not hold a request for long.
 */
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { randomBytes } from 'node:crypto'
// Streams go over plain node:http: per token it costs a fraction of fetch's web streams.
import { Agent, request as httpRequest, type IncomingMessage } from 'node:http'
import { createServer } from 'node:net'
import { EngineDiedError, ModelError } from './errors.ts'
import { fetchOnKeptConnection, postOnKeptConnection } from './kept-connections.ts'

const LOG_TAIL_BYTES = 8192
const HEALTH_POLL_MS = 15

export interface EngineServerStart {
  program: string
  args: string[]
  /** The environment variable the program reads its API key from; none: it takes no key (whisper-server). */
  apiKeyVariable?: string
  /** Named in errors. */
  modelId: string
  /** How long a load may go without progress. */
  loadTimeoutMs: number
  /** Copy the engine's log to this process's stderr (HEARTH_ENGINE_LOG=1). */
  forwardLog: boolean
  /** Variables set for the program on top of this process's environment. */
  env?: Record<string, string>
  /** Each line the program writes to stderr, as it comes; every line is in before the program counts as gone. */
  onLogLine?: (line: string) => void
}

/** How long after the program's exit its last log lines may take to arrive. */
const LAST_LINES_MS = 150

/** Memory that grows by this much between looks is a load making progress. */
const PROGRESS_BYTES = 1024 * 1024
const PROGRESS_LOOK_MS = 500

export class EngineServerProcess {
  private logTail = ''
  private loggedBytes = 0
  private exited = false
  private exitReason = 'stopped'
  private killedBy: string | null = null
  /** Why Hearth stopped the engine itself, where something outside it broke (a pooled model's lender). */
  private stoppedBecause: string | undefined
  private readonly exitListeners: Array<() => void> = []
  /**
   * The connections streams go over, kept open between them (patch llama-17: llama-server no
   * longer closes one after a stream), so a request does not wait for a new connection.
   */
  private readonly streams = new Agent({ keepAlive: true })
  private readonly baseUrl: string

  private constructor(
    private readonly child: ChildProcess,
    private readonly port: number,
    private readonly key: string,
    private readonly modelId: string,
    forwardLog: boolean,
    onLogLine: ((line: string) => void) | undefined,
  ) {
    this.baseUrl = `http://127.0.0.1:${port}`
    const keepTail = (chunk: Buffer) => {
      this.loggedBytes += chunk.length
      this.logTail = (this.logTail + chunk.toString('utf8')).slice(-LOG_TAIL_BYTES)
      if (forwardLog) process.stderr.write(chunk)
    }
    child.stdout?.on('data', keepTail)
    child.stderr?.on('data', keepTail)
    if (onLogLine) {
      let partial = ''
      child.stderr?.on('data', (chunk: Buffer) => {
        const lines = (partial + chunk.toString('utf8')).split('\n')
        partial = lines.pop() ?? ''
        for (const line of lines) onLogLine(line)
      })
    }
    child.on('error', () => undefined) // 'exit' follows and reports it
    // Gone once its output is read to the end ('close'), so that what it said last (why it
    // stopped) is known to whoever hears of it; a grandchild holding the pipes delays that briefly.
    const gone = (code: number | null, signal: NodeJS.Signals | null) => {
      if (this.exited) return
      this.exited = true
      this.exitReason = signal ? `was killed by ${signal}` : `exited with code ${code}`
      this.killedBy = signal
      this.streams.destroy()
      for (const listener of this.exitListeners.splice(0)) listener()
    }
    child.on('close', gone)
    child.on('exit', (code, signal) => setTimeout(() => gone(code, signal), LAST_LINES_MS).unref())
  }

  static async start(options: EngineServerStart): Promise<EngineServerProcess> {
    const port = await freeLoopbackPort()
    const key = options.apiKeyVariable ? randomBytes(24).toString('base64url') : ''
    const args = [...options.args, '--host', '127.0.0.1', '--port', String(port)]
    const [command, commandArgs] = orphanSafe(options.program, args)
    const child = spawn(command, commandArgs, {
      stdio: ['ignore', 'pipe', 'pipe'],
      // The key stays out of `ps`: llama-server reads it from the environment.
      env: { ...process.env, ...options.env, ...(options.apiKeyVariable ? { [options.apiKeyVariable]: key } : {}) },
    })
    const engine = new EngineServerProcess(child, port, key, options.modelId, options.forwardLog, options.onLogLine)
    try {
      await engine.waitUntilHealthy(options.loadTimeoutMs)
    } catch (e) {
      engine.kill()
      throw e
    }
    return engine
  }

  get pid(): number | undefined {
    return this.child.pid
  }

  get alive(): boolean {
    return !this.exited
  }

  /** The engine's own log so far (the last few KiB). */
  get log(): string {
    return this.logTail
  }

  onExit(listener: () => void): void {
    if (this.exited) listener()
    else this.exitListeners.push(listener)
  }

  /** A request to the engine; a dead engine or a refused connection is `engine_crashed`. */
  async request(path: string, init: { method?: string; body?: unknown; signal?: AbortSignal } = {}): Promise<Response> {
    // JSON, or a form (whisper-server's uploads) as it is.
    const body = init.body === undefined ? undefined : init.body instanceof FormData ? init.body : JSON.stringify(init.body)
    if (this.exited) throw this.crashError()
    try {
      const headers = { authorization: `Bearer ${this.key}`, ...(typeof body === 'string' ? { 'content-type': 'application/json' } : {}) }
      const method = init.method ?? (body === undefined ? 'GET' : 'POST')
      return await fetchOnKeptConnection(`${this.baseUrl}${path}`, { method, headers, body, signal: init.signal }, () => this.alive)
    } catch (e) {
      if (init.signal?.aborted) throw new ModelError('cancelled', 'the request was cancelled')
      throw await this.failureOf(e)
    }
  }

  /**
   * POSTs `json` and hands back the response as node:http gives it (status, headers, a byte
   * stream), for answers read as they arrive. Closing the response (or `signal`) ends the work
   * upstream: llama-server cancels a request whose connection is gone. A stream read to its end
   * leaves its connection for the next one.
   */
  async streamRequest(path: string, json: string, signal?: AbortSignal): Promise<IncomingMessage> {
    if (this.exited) throw this.crashError()
    if (signal?.aborted) throw new ModelError('cancelled', 'the request was cancelled')
    // Encoded once: its length is the byte count, with no second pass over a long prompt.
    const payload = Buffer.from(json)
    const options = { host: '127.0.0.1', port: this.port, path, agent: this.streams, signal, headers: { authorization: `Bearer ${this.key}` } }
    try {
      return await postOnKeptConnection(httpRequest, options, payload)
    } catch (e) {
      if (signal?.aborted) throw new ModelError('cancelled', 'the request was cancelled')
      throw await this.failureOf(e)
    }
  }

  /** What a failed exchange means: the engine died (wait briefly for its exit to know), or it broke. */
  async failureOf(e: unknown): Promise<ModelError> {
    if (e instanceof ModelError) return e
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 200)
      this.onExit(() => (clearTimeout(timer), resolve()))
    })
    if (this.exited) return this.crashError()
    const cause = (e as { cause?: { code?: string; message?: string } }).cause
    const detail = cause ? ` (${cause.code ?? cause.message})` : ''
    return new ModelError('internal_error', `the engine for model "${this.modelId}" failed: ${(e as Error).message}${detail}`)
  }

  crashError(): EngineDiedError {
    if (this.stoppedBecause)
      return new EngineDiedError(
        'engine_crashed',
        `the engine for model "${this.modelId}" stopped: ${this.stoppedBecause}; the next request loads it again`,
        this.killedBy,
        false,
      )
    return new EngineDiedError(
      'engine_crashed',
      `the engine for model "${this.modelId}" ${this.exitReason}; the next request reloads it${this.tellingLine()}`,
      this.killedBy,
      false,
    )
  }

  async stop(): Promise<void> {
    if (this.exited) return
    const gone = new Promise<void>((resolve) => this.onExit(resolve))
    this.child.kill('SIGTERM')
    const killTimer = setTimeout(() => this.kill(), 3_000)
    await gone
    clearTimeout(killTimer)
  }

  kill(): void {
    if (!this.exited) this.child.kill('SIGKILL')
  }

  /** Kills the engine, and every request it had ends with `reason`. */
  killBecause(reason: string): void {
    if (this.exited) return
    this.stoppedBecause ??= reason
    this.kill()
  }

  /** The process's resident memory, 0 once it is gone. */
  async residentBytes(): Promise<number> {
    const pid = this.child.pid
    if (this.exited || pid === undefined) return 0
    return residentBytesOf(pid)
  }

  private async waitUntilHealthy(stallMs: number): Promise<void> {
    const started = performance.now()
    let lastProgress = started
    let lastLook = started
    let seen = { memory: 0, logged: 0 }
    while (performance.now() - lastProgress < stallMs) {
      if (this.exited) {
        throw new EngineDiedError(
          'engine_load_failed',
          `model "${this.modelId}" failed to load: the engine ${this.exitReason}${this.tellingLine()}`,
          this.killedBy,
          true,
        )
      }
      try {
        const res = await fetch(`${this.baseUrl}/health`, { signal: AbortSignal.timeout(1_000) })
        await res.body?.cancel()
        if (res.status === 200) return
      } catch {
        // not listening yet
      }
      await new Promise((resolve) => setTimeout(resolve, HEALTH_POLL_MS))
      if (performance.now() - lastLook >= PROGRESS_LOOK_MS) {
        lastLook = performance.now()
        const now = { memory: await this.residentBytes(), logged: this.loggedBytes }
        if (now.memory - seen.memory >= PROGRESS_BYTES || now.logged > seen.logged) lastProgress = lastLook
        seen = { memory: Math.max(seen.memory, now.memory), logged: now.logged }
      }
    }
    const took = Math.round((performance.now() - started) / 1000)
    throw new ModelError('engine_load_failed', `model "${this.modelId}" did not load: no progress for ${stallMs} ms (${took} s in all)${this.tellingLine()}`)
  }

  /** The log line that best explains a failure, for the error message. */
  private tellingLine(): string {
    const lines = this.logTail.trim().split('\n').filter(Boolean)
    const telling = lines.findLast((l) => /error|failed|abort|exception|terminate/i.test(l)) ?? lines.at(-1)
    return telling ? ` (engine log: ${telling.trim().slice(0, 300)})` : ''
  }
}

/** How long `ps` may take before its answer is not waited for. */
const PS_TIMEOUT_MS = 5_000

/**
 * A process's resident memory in bytes, 0 where it cannot be told. Never blocks the event loop
 * (the server answers everyone while it looks): Linux's /proc read asynchronously, elsewhere `ps`
 * run as a child. `sources` moves both, for tests.
 */
export async function residentBytesOf(pid: number, sources: { proc?: string; ps?: string } = {}): Promise<number> {
  const proc = sources.proc ?? '/proc'
  for (const [file, field] of [
    ['status', 'VmRSS'],
    ['smaps_rollup', 'Rss'],
  ] as const) {
    try {
      const kb = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(await readFile(`${proc}/${pid}/${file}`, 'utf8'))?.[1]
      if (kb) return Number(kb) * 1024
    } catch {
      // not Linux, or the process is gone
    }
  }
  return new Promise((resolve) => {
    execFile(sources.ps ?? 'ps', ['-o', 'rss=', '-p', String(pid)], { encoding: 'utf8', timeout: PS_TIMEOUT_MS }, (error, stdout) => {
      const kb = Number(stdout.trim())
      resolve(error || !Number.isFinite(kb) ? 0 : kb * 1024)
    })
  })
}

/** A port nobody listens on now; llama-server binds it a moment later. */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer()
    probe.once('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number }
      probe.close(() => resolve(port))
    })
  })
}

const hasSetpriv = process.platform === 'linux' && spawnSync('setpriv', ['--version'], { stdio: 'ignore' }).status === 0

/**
 * Linux kills the engine when its parent dies (even by SIGKILL) through the parent-death signal,
 * which util-linux's setpriv sets before it execs the engine (same pid, no extra process). Elsewhere
 * a small shell watches the parent and takes the engine down with it.
 */
export function orphanSafe(program: string, args: string[]): [string, string[]] {
  if (hasSetpriv) return ['setpriv', ['--pdeathsig', 'KILL', '--', program, ...args]]
  if (process.platform === 'win32') return [program, args]
  const watch = `"$@" & child=$!; while kill -0 ${process.pid} 2>/dev/null && kill -0 $child 2>/dev/null; do sleep 1; done; kill -9 $child 2>/dev/null; wait $child`
  return ['/bin/sh', ['-c', watch, 'llama-server', program, ...args]]
}
