/**
 * The lender's side of a pooled model: llama.cpp's own `ggml-rpc-server`, on loopback only (it has
 * no authentication at all; the server's lend tunnel is the only way in), lending at most the
 * memory the person set (patch llama-19) and keeping the tensors it was sent in its cache, so
 * the borrower's next load sends hashes instead of weights.
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
}

export interface LentDevice {
  name: string
  description: string
  totalMiB: number
  freeMiB: number
}

const START_TIMEOUT_MS = 20_000

export class RpcLender {
  /** Set once the server has said its protocol version and devices. */
  protocol = ''
  devices: LentDevice[] = []
  private output = ''
  private stopped = false

  private constructor(
    private readonly child: ChildProcess,
    readonly port: number,
    readonly memoryMiB: number | undefined,
  ) {}

  static async start(options: LenderOptions): Promise<RpcLender> {
    const port = await freeLoopbackPort()
    mkdirSync(options.cacheDir, { recursive: true })
    const args = ['--host', '127.0.0.1', '--port', String(port), '--threads', String(options.threads), '--cache']
    const [command, commandArgs] = orphanSafe(options.program, args)
    const child = spawn(command, commandArgs, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        LLAMA_CACHE: options.cacheDir,
        ...(options.memoryMiB !== undefined ? { GGML_RPC_MEM_CAP_MB: String(options.memoryMiB) } : {}),
      },
    })
    const lender = new RpcLender(child, port, options.memoryMiB)
    const collect = (chunk: Buffer) => {
      lender.output = (lender.output + chunk.toString('utf8')).slice(-16_384)
    }
    child.stdout?.on('data', collect)
    child.stderr?.on('data', collect)
    child.on('exit', (code, signal) => {
      if (!lender.stopped) options.log(`warning: the lent memory's rpc-server stopped (${signal ?? `code ${code}`}); nothing is lent until the server restarts`)
    })
    try {
      await lender.waitForListening()
    } catch (e) {
      lender.stop()
      throw e
    }
    lender.readBanner()
    return lender
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null
  }

  /** A connection to the rpc-server, for one tunnel. */
  connect(): Socket {
    return createConnection({ host: '127.0.0.1', port: this.port })
  }

  stop(): void {
    this.stopped = true
    this.child.kill('SIGKILL')
  }

  private async waitForListening(): Promise<void> {
    const deadline = performance.now() + START_TIMEOUT_MS
    while (performance.now() < deadline) {
      if (!this.alive) throw new Error(`ggml-rpc-server did not start: ${this.output.trim().split('\n').at(-1) ?? 'no output'}`)
      const ok = await knock(this.port)
      // The banner (protocol, devices) is printed to a pipe, so it arrives with the flush that the
      // first accepted connection makes: the knock above.
      if (ok && /Accepted client connection/.test(this.output)) return
      await new Promise((resolve) => setTimeout(resolve, 50))
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
