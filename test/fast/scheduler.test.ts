import { describe, expect, it } from 'vitest'
import type { ModelRecord } from '../../models/catalog/model-record.ts'
import type { Engine, RunOptions } from '../../engines/engine.ts'
import type { ChatJob, ChatResult, EngineResult } from '../../engines/engine-jobs.ts'
import { ModelError } from '../../engines/errors.ts'
import { promptCacheBytes } from '../../engines/scheduler/memory-plan.ts'
import { ModelScheduler } from '../../engines/scheduler/model-scheduler.ts'

/** An engine whose jobs finish when the test says so. */
class FakeEngine implements Engine {
  pid = 1
  info = { devices: ['CPU'], loadMs: 0, vision: false }
  alive = true
  started: string[] = []
  private finishers: Array<() => void> = []
  private exitListeners: Array<() => void> = []

  run(job: ChatJob, options: RunOptions = {}): Promise<EngineResult> {
    const label = job.messages[0]!.content as string
    this.started.push(label)
    return new Promise((resolve, reject) => {
      this.finishers.push(() => resolve(result(label)))
      options.signal?.addEventListener('abort', () => reject(new ModelError('cancelled', 'cancelled')))
    })
  }
  async memoryBytes(): Promise<number> {
    return 0
  }
  finishNext(): void {
    this.finishers.shift()?.()
  }
  crash(): void {
    if (!this.alive) return
    this.alive = false
    for (const l of this.exitListeners) l()
  }
  async stop(): Promise<void> {
    this.crash()
  }
  onExit(listener: () => void): void {
    this.exitListeners.push(listener)
  }
}

/** The fakes only ever answer chat jobs. */
const textOf = (r: EngineResult) => (r as ChatResult).text

function result(text: string): EngineResult {
  return {
    type: 'chat',
    text,
    reasoning: '',
    toolCalls: [],
    logprobs: undefined,
    finishReason: 'stop',
    promptTokens: 1,
    completionTokens: 1,
    reasoningTokens: 0,
    timings: { promptMs: 0, promptPerSecond: 0, predictedMs: 0, predictedPerSecond: 0 },
  }
}

function job(label: string): ChatJob {
  return {
    type: 'chat',
    messages: [{ role: 'user', content: label }],
    maxTokens: 1,
    maxCompletionTokens: 1,
    temperature: 0,
    topP: 1,
    topK: 1,
    presencePenalty: 0,
    frequencyPenalty: 0,
    logitBias: undefined,
    stop: [],
    seed: undefined,
    tools: [],
    toolChoice: 'none',
    parallelToolCalls: true,
    jsonSchema: undefined,
    reasoningEffort: undefined,
    thinkingBudgetTokens: undefined,
    topLogprobs: undefined,
  }
}

const model = { id: 'm' } as ModelRecord
const tick = () => new Promise((r) => setTimeout(r, 0))

function setup(maxQueuePerModel: number) {
  const engines: FakeEngine[] = []
  const scheduler = new ModelScheduler({
    maxQueuePerModel,
    startEngine: async () => {
      const e = new FakeEngine()
      engines.push(e)
      return e
    },
  })
  return { scheduler, engines }
}

describe('ModelScheduler', () => {
  it('starts the engine on first use and runs queued requests one at a time, in arrival order', async () => {
    const { scheduler, engines } = setup(8)
    expect(scheduler.loadedModelIds()).toEqual([])
    const runs = ['a', 'b', 'c'].map((l) => scheduler.run(model, job(l)))
    await tick()
    expect(engines).toHaveLength(1)
    expect(engines[0]!.started).toEqual(['a'])
    engines[0]!.finishNext()
    await tick()
    expect(engines[0]!.started).toEqual(['a', 'b'])
    engines[0]!.finishNext()
    await tick()
    engines[0]!.finishNext()
    expect((await Promise.all(runs)).map(textOf)).toEqual(['a', 'b', 'c'])
    expect(scheduler.loadedModelIds()).toEqual(['m'])
  })

  it('refuses with overloaded when the queue is full', async () => {
    const { scheduler, engines } = setup(1)
    const first = scheduler.run(model, job('a'))
    const second = scheduler.run(model, job('b'))
    await expect(scheduler.run(model, job('c'))).rejects.toMatchObject({ code: 'overloaded' })
    await tick()
    engines[0]!.finishNext()
    await tick()
    engines[0]!.finishNext()
    await Promise.all([first, second])
  })

  it('lets a cancelled request leave the queue at once, freeing its place', async () => {
    const { scheduler, engines } = setup(1)
    const first = scheduler.run(model, job('a'))
    const leaving = new AbortController()
    const waiting = scheduler.run(model, job('b'), { signal: leaving.signal })
    leaving.abort()
    await expect(waiting).rejects.toMatchObject({ code: 'cancelled' })
    const third = scheduler.run(model, job('c'))
    await tick()
    engines[0]!.finishNext()
    await tick()
    engines[0]!.finishNext()
    expect(textOf(await third)).toBe('c')
    expect(engines[0]!.started).toEqual(['a', 'c'])
    await first
  })

  it('starts a fresh engine after the old one died', async () => {
    const { scheduler, engines } = setup(4)
    const first = scheduler.run(model, job('a'))
    await tick()
    engines[0]!.finishNext()
    await first
    engines[0]!.crash()
    expect(scheduler.loadedModelIds()).toEqual([])
    const second = scheduler.run(model, job('b'))
    await tick()
    expect(engines).toHaveLength(2)
    engines[1]!.finishNext()
    expect(textOf(await second)).toBe('b')
  })

  it('frees the model when engine start fails, so the next request tries again', async () => {
    let attempts = 0
    const scheduler = new ModelScheduler({
      maxQueuePerModel: 4,
      startEngine: async () => {
        attempts++
        throw new ModelError('engine_load_failed', 'bad file')
      },
    })
    await expect(scheduler.run(model, job('a'))).rejects.toMatchObject({ code: 'engine_load_failed' })
    await expect(scheduler.run(model, job('b'))).rejects.toMatchObject({ code: 'engine_load_failed' })
    expect(attempts).toBe(2)
  })
})

describe('ModelScheduler after a failure', () => {
  /** Engines whose first job dies (as llama.cpp on a broken CPU kernel) until `healthyFrom`. */
  function dyingEngines(healthyFrom: number, decide: (error: unknown) => Promise<'retry' | Error | undefined>, tokensFirst = false) {
    let started = 0
    const scheduler = new ModelScheduler({
      maxQueuePerModel: 4,
      afterFailure: async (_model, error) => decide(error),
      startEngine: async () => {
        const n = ++started
        const engine = new FakeEngine()
        engine.run = async (j, options = {}) => {
          if (n >= healthyFrom) return result(j.messages[0]!.content as string)
          if (tokensFirst) options.onProgress?.({ type: 'text', text: 'partial' })
          engine.crash()
          throw new ModelError('engine_crashed', `engine ${n} died`)
        }
        return engine
      },
    })
    return { scheduler, starts: () => started }
  }

  it('loads the model again and runs the job once more where afterFailure says retry', async () => {
    const { scheduler, starts } = dyingEngines(2, async () => 'retry')
    expect(textOf(await scheduler.run(model, job('a')))).toBe('a')
    expect(starts()).toBe(2)
  })

  it('retries once only, and throws what afterFailure gives in place of the failure', async () => {
    const decisions: Array<'retry' | Error> = ['retry', new ModelError('engine_crashed', 'explained')]
    const { scheduler, starts } = dyingEngines(99, async () => decisions.shift()!)
    await expect(scheduler.run(model, job('a'))).rejects.toThrow('explained')
    expect(starts()).toBe(2)
  })

  it('never runs a job again once part of its answer went out', async () => {
    const { scheduler, starts } = dyingEngines(2, async () => 'retry', true)
    const seen: string[] = []
    await expect(scheduler.run(model, job('a'), { onProgress: (p) => seen.push(p.type) })).rejects.toThrow('engine 1 died')
    expect(seen).toEqual(['text'])
    expect(starts()).toBe(1)
  })
})

describe('ModelScheduler lifecycle', () => {
  const named = (id: string) => ({ id }) as ModelRecord

  function lifecycle(options: { ttlMs?: number; budget?: number; sizes?: Record<string, number>; cannotStart?: (m: ModelRecord) => ModelError | undefined }) {
    const engines = new Map<string, FakeEngine[]>()
    const scheduler = new ModelScheduler({
      maxQueuePerModel: 4,
      cannotStart: options.cannotStart,
      idleTtlMs: () => options.ttlMs ?? 0,
      memoryBudget: options.budget === undefined ? undefined : () => options.budget!,
      estimateBytes: (m) => options.sizes?.[m.id] ?? 1,
      startEngine: async (m) => {
        const e = new FakeEngine()
        engines.set(m.id, [...(engines.get(m.id) ?? []), e])
        return e
      },
    })
    const finishAll = () => engines.forEach((list) => list.forEach((e) => e.finishNext()))
    return { scheduler, engines, finishAll }
  }

  it('loads and unloads on request, and reports the state', async () => {
    const { scheduler, engines } = lifecycle({})
    await scheduler.load(named('a'))
    expect(scheduler.loadedModelIds()).toEqual(['a'])
    expect(await scheduler.unload('a')).toBe(true)
    expect(scheduler.loadedModelIds()).toEqual([])
    expect(engines.get('a')![0]!.alive).toBe(false)
    expect(await scheduler.unload('a')).toBe(false)
  })

  it('waits for the running request before unloading', async () => {
    const { scheduler, engines } = lifecycle({})
    const running = scheduler.run(named('a'), job('x'))
    await tick()
    const unloading = scheduler.unload('a')
    await tick()
    expect(engines.get('a')![0]!.alive).toBe(true)
    engines.get('a')![0]!.finishNext()
    expect(textOf(await running)).toBe('x')
    expect(await unloading).toBe(true)
    expect(engines.get('a')![0]!.alive).toBe(false)
  })

  it('unloads an idle model after its time to live, and not while it is used', async () => {
    const { scheduler, engines } = lifecycle({ ttlMs: 40 })
    await scheduler.load(named('a'))
    await new Promise((r) => setTimeout(r, 20))
    const run = scheduler.run(named('a'), job('x'))
    await new Promise((r) => setTimeout(r, 60))
    expect(scheduler.loadedModelIds()).toEqual(['a'])
    engines.get('a')![0]!.finishNext()
    await run
    await new Promise((r) => setTimeout(r, 80))
    expect(scheduler.loadedModelIds()).toEqual([])
  })

  it('evicts idle models least recently used first to make room', async () => {
    const { scheduler } = lifecycle({ budget: 10, sizes: { a: 4, b: 4, c: 4 } })
    await scheduler.load(named('a'))
    await new Promise((r) => setTimeout(r, 5))
    await scheduler.load(named('b'))
    await new Promise((r) => setTimeout(r, 5))
    await scheduler.load(named('a')) // a is now the most recently used
    await scheduler.load(named('c'))
    expect(scheduler.loadedModelIds().sort()).toEqual(['a', 'c'])
  })

  it('refuses with the numbers when a model cannot fit, and never evicts a busy model', async () => {
    const { scheduler, finishAll } = lifecycle({ budget: 10, sizes: { a: 6, big: 20, b: 6 } })
    await expect(scheduler.load(named('big'))).rejects.toMatchObject({ code: 'insufficient_memory', message: expect.stringMatching(/20 MiB|needs about/) })
    const busy = scheduler.run(named('a'), job('x'))
    await tick()
    await expect(scheduler.load(named('b'))).rejects.toMatchObject({ code: 'insufficient_memory', message: expect.stringMatching(/'a'.*busy/) })
    finishAll()
    await busy
    await scheduler.load(named('b'))
    expect(scheduler.loadedModelIds()).toEqual(['b'])
  })

  it('refuses a model whose engine cannot start before planning memory for it: nothing is evicted', async () => {
    const notBuilt = new ModelError('engine_not_built', 'llama.cpp is not built for this machine. Build it with: npm run build:engines')
    const { scheduler, engines } = lifecycle({ budget: 10, sizes: { a: 6, big: 20, b: 6 }, cannotStart: (m) => (m.id === 'a' ? undefined : notBuilt) })
    await scheduler.load(named('a'))
    // Neither "does not fit" for the big one nor evicting a for b: the engine is what is missing.
    await expect(scheduler.load(named('big'))).rejects.toBe(notBuilt)
    await expect(scheduler.run(named('b'), job('x'))).rejects.toBe(notBuilt)
    expect(scheduler.loadedModelIds()).toEqual(['a'])
    expect([...engines.keys()]).toEqual(['a'])
  })
})

describe("a chat model's prompt cache", () => {
  const GiB = 1024 ** 3
  it("gets a quarter of what the budget leaves free, at least 256 MiB and at most llama-server's own 8 GiB", () => {
    expect(promptCacheBytes(8 * GiB)).toBe(2 * GiB)
    expect(promptCacheBytes(64 * GiB)).toBe(8 * GiB)
    expect(promptCacheBytes(0)).toBe(256 * 1024 ** 2)
    expect(promptCacheBytes(-3 * GiB)).toBe(256 * 1024 ** 2)
  })
})
