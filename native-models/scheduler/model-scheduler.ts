/**
 * Hands out each model's engine to one request at a time, in arrival order, starting the engine
 * process on first use (just in time) and again after it died. Waiting is bounded: when a model's
 * queue is full the request is refused at once with `overloaded`, and a request whose client left
 * gives up its place immediately.
 */
import type { ModelRecord } from '../catalog/model-folder.ts'
import type { Engine, RunOptions } from '../engine/engine-process.ts'
import type { EngineJob, EngineResult } from '../engine/engine-protocol.ts'
import { ModelError } from '../errors.ts'

export interface SchedulerOptions {
  startEngine: (model: ModelRecord) => Promise<Engine>
  /** Requests that may wait for a busy model before new ones get `overloaded`. */
  maxQueuePerModel: number
}

interface Waiter {
  wake: () => void
}

interface ModelState {
  engine: Engine | undefined
  starting: Promise<Engine> | undefined
  busy: boolean
  queue: Waiter[]
  lastUsed: number
}

export class ModelScheduler {
  private readonly models = new Map<string, ModelState>()
  private closed = false

  constructor(private readonly options: SchedulerOptions) {}

  async run(model: ModelRecord, job: EngineJob, options: RunOptions = {}): Promise<EngineResult> {
    const state = this.stateOf(model.id)
    await this.acquire(state, options.signal)
    try {
      const engine = await this.engineFor(model, state)
      if (options.signal?.aborted) throw new ModelError('cancelled', 'the request was cancelled')
      return await engine.run(job, options)
    } finally {
      state.lastUsed = Date.now()
      this.release(state)
    }
  }

  /** Ids of the models whose engine process is up. */
  loadedModelIds(): string[] {
    return [...this.models].filter(([, s]) => s.engine?.alive).map(([id]) => id)
  }

  engineOf(modelId: string): Engine | undefined {
    const engine = this.models.get(modelId)?.engine
    return engine?.alive ? engine : undefined
  }

  async shutdown(): Promise<void> {
    this.closed = true
    const engines = [...this.models.values()].map((s) => s.engine ?? s.starting?.catch(() => undefined))
    await Promise.all(engines.map(async (e) => (await e)?.stop()))
  }

  private stateOf(id: string): ModelState {
    let state = this.models.get(id)
    if (!state) {
      state = { engine: undefined, starting: undefined, busy: false, queue: [], lastUsed: 0 }
      this.models.set(id, state)
    }
    return state
  }

  private acquire(state: ModelState, signal: AbortSignal | undefined): Promise<void> {
    if (this.closed) return Promise.reject(new ModelError('overloaded', 'the server is shutting down'))
    if (signal?.aborted) return Promise.reject(new ModelError('cancelled', 'the request was cancelled'))
    if (!state.busy) {
      state.busy = true
      return Promise.resolve()
    }
    if (state.queue.length >= this.options.maxQueuePerModel) {
      return Promise.reject(
        new ModelError('overloaded', `the model is busy and ${state.queue.length} requests are already waiting for it; retry shortly`),
      )
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        wake: () => {
          signal?.removeEventListener('abort', leave)
          resolve()
        },
      }
      const leave = () => {
        state.queue = state.queue.filter((w) => w !== waiter)
        reject(new ModelError('cancelled', 'the request was cancelled while waiting'))
      }
      signal?.addEventListener('abort', leave, { once: true })
      state.queue.push(waiter)
    })
  }

  /** Passes the model straight to the next waiter, or marks it free. */
  private release(state: ModelState): void {
    const next = state.queue.shift()
    if (next) next.wake()
    else state.busy = false
  }

  private async engineFor(model: ModelRecord, state: ModelState): Promise<Engine> {
    if (state.engine?.alive) return state.engine
    state.starting ??= this.options.startEngine(model).then(
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
}
