/**
 * Decides which models are loaded and who uses them when:
 * - each model serves as many requests at once as it has slots (parallel sequences in one
 *   context), the rest wait in arrival order in a bounded queue (`overloaded` when full; a
 *   request whose client left gives up its place at once);
 * - a model loads just in time, on the first request or an explicit load, after a memory plan:
 *   idle models are unloaded least recently used first to make room, and a model that cannot fit
 *   is refused with the numbers instead of swapping the machine to death;
 * - an idle model unloads itself after its time to live; a dead engine is restarted on next use.
 */
import type { ModelRecord } from '../../models/catalog/model-record.ts'
import type { Engine, RunOptions } from '../engine.ts'
import type { EngineJob, EngineResult, JobProgress, ResultOf } from '../engine-jobs.ts'
import { ModelError } from '../errors.ts'
import { estimateModelMemory, planEvictions } from './memory-plan.ts'

export interface SchedulerOptions {
  startEngine: (model: ModelRecord) => Promise<Engine>
  /** Why a model cannot start at all (its engine is not built here), asked before any memory is made for it. */
  cannotStart?: (model: ModelRecord) => ModelError | undefined
  /** Requests that may wait for a busy model before new ones get `overloaded`. */
  maxQueuePerModel: number
  /** How long a model may sit idle before it is unloaded; 0 keeps it loaded. */
  idleTtlMs?: (model: ModelRecord) => number
  /** Bytes the loaded models may use together, asked each time a model is about to load. */
  memoryBudget?: () => number
  estimateBytes?: (model: ModelRecord) => number
  /** Requests a model serves at once; 1 when not given. */
  slotsFor?: (model: ModelRecord) => number
  /**
   * Asked when a load or a job fails before any of its answer was given: 'retry' loads the model
   * again and runs the job once more (an engine that crashed on this CPU, say); an Error is thrown
   * in place of the failure; undefined lets it through as it is.
   */
  afterFailure?: (model: ModelRecord, error: unknown) => Promise<'retry' | Error | undefined>
}

export interface LoadedModel {
  id: string
  engine: Engine
  estimateBytes: number
  busy: boolean
  waiting: number
  lastUsed: number
  /** When it unloads if nothing uses it before: epoch ms; undefined while busy, or when it stays loaded. */
  expiresAt: number | undefined
}

/**
 * How long a model stays loaded once the request is done, where the request says (Ollama's
 * `keep_alive`): 0 unloads it as soon as it is idle, Infinity keeps it loaded. Without it, the
 * model's idle time to live applies.
 */
export interface KeepAlive {
  keepAliveMs?: number
}

interface Waiter {
  /** Unloading needs the model to itself: no request running, none let in meanwhile. */
  exclusive: boolean
  wake: () => void
}

interface ModelState {
  id: string
  engine: Engine | undefined
  starting: Promise<Engine> | undefined
  estimateBytes: number
  slots: number
  /** Requests running now; -1 while held exclusively. */
  active: number
  queue: Waiter[]
  lastUsed: number
  idleTimer: NodeJS.Timeout | undefined
  /** When the idle timer fires (epoch ms). */
  expiresAt: number | undefined
  /** The keep-alive the last request that came in asked for; undefined = the model's time to live. */
  keepAliveMs: number | undefined
  /** The model's files (size, time) as they were when its engine was started. */
  filesStamp: string | undefined
}

/** Changes when a model's file or projector is replaced, truncated or rewritten. */
function filesStamp(model: ModelRecord): string {
  return [model.path, model.sizeBytes, model.created, model.projectorPath ?? '', model.projectorSizeBytes].join('|')
}

export class ModelScheduler {
  private readonly models = new Map<string, ModelState>()
  /** Loads one model at a time, so two memory plans never count on the same free bytes. */
  private loading: Promise<unknown> = Promise.resolve()
  private closed = false

  constructor(private readonly options: SchedulerOptions) {}

  /** Runs `job` on the model's engine (loading it first if need be): the result of the job's kind. */
  async run<J extends EngineJob>(model: ModelRecord, job: J, options: RunOptions & KeepAlive = {}): Promise<ResultOf<J>> {
    // Once part of an answer has gone to the client, the job cannot start over.
    let answered = false
    const { keepAliveMs, ...runOptions } = options
    const onProgress = runOptions.onProgress && ((p: JobProgress) => ((answered ||= p.type !== 'prompt'), runOptions.onProgress!(p)))
    return this.withRetry(
      model,
      () => answered,
      () =>
        this.withModel(model, options.signal, { keepAliveMs }, async (engine) => {
          if (options.signal?.aborted) throw new ModelError('cancelled', 'the request was cancelled')
          return resultFor(job, await engine.run(job, { ...runOptions, onProgress }))
        }),
    )
  }

  /** Loads a model now (waiting its turn), so the first request does not pay for it. */
  async load(model: ModelRecord, signal?: AbortSignal, keepAlive: KeepAlive = {}): Promise<Engine> {
    return this.withRetry(
      model,
      () => false,
      () => this.withModel(model, signal, keepAlive, async (engine) => engine),
    )
  }

  /** Runs `attempt`, and once more where `afterFailure` says so (never after part of an answer went out). */
  private async withRetry<T>(model: ModelRecord, answered: () => boolean, attempt: () => Promise<T>): Promise<T> {
    for (let tries = 1; ; tries++) {
      try {
        return await attempt()
      } catch (e) {
        if (answered() || !this.options.afterFailure) throw e
        const next = await this.options.afterFailure(model, e)
        if (next instanceof Error) throw next
        if (next !== 'retry' || tries >= 2) throw e
      }
    }
  }

  /** Unloads a model once the request it is serving (if any) is done. */
  async unload(modelId: string): Promise<boolean> {
    const state = this.models.get(modelId)
    if (!state?.engine?.alive && !state?.starting) return false
    await this.acquire(state, undefined, true)
    try {
      const engine = state.engine ?? (await state.starting?.catch(() => undefined))
      await engine?.stop()
      state.engine = undefined
      return true
    } finally {
      this.release(state)
    }
  }

  /** Ids of the models whose engine process is up. */
  loadedModelIds(): string[] {
    return this.loaded().map((m) => m.id)
  }

  loaded(): LoadedModel[] {
    return [...this.models.values()]
      .filter((s) => s.engine?.alive)
      .map((s) => ({
        id: s.id,
        engine: s.engine!,
        estimateBytes: s.estimateBytes,
        busy: s.active !== 0,
        waiting: s.queue.length,
        lastUsed: s.lastUsed,
        expiresAt: s.active === 0 && s.queue.length === 0 ? s.expiresAt : undefined,
      }))
  }

  /** Every model the scheduler has seen: requests running and waiting, and whether it is loaded (metrics). */
  activity(): Array<{ id: string; running: number; waiting: number; loaded: boolean }> {
    return [...this.models.values()].map((s) => ({
      id: s.id,
      running: Math.max(0, s.active),
      waiting: s.queue.length,
      loaded: s.engine?.alive === true,
    }))
  }

  engineOf(modelId: string): Engine | undefined {
    const engine = this.models.get(modelId)?.engine
    return engine?.alive ? engine : undefined
  }

  async shutdown(): Promise<void> {
    this.closed = true
    for (const s of this.models.values()) clearTimeout(s.idleTimer)
    const engines = [...this.models.values()].map((s) => s.engine ?? s.starting?.catch(() => undefined))
    await Promise.all(engines.map(async (e) => (await e)?.stop()))
  }

  private async withModel<T>(model: ModelRecord, signal: AbortSignal | undefined, keepAlive: KeepAlive, use: (engine: Engine) => Promise<T>): Promise<T> {
    const state = this.stateOf(model.id)
    state.slots = Math.max(1, this.options.slotsFor?.(model) ?? 1)
    // An engine holds its model file's weights (mapped, or read in on a CPU): one whose file
    // changed would serve old weights, or die on a read past the end of a truncated file. It is
    // stopped (after the requests it serves) and the model loads again from the file as it is now.
    if (state.engine?.alive && state.filesStamp !== undefined && state.filesStamp !== filesStamp(model)) await this.unload(model.id)
    await this.acquire(state, signal, false)
    // As Ollama does: the last request in says how long the model stays loaded after it.
    state.keepAliveMs = keepAlive.keepAliveMs
    try {
      return await use(await this.engineFor(model, state))
    } finally {
      state.lastUsed = Date.now()
      this.release(state, model)
    }
  }

  private stateOf(id: string): ModelState {
    let state = this.models.get(id)
    if (!state) {
      state = {
        id,
        engine: undefined,
        starting: undefined,
        estimateBytes: 0,
        slots: 1,
        active: 0,
        queue: [],
        lastUsed: 0,
        idleTimer: undefined,
        expiresAt: undefined,
        keepAliveMs: undefined,
        filesStamp: undefined,
      }
      this.models.set(id, state)
    }
    return state
  }

  private acquire(state: ModelState, signal: AbortSignal | undefined, exclusive: boolean): Promise<void> {
    if (this.closed) return Promise.reject(new ModelError('overloaded', 'the server is shutting down'))
    if (signal?.aborted) return Promise.reject(new ModelError('cancelled', 'the request was cancelled'))
    clearTimeout(state.idleTimer)
    state.expiresAt = undefined
    if (state.queue.length === 0 && this.canEnter(state, exclusive)) {
      this.enter(state, exclusive)
      return Promise.resolve()
    }
    if (!exclusive && state.queue.length >= this.options.maxQueuePerModel) {
      return Promise.reject(new ModelError('overloaded', `the model is busy and ${state.queue.length} requests are already waiting for it; retry shortly`))
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        exclusive,
        wake: () => {
          signal?.removeEventListener('abort', leave)
          resolve()
        },
      }
      const leave = () => {
        state.queue = state.queue.filter((w) => w !== waiter)
        reject(new ModelError('cancelled', 'the request was cancelled while waiting'))
        this.admit(state)
      }
      signal?.addEventListener('abort', leave, { once: true })
      state.queue.push(waiter)
    })
  }

  private canEnter(state: ModelState, exclusive: boolean): boolean {
    return exclusive ? state.active === 0 : state.active >= 0 && state.active < state.slots
  }

  private enter(state: ModelState, exclusive: boolean): void {
    state.active = exclusive ? -1 : state.active + 1
  }

  /** Lets waiters in, in arrival order, while there is room. */
  private admit(state: ModelState): void {
    while (state.queue.length > 0 && this.canEnter(state, state.queue[0]!.exclusive)) {
      const next = state.queue.shift()!
      this.enter(state, next.exclusive)
      next.wake()
    }
  }

  /** Frees a place, lets the next waiters in, and starts the idle clock when nothing is left. */
  private release(state: ModelState, model?: ModelRecord): void {
    state.active = state.active === -1 ? 0 : state.active - 1
    this.admit(state)
    if (state.active !== 0 || state.queue.length > 0 || !model || !state.engine?.alive || this.closed) return
    const ttl = this.idleTtlOf(model, state)
    if (ttl === undefined) return
    state.expiresAt = Date.now() + ttl
    state.idleTimer = setTimeout(() => void this.unloadIfIdle(state), ttl)
    state.idleTimer.unref()
  }

  /** How long the model may now sit idle before it unloads; undefined = it stays loaded. */
  private idleTtlOf(model: ModelRecord, state: ModelState): number | undefined {
    const asked = state.keepAliveMs
    if (asked !== undefined) return Number.isFinite(asked) ? Math.max(0, asked) : undefined
    // The settings' 0 means "keep it loaded", not "unload at once".
    const ttl = this.options.idleTtlMs?.(model) ?? 0
    return ttl > 0 ? ttl : undefined
  }

  private async unloadIfIdle(state: ModelState): Promise<void> {
    if (state.active !== 0 || state.queue.length > 0 || !state.engine) return
    const engine = state.engine
    state.engine = undefined
    state.expiresAt = undefined
    await engine.stop()
  }

  private async engineFor(model: ModelRecord, state: ModelState): Promise<Engine> {
    if (state.engine?.alive) return state.engine
    state.starting ??= this.startInTurn(model, state).then(
      (engine) => {
        state.engine = engine
        state.starting = undefined
        engine.onExit(() => {
          if (state.engine === engine) state.engine = undefined
        })
        return engine
      },
      (e: unknown) => {
        state.starting = undefined
        throw e
      },
    )
    return state.starting
  }

  private startInTurn(model: ModelRecord, state: ModelState): Promise<Engine> {
    const turn = this.loading.then(() => this.planAndStart(model, state))
    this.loading = turn.catch(() => undefined)
    return turn
  }

  private async planAndStart(model: ModelRecord, state: ModelState): Promise<Engine> {
    const refused = this.options.cannotStart?.(model)
    if (refused) throw refused
    const needed = (this.options.estimateBytes ?? ((m) => estimateModelMemory(m).total))(model)
    if (this.options.memoryBudget) {
      const others = this.loaded().filter((m) => m.id !== model.id)
      const evict = planEvictions(
        model.id,
        needed,
        this.options.memoryBudget(),
        others.map((m) => ({ id: m.id, bytes: m.estimateBytes, idle: !m.busy && m.waiting === 0, lastUsed: m.lastUsed })),
      )
      for (const id of evict) {
        const victim = this.models.get(id)
        if (!victim?.engine) continue
        const engine = victim.engine
        victim.engine = undefined
        clearTimeout(victim.idleTimer)
        await engine.stop()
      }
    }
    state.estimateBytes = needed
    state.filesStamp = filesStamp(model)
    return this.options.startEngine(model)
  }
}

/** The engine's answer to `job`, checked to be of the job's kind: the one place the types narrow. */
function resultFor<J extends EngineJob>(job: J, result: EngineResult): ResultOf<J> {
  if (result.type !== job.type) throw new ModelError('internal_error', `the engine answered a '${job.type}' job with a '${result.type}' result`)
  return result as ResultOf<J>
}
