/**
 * GET /metrics in Prometheus' text format: requests by route and status, latency histograms,
 * tokens, queue depth, loaded models and memory. Routes are labelled by their pattern
 * (`/v1/models/*id`), never by the raw path, so ids and probes cannot blow up the label count.
 * Each app has its own registry, so the desktop app can restart its server in one process.
 */
import type { Request, RequestHandler, Response } from 'express'
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'
import type { ModelScheduler } from '../../../engines/scheduler/model-scheduler.ts'
import { usageOf } from '../services/keys/key-quotas.ts'
import { responseOutcome } from './response-outcome.ts'

const API_PREFIXES = ['/v1', '/api']
/** How long a busy engine may take to report its memory before the scrape goes on without it. */
const ENGINE_STATS_TIMEOUT_MS = 1_000

export class ServerMetrics {
  readonly registry = new Registry()
  private readonly requests: Counter<'method' | 'route' | 'status'>
  private readonly duration: Histogram<'method' | 'route'>
  private readonly inFlight: Gauge
  private readonly tokens: Counter<'model' | 'type'>
  private readonly audioSeconds: Counter<'model'>
  private readonly draftTokens: Counter<'model' | 'outcome'>

  constructor(scheduler: Pick<ModelScheduler, 'activity' | 'engineOf'>) {
    const registers = [this.registry]
    collectDefaultMetrics({ register: this.registry })
    this.requests = new Counter({
      name: 'hearth_http_requests_total',
      help: 'HTTP requests by route pattern and status (499: the client left before the answer ended)',
      labelNames: ['method', 'route', 'status'],
      registers,
    })
    this.duration = new Histogram({
      name: 'hearth_http_request_duration_seconds',
      help: 'Time from a request arriving to its answer ending, by route pattern',
      labelNames: ['method', 'route'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
      registers,
    })
    this.inFlight = new Gauge({ name: 'hearth_http_requests_in_flight', help: 'Requests being answered now', registers })
    this.tokens = new Counter({
      name: 'hearth_tokens_total',
      help: 'Tokens processed, by model and type (prompt, or completion: generated)',
      labelNames: ['model', 'type'],
      registers,
    })
    this.draftTokens = new Counter({
      name: 'hearth_draft_tokens_total',
      help: 'Speculative decoding: tokens drafted, by model and outcome (accepted: the model kept them; rejected: checked and dropped)',
      labelNames: ['model', 'outcome'],
      registers,
    })
    this.audioSeconds = new Counter({
      name: 'hearth_audio_seconds_total',
      help: 'Seconds of audio translated, by model',
      labelNames: ['model'],
      registers,
    })
    new Gauge({
      name: 'hearth_queue_depth',
      help: 'Requests waiting for a model (not yet running)',
      labelNames: ['model'],
      registers,
      collect() {
        this.reset()
        for (const m of scheduler.activity()) this.set({ model: m.id }, m.waiting)
      },
    })
    new Gauge({
      name: 'hearth_requests_running',
      help: 'Requests a model is serving now',
      labelNames: ['model'],
      registers,
      collect() {
        this.reset()
        for (const m of scheduler.activity()) this.set({ model: m.id }, m.running)
      },
    })
    new Gauge({
      name: 'hearth_loaded_models',
      help: 'Models whose engine process is up',
      registers,
      collect() {
        this.set(scheduler.activity().filter((m) => m.loaded).length)
      },
    })
    new Gauge({
      name: 'hearth_engine_resident_memory_bytes',
      help: "Resident memory of each loaded model's engine process",
      labelNames: ['model'],
      registers,
      async collect() {
        this.reset()
        const loaded = scheduler.activity().filter((m) => m.loaded)
        await Promise.all(
          loaded.map(async (m) => {
            const engine = scheduler.engineOf(m.id)
            if (!engine) return
            const bytes = await withTimeout(engine.memoryBytes(), ENGINE_STATS_TIMEOUT_MS)
            if (bytes !== undefined && bytes > 0) this.set({ model: m.id }, bytes)
          }),
        )
      },
    })
  }

  /** Counts every request when its answer ends (or its client leaves). */
  middleware(): RequestHandler {
    return (req, res, next) => {
      const started = performance.now()
      this.inFlight.inc()
      res.once('close', () => {
        this.inFlight.dec()
        const route = routeLabel(req, res)
        const status = String(responseOutcome(res).status)
        this.requests.inc({ method: req.method, route, status })
        this.duration.observe({ method: req.method, route }, (performance.now() - started) / 1000)
        const model = typeof res.locals.model === 'string' ? res.locals.model : undefined
        if (!model) return
        const usage = usageOf(res)
        if (usage.promptTokens > 0) this.tokens.inc({ model, type: 'prompt' }, usage.promptTokens)
        if (usage.completionTokens > 0) this.tokens.inc({ model, type: 'completion' }, usage.completionTokens)
        if (usage.audioSeconds > 0) this.audioSeconds.inc({ model }, usage.audioSeconds)
        if (usage.draftTokens !== undefined) {
          const accepted = usage.draftAccepted ?? 0
          this.draftTokens.inc({ model, outcome: 'accepted' }, accepted)
          this.draftTokens.inc({ model, outcome: 'rejected' }, usage.draftTokens - accepted)
        }
      })
      next()
    }
  }

  handler(): RequestHandler {
    return async (_req, res) => {
      const text = await this.registry.metrics()
      res.set('Cache-Control', 'no-store').type(this.registry.contentType).send(text)
    }
  }
}

/**
 * The route's pattern when a route answered, else a fixed label for its area. Express has reset
 * `req.baseUrl` by the time an error was answered, but the routers are mounted at the API
 * prefixes, so the prefix of the path is the mount point.
 */
export function routeLabel(req: Request, res: Response): string {
  const path = req.originalUrl.split('?')[0] ?? ''
  const prefix = API_PREFIXES.find((p) => path === p || path.startsWith(`${p}/`))
  const pattern = (req.route as { path?: unknown } | undefined)?.path
  // A route that passed the request on (the web UI's fallback) did not answer it.
  if (typeof pattern === 'string' && res.locals.errorCode !== 'unknown_url') return `${prefix ?? ''}${pattern}`
  if (prefix) return `${prefix}/*`
  if (path === '/metrics' || path === '/health') return path
  return 'other'
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms)
    timer.unref()
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}
