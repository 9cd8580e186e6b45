/**
 * A conversation's prompt cache outlives its engine: when a chat model unloads, each slot's cache
 * (its tokens and their KV state) is saved to the data folder through llama-server's slot API, and
 * the next load of the same model file, with the same context and slots, restores it, so the next
 * turn starts where the last one left off. The folder is bounded: least recently used files go
 * first once it holds more than its budget.
 */
import { createHash } from 'node:crypto'
import { readdirSync, rmSync, statSync, utimesSync } from 'node:fs'
import { join } from 'node:path'
import type { EngineLoadSpec } from '../engine/engine-protocol.ts'
import type { EngineServerProcess } from '../engine/engine-server-process.ts'

/** All models' saved slots together. */
export const SLOT_CACHE_BUDGET_BYTES = 2 * 1024 ** 3
const SAVE_TIMEOUT_MS = 10_000

export class SlotCache {
  constructor(
    private readonly dir: string,
    private readonly spec: EngineLoadSpec,
    private readonly budgetBytes = SLOT_CACHE_BUDGET_BYTES,
  ) {}

  /** Saves every slot that holds a prompt; failures only cost the next load its head start. */
  async save(server: EngineServerProcess): Promise<void> {
    const deadline = AbortSignal.timeout(SAVE_TIMEOUT_MS)
    for (let slot = 0; slot < this.slots; slot++) {
      try {
        const res = await server.request(`/slots/${slot}?action=save`, { body: { filename: this.fileName(slot) }, signal: deadline })
        const saved = (await res.json()) as { n_saved?: number }
        if (!res.ok || !saved.n_saved) rmSync(this.path(slot), { force: true })
      } catch {
        rmSync(this.path(slot), { force: true })
      }
    }
    this.prune()
  }

  /** Restores the slots saved by an earlier engine for this same model and shape; returns how many. */
  async restore(server: EngineServerProcess): Promise<number> {
    let restored = 0
    for (let slot = 0; slot < this.slots; slot++) {
      const path = this.path(slot)
      if (!exists(path)) continue
      const res = await server.request(`/slots/${slot}?action=restore`, { body: { filename: this.fileName(slot) } })
      await res.body?.cancel()
      if (res.ok) {
        restored++
        const now = new Date()
        utimesSync(path, now, now) // recently used: pruned last
      } else {
        rmSync(path, { force: true })
      }
    }
    return restored
  }

  private get slots(): number {
    return Math.max(1, this.spec.parallel)
  }

  /** The model file as it is now and the engine's shape: a changed file or context never restores old state. */
  private fileName(slot: number): string {
    const file = statSync(this.spec.path)
    const identity = [this.spec.path, file.size, file.mtimeMs, this.spec.projectorPath ?? '', this.spec.contextLength, this.slots].join('|')
    const key = createHash('sha256').update(identity).digest('hex').slice(0, 24)
    return `${key}-slot${slot}.bin`
  }

  private path(slot: number): string {
    return join(this.dir, this.fileName(slot))
  }

  private prune(): void {
    const files = readdirSync(this.dir)
      .filter((name) => name.endsWith('.bin'))
      .map((name) => {
        const stat = statSync(join(this.dir, name))
        return { path: join(this.dir, name), bytes: stat.size, used: stat.mtimeMs }
      })
      .sort((a, b) => b.used - a.used)
    let total = 0
    for (const file of files) {
      total += file.bytes
      if (total > this.budgetBytes) rmSync(file.path, { force: true })
    }
  }
}

function exists(path: string): boolean {
  try {
    return statSync(path).isFile()
  } catch {
    return false
  }
}
