/**
 * The borrower's side of a pooled model: for each lender, a check (its key, that it lends, the
 * same llama.cpp) and the endpoint llama-server's `--rpc` connects to. Each connection is one
 * tunnel: an HTTP request to the lender's own port with the key, upgraded to a raw stream
 * (main/server/services/lending/lend-tunnel.ts). Where the lender is plain HTTP at an IPv4 address, llama.cpp
 * makes that request itself (patch llama-20, GGML_RPC_HTTP_UPGRADE), so its bytes pass through no
 * process of ours on this machine; for an https lender, or one reached over IPv6 only, a local
 * forwarder on a thread of its own makes it (tunnel-worker.mjs). Nothing of the RPC protocol is
 * read or changed here; llama.cpp places the layers and talks to the lenders itself.
 *
 * A lender named by a host name (`desk`, `desk.local`) is looked up once, here, as the system
 * looks names up (hosts file, DNS, mDNS where the system has it): the check, llama.cpp (which is
 * given the address) and the forwarder all reach the same address, and the name stays in `Host`
 * and in every message.
 */
import { lookup as systemLookup } from 'node:dns/promises'
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { isIP } from 'node:net'
import { Worker } from 'node:worker_threads'
import { ModelError } from '../errors.ts'

export interface PoolLender {
  /** The lending Hearth's own address: `http://desk:8181`. */
  url: string
  /** The environment variable its key is in (a key that may lend there). */
  apiKeyEnv?: string
}

/** What the lender says of itself (`GET /api/lend`); a lender older than its rpc-server's supervision says no `state`. */
interface LendStatus {
  llama_cpp_commit: string
  rpc_protocol: string
  running: boolean
  state?: 'running' | 'restarting' | 'stopped'
  last_exit?: { at: number; reason: string; borrowers: string[] } | null
  problem?: string | null
  devices: Array<{ name: string; free_mib: number; total_mib: number }>
}

/** A host name's addresses, as the system (or a test) resolves it. */
export type HostLookup = (hostname: string) => Promise<Array<{ address: string; family: number }>>

export interface LenderLinkOptions {
  /** Where the lenders' keys are (`api_key_env` names a variable of it). */
  env?: NodeJS.ProcessEnv
  /** How host names are resolved; the system's resolver by default. */
  lookup?: HostLookup
}

const CHECK_TIMEOUT_MS = 5_000
/** A lender whose rpc-server is starting again after a crash is asked again for this long. */
const RESTART_WAIT_MS = 5_000
/** How long a borrower asks a lender that dropped off why, before it says only that it did. */
const EXPLAIN_TIMEOUT_MS = 2_000
/** Where a lender's tunnel is, and the protocol its HTTP request upgrades to (main/server/services/lending/lend-tunnel.ts serves it). */
export const LEND_CONNECT_PATH = '/api/lend/connect'
export const LEND_PROTOCOL = 'hearth-rpc'

/** The thread that carries the tunnels: plain JavaScript, beside this file (and the desktop bundle). */
const TUNNEL_WORKER = new URL('./tunnel-worker.mjs', import.meta.url)

export class LenderLink {
  private dropListener: ((reason: string) => void) | undefined
  private closed = false

  /** When the lender was checked (unix ms): a death of its rpc-server after this one is this link's. */
  private readonly openedAt = Date.now()

  private constructor(
    readonly lender: PoolLender,
    /** Where llama-server's `--rpc` connects: the lender itself, or the local forwarder. */
    readonly endpoint: string,
    /** The memory the lender has free for this borrower, in MiB. */
    readonly freeMiB: number,
    private readonly key: string | undefined,
    /** The address the lender's name resolved to. */
    private readonly address: ResolvedAddress,
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
  static async open(lender: PoolLender, commit: string, options: LenderLinkOptions = {}): Promise<LenderLink> {
    const env = options.env ?? process.env
    const host = new URL(lender.url).host
    const key = lender.apiKeyEnv ? env[lender.apiKeyEnv] : undefined
    if (lender.apiKeyEnv && !key) throw unavailable(`the key for lender ${host} is not set: put it in the environment variable ${lender.apiKeyEnv}`)
    if (key && /[\0-\x1f\x7f]/.test(key))
      throw unavailable(`the key for lender ${host} (${lender.apiKeyEnv}) holds a control character; no HTTP header can carry it`)
    const address = await resolveLender(lender.url, options.lookup ?? ((hostname) => systemLookup(hostname, { all: true })))
    const status = await checkLender(lender, key, address)
    if (status.llama_cpp_commit !== commit) {
      throw unavailable(
        `lender ${host} runs llama.cpp ${status.llama_cpp_commit.slice(0, 12)} (RPC protocol ${status.rpc_protocol}) and this machine ${commit.slice(0, 12)}: ` +
          'a pooled model needs the same llama.cpp on every machine; update Hearth on both',
      )
    }
    if (status.state === 'restarting') {
      throw unavailable(
        `lender ${host} is starting its rpc-server again (it died: ${status.last_exit?.reason ?? 'unknown'}) and did not come back within ${RESTART_WAIT_MS / 1000} s; try again in a moment`,
      )
    }
    if (!status.running) {
      const why = status.problem ?? status.last_exit?.reason
      throw unavailable(`lender ${host} has stopped lending${why ? `: ${why}` : ' (its rpc-server is not running)'}`)
    }
    const freeMiB = status.devices.reduce((sum, d) => sum + d.free_mib, 0)
    if (freeMiB <= 0) throw unavailable(`lender ${host} has no memory left to lend`)
    const direct = directEndpoint(lender.url, address)
    if (direct) return new LenderLink(lender, direct, freeMiB, key, address)
    const worker = new Worker(TUNNEL_WORKER, {
      workerData: { url: lender.url, key, path: LEND_CONNECT_PATH, protocol: LEND_PROTOCOL, address: address.address, family: address.family },
    })
    const port = await new Promise<number>((resolve, reject) => {
      worker.once('error', reject)
      worker.once('message', (message: { type: string; port?: number }) =>
        message.type === 'listening' ? resolve(message.port!) : reject(new Error(`tunnel thread: ${message.type}`)),
      )
    })
    return new LenderLink(lender, `127.0.0.1:${port}`, freeMiB, key, address, worker)
  }

  /**
   * `reason` (the lender dropped off), with why where the lender can say: its rpc-server died
   * (how, and that it starts again) after this link was made. A lender that is gone, or says
   * nothing new, leaves the reason as it is.
   */
  async explainDrop(reason: string): Promise<string> {
    const deadline = Date.now() + EXPLAIN_TIMEOUT_MS
    // The lender hears of its rpc-server's death as its tunnels close; a moment later at most.
    for (let attempt = 0; attempt < 3 && Date.now() < deadline; attempt++) {
      const status = await lendStatus(this.lender.url, this.key, this.address, Math.max(1, deadline - Date.now())).catch(() => undefined)
      if (!status?.body) return reason
      const exit = status.body.last_exit
      if (exit && exit.at * 1000 >= this.openedAt - 1_000) {
        const after = status.body.state === 'stopped' ? `; it has stopped lending: ${status.body.problem ?? 'it died too often'}` : ', and it is starting again'
        return `lender ${this.name} dropped off: its rpc-server died (${exit.reason})${after}`
      }
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    return reason
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

interface ResolvedAddress {
  address: string
  family: 4 | 6
}

/**
 * The address a lender's URL names: an IP literal as it is, a name as the system resolves it
 * (IPv4 first: llama.cpp reaches only those itself). A name that does not resolve is a 502 that
 * says how to make it resolve.
 */
async function resolveLender(url: string, lookup: HostLookup): Promise<ResolvedAddress> {
  const target = new URL(url)
  const hostname = target.hostname.replace(/^\[(.*)\]$/, '$1')
  const literal = isIP(hostname)
  if (literal !== 0) return { address: hostname, family: literal as 4 | 6 }
  let found: Array<{ address: string; family: number }>
  try {
    found = await lookup(hostname)
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? (e as Error).message
    const fix = hostname.endsWith('.local')
      ? 'a .local name needs mDNS on this machine (Avahi and nss-mdns on Linux; macOS and Windows have it), or use its address'
      : `use its address, or give the name an address here (the hosts file, or your network's DNS)`
    throw unavailable(`lender ${target.host} cannot be reached: the name "${hostname}" does not resolve here (${code}); ${fix}`)
  }
  const best = found.find((a) => a.family === 4) ?? found[0]
  if (!best) throw unavailable(`lender ${target.host} cannot be reached: the name "${hostname}" has no address here`)
  return { address: best.address, family: best.family === 6 ? 6 : 4 }
}

/**
 * `address:port` for llama.cpp's `--rpc` where it can reach the lender itself: plain HTTP, at an
 * IPv4 address (llama.cpp's client speaks neither TLS nor IPv6); undefined where it cannot.
 */
function directEndpoint(url: string, address: ResolvedAddress): string | undefined {
  const target = new URL(url)
  if (target.protocol !== 'http:' || address.family !== 4) return undefined
  return `${address.address}:${target.port || 80}`
}

/** `GET /api/lend` at the lender's resolved address, its name in `Host` (and in TLS's server name). */
function lendStatus(
  url: string,
  key: string | undefined,
  address: ResolvedAddress,
  timeoutMs: number,
): Promise<{ status: number; body: (LendStatus & { error?: { message?: string; code?: string } }) | undefined }> {
  const target = new URL('/api/lend', url)
  const request = target.protocol === 'https:' ? httpsRequest : httpRequest
  return new Promise((resolve, reject) => {
    const req = request(target, {
      headers: key ? { authorization: `Bearer ${key}` } : {},
      // The address found once: the check reaches where llama.cpp and the forwarder will.
      lookup: (_hostname, options, callback) =>
        (options as { all?: boolean }).all
          ? (callback as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [address])
          : callback(null, address.address, address.family),
      timeout: timeoutMs,
    })
    req.on('timeout', () => req.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })))
    req.on('error', reject)
    req.on('response', (res: IncomingMessage) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('error', reject)
      res.on('end', () => {
        let body
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
        } catch {
          body = undefined
        }
        resolve({ status: res.statusCode ?? 0, body })
      })
    })
    req.end()
  })
}

async function checkLender(lender: PoolLender, key: string | undefined, address: ResolvedAddress): Promise<LendStatus> {
  const { host, hostname } = new URL(lender.url)
  const deadline = Date.now() + RESTART_WAIT_MS
  for (;;) {
    let answer: Awaited<ReturnType<typeof lendStatus>>
    try {
      answer = await lendStatus(lender.url, key, address, CHECK_TIMEOUT_MS)
    } catch (e) {
      throw unavailable(`lender ${host} cannot be reached (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`)
    }
    const { status, body } = answer
    const variable = lender.apiKeyEnv ?? 'the variable api_key_env names'
    if (status === 401) {
      throw unavailable(
        key
          ? `lender ${host} refused the key in ${variable}: make a key there with "lend": true (POST /api/keys) and put it in ${variable}`
          : `lender ${host} refused the key (none was sent): set api_key_env, and put a key that may lend there in that variable`,
      )
    }
    // A Host the lender does not know (an older Hearth's DNS-rebinding guard): the name, not the key.
    if (status === 403 && body?.error?.code === 'forbidden_host') {
      throw unavailable(
        `lender ${host} refused the name "${hostname}" (it answers only the names it knows): update Hearth there (it lets borrowers in by any name), ` +
          `or add "${hostname.replace(/^\[(.*)\]$/, '$1')}" to allowed_hosts in its settings, or name it by its address`,
      )
    }
    if (status === 403) throw unavailable(`lender ${host} does not let this key borrow: make it with "lend": true there`)
    if (status === 409) throw unavailable(`lender ${host} does not lend memory (start its Hearth with --lend)`)
    if (status !== 200 || !body || typeof body.llama_cpp_commit !== 'string') {
      throw unavailable(`lender ${host} answered ${status}${body?.error?.message ? `: ${body.error.message}` : ''}; is it a Hearth that lends?`)
    }
    // Its rpc-server died a moment ago and is starting again: ask again, a few seconds at most.
    if (body.state === 'restarting' && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250))
      continue
    }
    return body
  }
}

function unavailable(message: string): ModelError {
  return new ModelError('remote_unavailable', message)
}
