/**
 * The remote servers the catalog names, watched: each is asked for its model list on an interval
 * (that is its health check, and where context lengths and capabilities come from), and each
 * request goes to the least busy healthy copy of its model. A copy that fails is taken out after
 * a few failures in a row and comes back when its server's health check passes again.
 */
import { templateTraits, type ChatTemplateTraits, type TemplateCaps } from '../chat-request-body.ts'
import type { RemoteListings, RemoteModelSummary } from '../../models/catalog/remote-records.ts'
import type { RemoteReplica } from '../../models/catalog/remote-target.ts'

/** What a remote says of one of its models in `GET /models` (and llama-server's `/props`). */
export interface RemoteModelInfo extends RemoteModelSummary {
  /** The chat template, where the remote is a llama-server (its `/props` says). */
  template: ChatTemplateTraits | undefined
}

/** The same replica, as a key for health and load bookkeeping. */
export function replicaKey(replica: Pick<RemoteReplica, 'baseUrl' | 'model'>): string {
  return `${replica.baseUrl} ${replica.model}`
}

export type RemoteHealth = 'healthy' | 'unhealthy' | 'unknown'

interface ServerState {
  baseUrl: string
  apiKey: string | undefined
  health: RemoteHealth
  error: string | undefined
  models: RemoteModelInfo[]
  checking: Promise<void> | undefined
  /** When a request there last succeeded: a server busy answering is up, however slow its check. */
  lastSuccessAt: number
}

interface ReplicaState {
  busy: number
  failures: number
  /** Out of rotation until its server's next health check passes. */
  out: boolean
}

export interface RemotePoolOptions {
  /** How often each server is checked. */
  intervalMs?: number
  /** How long a check may take before the server counts as down. */
  checkTimeoutMs?: number
  /** Failures in a row that take a copy out of rotation. */
  maxFailures?: number
}

const DEFAULTS = { intervalMs: 10_000, checkTimeoutMs: 5_000, maxFailures: 3 }

export class RemotePool implements RemoteListings {
  private readonly servers = new Map<string, ServerState>()
  private readonly replicas = new Map<string, ReplicaState>()
  private readonly options: typeof DEFAULTS
  private timer: NodeJS.Timeout | undefined
  /** Bumped by each check, so model lists can be re-read when something changed. */
  version = 0

  constructor(options: RemotePoolOptions = {}) {
    this.options = { ...DEFAULTS, ...options }
  }

  /** The servers to watch: those the catalog names now. New ones are checked at once. */
  track(replicas: readonly RemoteReplica[]): void {
    const wanted = new Map(replicas.map((r) => [r.baseUrl, r.apiKey]))
    for (const url of this.servers.keys()) if (!wanted.has(url)) this.servers.delete(url)
    for (const [baseUrl, apiKey] of wanted) {
      const known = this.servers.get(baseUrl)
      if (known && known.apiKey === apiKey) continue
      const server: ServerState = { baseUrl, apiKey, health: 'unknown', error: undefined, models: [], checking: undefined, lastSuccessAt: 0 }
      this.servers.set(baseUrl, server)
      void this.check(server)
    }
    if (!this.timer && this.servers.size > 0) {
      this.timer = setInterval(() => void this.checkAll(), this.options.intervalMs)
      this.timer.unref()
    }
  }

  /** Checks every server now; resolves when all have answered or timed out. */
  async checkAll(): Promise<void> {
    await Promise.all([...this.servers.values()].map((s) => this.check(s)))
  }

  /** What the server says of a model, once it has been checked. */
  modelInfo(replica: Pick<RemoteReplica, 'baseUrl' | 'model'>): RemoteModelInfo | undefined {
    return this.servers.get(replica.baseUrl)?.models.find((m) => m.id === replica.model)
  }

  /** Every model a server lists (for catalog entries that import them all). */
  listedModels(baseUrl: string): RemoteModelInfo[] | undefined {
    const server = this.servers.get(baseUrl)
    return server && server.health === 'healthy' ? server.models : undefined
  }

  health(replica: Pick<RemoteReplica, 'baseUrl' | 'model'>): RemoteHealth {
    const server = this.servers.get(replica.baseUrl)
    if (!server) return 'unknown'
    if (server.health !== 'healthy') return server.health
    if (!server.models.some((m) => m.id === replica.model)) return 'unhealthy'
    return this.replicas.get(replicaKey(replica))?.out ? 'unhealthy' : 'healthy'
  }

  /** A model's health over its copies: healthy while any copy is. */
  modelHealth(replicas: readonly Pick<RemoteReplica, 'baseUrl' | 'model'>[]): RemoteHealth {
    const each = replicas.map((r) => this.health(r))
    if (each.includes('healthy')) return 'healthy'
    return each.includes('unknown') ? 'unknown' : 'unhealthy'
  }

  /** Why a server is not healthy, in words, when it is not. */
  problem(replica: Pick<RemoteReplica, 'baseUrl' | 'model'>): string | undefined {
    const server = this.servers.get(replica.baseUrl)
    if (!server || server.health === 'unknown') return undefined
    if (server.health === 'unhealthy') return server.error
    if (!server.models.some((m) => m.id === replica.model)) return `${replica.baseUrl} does not list the model "${replica.model}"`
    if (this.replicas.get(replicaKey(replica))?.out) return `${replica.baseUrl} failed ${this.options.maxFailures} requests in a row`
    return undefined
  }

  /**
   * The copy the next request should go to: the least busy of those in rotation and not tried yet;
   * copies whose health is not known yet count as healthy, so the first request need not wait.
   */
  pick(replicas: readonly RemoteReplica[], tried: ReadonlySet<string>): RemoteReplica | undefined {
    let best: RemoteReplica | undefined
    let bestBusy = Infinity
    for (const replica of replicas) {
      const key = replicaKey(replica)
      if (tried.has(key) || this.health(replica) === 'unhealthy') continue
      const busy = this.state(key).busy
      if (busy < bestBusy) {
        best = replica
        bestBusy = busy
      }
    }
    return best
  }

  /** Counts a request on a copy; call the returned function when it ends. */
  begin(replica: RemoteReplica): () => void {
    const state = this.state(replicaKey(replica))
    state.busy++
    let ended = false
    return () => {
      if (ended) return
      ended = true
      state.busy--
    }
  }

  succeeded(replica: RemoteReplica): void {
    this.state(replicaKey(replica)).failures = 0
    const server = this.servers.get(replica.baseUrl)
    if (server) server.lastSuccessAt = performance.now()
  }

  /** A request that could not be served there (refused, reset, 5xx before any answer). */
  failed(replica: RemoteReplica): void {
    const state = this.state(replicaKey(replica))
    state.failures++
    if (state.failures >= this.options.maxFailures) state.out = true
  }

  busy(replica: Pick<RemoteReplica, 'baseUrl' | 'model'>): number {
    return this.replicas.get(replicaKey(replica))?.busy ?? 0
  }

  close(): void {
    clearInterval(this.timer)
    this.timer = undefined
  }

  private state(key: string): ReplicaState {
    let state = this.replicas.get(key)
    if (!state) this.replicas.set(key, (state = { busy: 0, failures: 0, out: false }))
    return state
  }

  private check(server: ServerState): Promise<void> {
    server.checking ??= this.probe(server).finally(() => (server.checking = undefined))
    return server.checking
  }

  private async probe(server: ServerState): Promise<void> {
    const started = performance.now()
    try {
      const models = await listModels(server.baseUrl, server.apiKey, this.options.checkTimeoutMs)
      server.models = models
      server.health = 'healthy'
      server.error = undefined
      // A passed check brings the server's copies back into rotation.
      for (const [key, state] of this.replicas) {
        if (key.startsWith(`${server.baseUrl} `)) {
          state.out = false
          state.failures = 0
        }
      }
    } catch (e) {
      // A check that times out while the server answers requests only says it is busy (llama-server
      // answers /models on the threads its streams hold).
      if (server.health === 'healthy' && started - server.lastSuccessAt < this.options.intervalMs) {
        this.version++
        return
      }
      server.health = 'unhealthy'
      const cause = (e as { cause?: { code?: string; message?: string } }).cause
      server.error = `${server.baseUrl} does not answer: ${cause?.code ?? cause?.message ?? (e as Error).message}`
    }
    this.version++
  }
}

interface ListedModel {
  id?: unknown
  owned_by?: unknown
  context_length?: unknown
  max_completion_tokens?: unknown
  max_model_len?: unknown
  capabilities?: unknown
  meta?: { n_ctx_train?: unknown; n_ctx?: unknown }
}

interface LlamaServerProps {
  default_generation_settings?: { n_ctx?: number }
  modalities?: { vision?: boolean }
  chat_template?: string
  chat_template_caps?: TemplateCaps
}

/** `GET /models`, read the way vLLM, llama-server and Hearth each describe their models. */
async function listModels(baseUrl: string, apiKey: string | undefined, timeoutMs: number): Promise<RemoteModelInfo[]> {
  const headers: Record<string, string> = apiKey ? { authorization: `Bearer ${apiKey}` } : {}
  const res = await fetch(`${baseUrl}/models`, { headers, signal: AbortSignal.timeout(timeoutMs) })
  if (!res.ok) throw new Error(`GET /models answered ${res.status}`)
  const body = (await res.json()) as { data?: ListedModel[] }
  if (!Array.isArray(body.data)) throw new Error('GET /models did not return a model list')
  const models = body.data.filter((m): m is ListedModel & { id: string } => typeof m?.id === 'string').map(infoOf)
  // llama-server says its context, whether it sees pictures and what its chat template can do in
  // /props (at the server's root). A Hearth lists its models the same way, but has no /props.
  if (models.some((m) => m.ownedBy === 'llamacpp')) {
    const props = await fetch(`${new URL(baseUrl).origin}/props`, { headers, signal: AbortSignal.timeout(timeoutMs) })
      .then((r) => (r.ok ? (r.json() as Promise<LlamaServerProps>) : undefined))
      .catch(() => undefined)
    for (const m of models) {
      if (m.ownedBy !== 'llamacpp' || !props) continue
      m.contextLength = positive(props.default_generation_settings?.n_ctx) ?? m.contextLength
      m.vision = props.modalities?.vision ?? m.vision
      if (props.chat_template_caps) m.template = templateTraits(props.chat_template, props.chat_template_caps)
    }
  }
  return models
}

function infoOf(m: ListedModel & { id: string }): RemoteModelInfo {
  return {
    id: m.id,
    ownedBy: typeof m.owned_by === 'string' ? m.owned_by : undefined,
    contextLength: positive(m.context_length) ?? positive(m.max_model_len) ?? positive(m.meta?.n_ctx) ?? positive(m.meta?.n_ctx_train),
    maxCompletionTokens: positive(m.max_completion_tokens),
    capabilities: Array.isArray(m.capabilities) ? m.capabilities.filter((c): c is string => typeof c === 'string') : undefined,
    vision: undefined,
    template: undefined,
  }
}

function positive(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : undefined
}
