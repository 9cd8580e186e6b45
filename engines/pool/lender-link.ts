/**
 * The borrower's side of a pooled model: for each lender, a check (its key, that it lends, the
 * same llama.cpp) and the endpoint llama-server's `--rpc` connects to. Each connection is one
 * tunnel: an HTTP request to the lender's own port with the key, upgraded to a raw stream
 * (main/server/services/lending/lend-tunnel.ts). Where the lender is plain HTTP at an IPv4 address, llama.cpp
 * makes that request itself (patch llama-20, GGML_RPC_HTTP_UPGRADE), so its bytes pass through no
 * process of ours on this machine; for an https lender, or one reached over IPv6 only, a local
 * forwarder on a thread of its own makes it (tunnel-worker.mjs). Nothing of the RPC protocol is
 * read or changed here; llama.cpp places the layers and talks to the lenders itself.
 */
import { lookup } from 'node:dns/promises'
import { Worker } from 'node:worker_threads'
import { ModelError } from '../errors.ts'

export interface PoolLender {
  /** The lending Hearth's own address: `http://desk:8181`. */
  url: string
  /** The environment variable its key is in (a key that may lend there). */
  apiKeyEnv?: string
}

/** What the lender says of itself (`GET /api/lend`). */
interface LendStatus {
  llama_cpp_commit: string
  rpc_protocol: string
  running: boolean
  devices: Array<{ name: string; free_mib: number; total_mib: number }>
}

const CHECK_TIMEOUT_MS = 5_000
/** Where a lender's tunnel is, and the protocol its HTTP request upgrades to (main/server/services/lending/lend-tunnel.ts serves it). */
export const LEND_CONNECT_PATH = '/api/lend/connect'
export const LEND_PROTOCOL = 'hearth-rpc'

/** The thread that carries the tunnels: plain JavaScript, beside this file (and the desktop bundle). */
const TUNNEL_WORKER = new URL('./tunnel-worker.mjs', import.meta.url)

export class LenderLink {
  private dropListener: ((reason: string) => void) | undefined
  private closed = false

  private constructor(
    readonly lender: PoolLender,
    /** Where llama-server's `--rpc` connects: the lender itself, or the local forwarder. */
    readonly endpoint: string,
    /** The memory the lender has free for this borrower, in MiB. */
    readonly freeMiB: number,
    private readonly key: string | undefined,
    /** The forwarder's thread, where llama.cpp cannot make the upgrade itself. */
    private readonly worker?: Worker,
  ) {
    worker?.on('message', (message: { type: string; reason?: string }) => {
      if (message.type === 'drop' && !this.closed) this.dropListener?.(`lender ${this.name} ${message.reason}`)
    })
  }

  /** `desk:8181`: how messages name the machine. */
  get name(): string {
    return new URL(this.lender.url).host
  }

  /** This lender's line of GGML_RPC_HTTP_UPGRADE, where llama.cpp makes the upgrade itself. */
  get upgrade(): string | undefined {
    if (this.worker) return undefined
    return `${this.endpoint} ${LEND_CONNECT_PATH} ${LEND_PROTOCOL} ${this.key ? `Bearer ${this.key}` : ''}`.trimEnd()
  }

  /** Checks the lender (a 502 naming it when it cannot lend to us) and works out how llama.cpp reaches it. */
  static async open(lender: PoolLender, commit: string, env: NodeJS.ProcessEnv = process.env): Promise<LenderLink> {
    const host = new URL(lender.url).host
    const key = lender.apiKeyEnv ? env[lender.apiKeyEnv] : undefined
    if (lender.apiKeyEnv && !key) throw unavailable(`the key for lender ${host} is not set: put it in the environment variable ${lender.apiKeyEnv}`)
    if (key && /[\0-\x1f\x7f]/.test(key)) throw unavailable(`the key for lender ${host} (${lender.apiKeyEnv}) holds a control character; no HTTP header can carry it`)
    const status = await checkLender(lender.url, key)
    if (status.llama_cpp_commit !== commit) {
      throw unavailable(
        `lender ${host} runs llama.cpp ${status.llama_cpp_commit.slice(0, 12)} (RPC protocol ${status.rpc_protocol}) and this machine ${commit.slice(0, 12)}: ` +
          'a pooled model needs the same llama.cpp on every machine; update Hearth on both',
      )
    }
    if (!status.running) throw unavailable(`lender ${host} has stopped lending (its rpc-server is not running)`)
    const freeMiB = status.devices.reduce((sum, d) => sum + d.free_mib, 0)
    if (freeMiB <= 0) throw unavailable(`lender ${host} has no memory left to lend`)
    const direct = await directEndpoint(lender.url)
    if (direct) return new LenderLink(lender, direct, freeMiB, key)
    const worker = new Worker(TUNNEL_WORKER, { workerData: { url: lender.url, key, path: LEND_CONNECT_PATH, protocol: LEND_PROTOCOL } })
    const port = await new Promise<number>((resolve, reject) => {
      worker.once('error', reject)
      worker.once('message', (message: { type: string; port?: number }) => (message.type === 'listening' ? resolve(message.port!) : reject(new Error(`tunnel thread: ${message.type}`))))
    })
    return new LenderLink(lender, `127.0.0.1:${port}`, freeMiB, key, worker)
  }

  /** Called once when the forwarder sees a tunnel to the lender break while the model runs. */
  onDrop(listener: (reason: string) => void): void {
    this.dropListener = listener
  }

  /**
   * What a line of llama-server's log says happened to this lender, where llama.cpp reaches it
   * itself (patch llama-20 names the endpoint); undefined for any other line.
   */
  reasonIn(line: string): string | undefined {
    if (this.worker || !line.includes(this.endpoint)) return undefined
    if (line.includes(`connection to ${this.endpoint} was lost`) || line.includes(`${this.endpoint} closed the connection`)) {
      return `lender ${this.name} dropped off (its connection closed)`
    }
    const refusal = line.split(`${this.endpoint} refused the upgrade: `)[1]
    if (refusal !== undefined) return `lender ${this.name} refused the tunnel (HTTP ${/^HTTP\/[\d.]+ (\d+)/.exec(refusal)?.[1] ?? '?'})`
    if (line.includes(`Failed to connect to ${this.endpoint}`)) return `lender ${this.name} cannot be reached`
    return undefined
  }

  /** Ends the forwarder and every tunnel with it (a terminated thread's sockets close). */
  close(): void {
    if (this.closed) return
    this.closed = true
    void this.worker?.terminate()
  }
}

/** The environment that lets llama.cpp open the direct lenders' tunnels itself (patch llama-20). */
export function rpcUpgradeEnvironment(links: readonly LenderLink[]): Record<string, string> {
  const lines = links.flatMap((l) => l.upgrade ?? [])
  return lines.length > 0 ? { GGML_RPC_HTTP_UPGRADE: lines.join('\n') } : {}
}

/**
 * `address:port` for llama.cpp's `--rpc` where it can reach the lender itself: plain HTTP, at an
 * IPv4 address (llama.cpp's client speaks neither TLS nor IPv6); undefined where it cannot.
 */
async function directEndpoint(url: string): Promise<string | undefined> {
  const target = new URL(url)
  if (target.protocol !== 'http:') return undefined
  try {
    const { address } = await lookup(target.hostname, { family: 4 })
    return `${address}:${target.port || 80}`
  } catch {
    return undefined
  }
}

async function checkLender(url: string, key: string | undefined): Promise<LendStatus> {
  const host = new URL(url).host
  let res: Response
  try {
    res = await fetch(new URL('/api/lend', url), { headers: key ? { authorization: `Bearer ${key}` } : {}, signal: AbortSignal.timeout(CHECK_TIMEOUT_MS) })
  } catch (e) {
    const cause = (e as { cause?: { code?: string } }).cause?.code ?? (e as Error).message
    throw unavailable(`lender ${host} cannot be reached (${cause})`)
  }
  const body = (await res.json().catch(() => undefined)) as (LendStatus & { error?: { message?: string } }) | undefined
  if (res.status === 401) throw unavailable(`lender ${host} refused the key${key ? '' : ' (none was sent: set api_key_env)'}`)
  if (res.status === 403) throw unavailable(`lender ${host} does not let this key borrow: make it with "lend": true there`)
  if (res.status === 409) throw unavailable(`lender ${host} does not lend memory (start its Hearth with --lend)`)
  if (!res.ok || !body || typeof body.llama_cpp_commit !== 'string') {
    throw unavailable(`lender ${host} answered ${res.status}${body?.error?.message ? `: ${body.error.message}` : ''}; is it a Hearth that lends?`)
  }
  return body
}

function unavailable(message: string): ModelError {
  return new ModelError('remote_unavailable', message)
}
