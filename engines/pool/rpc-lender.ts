/**
 * The lender's side of a pooled model: llama.cpp's own `ggml-rpc-server`, on loopback only (it has
 * no authentication at all; the server's lend tunnel is the only way in), lending at most the
 * memory the person set (patch llama-19) and keeping the tensors it was sent in its cache, so
 * the borrower's next load sends hashes instead of weights.
 *
 * It is supervised: when it dies (patch llama-21 refuses the malformed messages that killed it,
 * but a backend's own assert may still end it), it is started again after a short backoff, and
 * the tunnels wait for it. Whoever was borrowing when it died is named in the log and in
 * `lastExit`, which a borrower reads to say why its lender dropped off. Dying again and again with
 * no borrower (it cannot start, or cannot stay up on its own) is a crash loop: lending stops and
 * says why. A borrower that kills it on purpose only restarts it; that is not a loop, so no key
 * can switch lending off for the others.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync } from 'node:fs'
import { createConnection, type Socket } from 'node:net'
import { freeLoopbackPort, orphanSafe } from '../engine-server-process.ts'

export interface LenderOptions {
  /** The ggml-rpc-server program of this machine's llama.cpp build. */
  program: string
  /** The most memory lent, in MiB; undefined: all the device has free. */
  memoryMiB: number | undefined
  threads: number
  /** Where lent tensors are kept between loads (llama.cpp's `-c`, under LLAMA_CACHE). */
  cacheDir: string
  log: (line: string) => void
  /** The restart policy; the defaults are below (tests shorten them). */
  policy?: Partial<RestartPolicy>
}

export interface RestartPolicy {
  /** The first restart's delay; each crash within `windowMs` of the last doubles it, up to `maxDelayMs`. */
  firstDelayMs: number
  maxDelayMs: number
  /** This many deaths with no borrower within `windowMs` is a crash loop: lending stops. */
  loopCount: number
  windowMs: number
}

const DEFAULT_POLICY: RestartPolicy = { firstDelayMs: 100, maxDelayMs: 2_000, loopCount: 5, windowMs: 60_000 }

export interface LentDevice {
  name: string
  description: string
  totalMiB: number
  freeMiB: number
}

/** How the rpc-server last ended on its own. */
export interface LenderExit {
  /** Unix milliseconds. */
  at: number
  /** `SIGSEGV`, or `code 1`, with its last words: `SIGABRT: ggml-rpc.cpp:1451: GGML_ASSERT(…) failed`. */
  reason: string
  /** Who was borrowing (their tunnels' labels) when it died; empty: it died on its own. */
  borrowers: string[]
}

export type LenderState = 'running' | 'restarting' | 'stopped'

const START_TIMEOUT_MS = 20_000
/** How long a tunnel waits for a restarting rpc-server before it is refused. */
const RESTART_WAIT_MS = 5_000
/** The rpc-server's refusals said in the log, at most this many a second. */
const REFUSALS_PER_SECOND = 5
/** A tunnel that closed this recently still counts as borrowing when the rpc-server dies. */
const BLAME_GRACE_MS = 250

export class RpcLender {
  /** Set once the server has said its protocol version and devices. */
  protocol = ''
  devices: LentDevice[] = []
  state: LenderState = 'running'
  /** Times it was started again after it died. */
  restarts = 0
  /** Times it died without being asked to. */
  crashes = 0
  lastExit: LenderExit | undefined
  /** Why lending stopped (a crash loop); undefined while it lends. */
  problem: string | undefined
  private current: RpcServerProcess
  private readonly policy: RestartPolicy
  /** When it died lately (any death), and when it died with no borrower: the backoff and the loop. */
  private recentDeaths: number[] = []
  private recentLonelyDeaths: number[] = []
  private restartTimer: NodeJS.Timeout | undefined
  private readonly waiting = new Set<() => void>()
  /** The tunnels open now, by label: who borrows. */
  private readonly open = new Map<Socket, string>()
  private stopped = false

  private constructor(
    private readonly options: LenderOptions,
    first: RpcServerProcess,
  ) {
    this.policy = { ...DEFAULT_POLICY, ...options.policy }
    this.current = first
    this.adopt(first)
  }

  /** Starts the rpc-server; rejects when it cannot start (the server then does not lend at all). */
  static async start(options: LenderOptions): Promise<RpcLender> {
    mkdirSync(options.cacheDir, { recursive: true })
    return new RpcLender(options, await RpcServerProcess.start(options))
  }

  get memoryMiB(): number | undefined {
    return this.options.memoryMiB
  }

  get alive(): boolean {
    return this.state === 'running' && this.current.alive
  }

  /**
   * A connection to the rpc-server for one tunnel, labelled with who it is for (the log and
   * `lastExit` name them if the server dies). Waits for a restarting server, up to a few seconds;
   * rejects with the reason when lending has stopped or the server does not come back in time.
   */
  async connect(label: string): Promise<Socket> {
    if (this.state === 'restarting') await this.backOrTimeout()
    if (this.state !== 'running') throw new Error(this.problem ?? "this Hearth's rpc-server is starting again after a crash; try again in a moment")
    const socket = this.current.connect()
    this.open.set(socket, label)
    // Kept a moment after it closes: a death closes its tunnels, perhaps before the death itself is heard of.
    socket.once('close', () => setTimeout(() => this.open.delete(socket), BLAME_GRACE_MS).unref())
    return socket
  }

  stop(): void {
    this.stopped = true
    clearTimeout(this.restartTimer)
    this.current.stop()
    this.wake()
  }

  private adopt(process: RpcServerProcess): void {
    this.protocol = process.protocol
    this.devices = process.devices
    process.onExit((reason) => this.died(process, reason))
  }

  private died(process: RpcServerProcess, reason: string): void {
    if (this.stopped || process !== this.current) return
    const now = Date.now()
    const borrowers = [...new Set(this.open.values())]
    this.crashes++
    this.lastExit = { at: now, reason, borrowers }
    this.recentDeaths = [...this.recentDeaths.filter((t) => now - t < this.policy.windowMs), now]
    if (borrowers.length === 0) this.recentLonelyDeaths = [...this.recentLonelyDeaths.filter((t) => now - t < this.policy.windowMs), now]
    if (this.recentLonelyDeaths.length >= this.policy.loopCount) {
      this.state = 'stopped'
      this.problem = `its rpc-server died ${this.recentLonelyDeaths.length} times within ${Math.round(this.policy.windowMs / 1000)} s with no borrower (last: ${reason}); lending has stopped until Hearth is restarted there`
      this.options.log(`warning: lend: ${this.problem}`)
      this.wake()
      return
    }
    const delayMs = Math.min(this.policy.maxDelayMs, this.policy.firstDelayMs * 2 ** (this.recentDeaths.length - 1))
    const who = borrowers.length > 0 ? ` while lending to ${borrowers.join(', ')}` : ''
    this.options.log(`warning: lend: the rpc-server died (${reason})${who}; starting it again in ${(delayMs / 1000).toFixed(1)} s`)
    this.state = 'restarting'
    this.restartTimer = setTimeout(() => void this.restart(), delayMs)
  }

  private async restart(): Promise<void> {
    if (this.stopped) return
    let next: RpcServerProcess
    try {
      next = await RpcServerProcess.start(this.options)
    } catch (e) {
      // It could not start: a death with no borrower, under the same policy.
      const placeholder = this.current
      return this.died(placeholder, `it did not start again: ${e instanceof Error ? e.message : String(e)}`)
    }
    if (this.stopped) return next.stop()
    this.current = next
    this.adopt(next)
    this.restarts++
    this.state = 'running'
    this.options.log(`lend: the rpc-server is lending again (restart ${this.restarts})`)
    this.wake()
  }

  private backOrTimeout(): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer)
        this.waiting.delete(done)
        resolve()
      }
      const timer = setTimeout(done, RESTART_WAIT_MS)
      this.waiting.add(done)
    })
  }

  private wake(): void {
    for (const done of [...this.waiting]) done()
  }
}

/** One run of ggml-rpc-server. */
class RpcServerProcess {
  protocol = ''
  devices: LentDevice[] = []
  private output = ''
  private stopped = false

  private constructor(
    private readonly child: ChildProcess,
    readonly port: number,
    private readonly memoryMiB: number | undefined,
  ) {}

  static async start(options: LenderOptions): Promise<RpcServerProcess> {
    const port = await freeLoopbackPort()
    const args = ['--host', '127.0.0.1', '--port', String(port), '--threads', String(options.threads), '--cache']
    const [command, commandArgs] = orphanSafe(options.program, args)
    const child = spawn(command, commandArgs, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        LLAMA_CACHE: options.cacheDir,
        // ggml's abort otherwise attaches gdb for a backtrace, which holds a restart up for a second or more.
        GGML_NO_BACKTRACE: '1',
        ...(options.memoryMiB !== undefined ? { GGML_RPC_MEM_CAP_MB: String(options.memoryMiB) } : {}),
      },
    })
    const server = new RpcServerProcess(child, port, options.memoryMiB)
    const collect = (chunk: Buffer) => {
      server.output = (server.output + chunk.toString('utf8')).slice(-16_384)
    }
    child.stdout?.on('data', collect)
    child.stderr?.on('data', collect)
    // What it refused and why (patch llama-21 names the check), in the server's log: a few lines a second at most.
    let said = 0
    let window = 0
    child.stderr?.on('data', (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!/^\[\w+\] /.test(line)) continue
        if (Date.now() - window > 1_000) {
          window = Date.now()
          said = 0
        }
        if (++said <= REFUSALS_PER_SECOND) options.log(`lend: rpc-server: ${line.slice(0, 300)}`)
      }
    })
    try {
      await server.waitForListening()
    } catch (e) {
      server.stop()
      throw e
    }
    server.readBanner()
    return server
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null
  }

  /** Called once if it ends without being stopped, with why: the signal or code, and its last words. */
  onExit(listener: (reason: string) => void): void {
    const told = (code: number | null, signal: NodeJS.Signals | null) => {
      if (!this.stopped) listener(`${signal ?? `code ${code}`}${this.lastWords() ? `: ${this.lastWords()}` : ''}`)
    }
    if (!this.alive) told(this.child.exitCode, this.child.signalCode)
    // 'close', not 'exit': its output is read to the end by then.
    else this.child.once('close', told)
  }

  connect(): Socket {
    return createConnection({ host: '127.0.0.1', port: this.port })
  }

  stop(): void {
    this.stopped = true
    this.child.kill('SIGKILL')
  }

  /** The line that says why it died: an assert or error its last client's session printed; '' when none did. */
  private lastWords(): string {
    const session = this.output.slice(this.output.lastIndexOf('Accepted client connection'))
    if (session.includes('Client connection closed')) return ''
    const lines = session
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'))
    const said = lines.filter((l) => /GGML_ASSERT|GGML_ABORT|error|fatal|abort|terminate/i.test(l)).at(-1) ?? ''
    // A path to the source says nothing a borrower needs: the file name is enough.
    return said.replace(/\/\S*\/(ggml[^/\s]*\.(?:c|cpp)):/g, '$1:').slice(0, 300)
  }

  private async waitForListening(): Promise<void> {
    const deadline = performance.now() + START_TIMEOUT_MS
    while (performance.now() < deadline) {
      if (!this.alive) throw new Error(`ggml-rpc-server did not start: ${this.output.trim().split('\n').at(-1) ?? 'no output'}`)
      const ok = await knock(this.port)
      // The banner (protocol, devices) is printed to a pipe, so it arrives with the flush that the
      // first accepted connection makes: the knock above.
      if (ok && /Accepted client connection/.test(this.output)) return
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    throw new Error(`ggml-rpc-server did not listen within ${START_TIMEOUT_MS} ms`)
  }

  /** `Starting RPC server v3.0.0` and `  CPU: AMD EPYC … (64000 MiB, 60000 MiB free)`. */
  private readBanner(): void {
    this.protocol = /Starting RPC server v(\d+\.\d+\.\d+)/.exec(this.output)?.[1] ?? ''
    this.devices = [...this.output.matchAll(/^\s+(\S+): (.*) \((\d+) MiB, (\d+) MiB free\)$/gm)].map((m) => ({
      name: m[1]!,
      description: m[2]!,
      totalMiB: this.memoryMiB === undefined ? Number(m[3]) : Math.min(Number(m[3]), this.memoryMiB),
      freeMiB: this.memoryMiB === undefined ? Number(m[4]) : Math.min(Number(m[4]), this.memoryMiB),
    }))
  }
}

/**
 * Whether something listens on loopback `port`: a bare connection that says nothing, which
 * rpc-server closes; it is only a knock.
 */
export function knock(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const probe = createConnection({ host: '127.0.0.1', port })
    probe.once('connect', () => (probe.destroy(), resolve(true)))
    probe.once('error', () => resolve(false))
  })
}
