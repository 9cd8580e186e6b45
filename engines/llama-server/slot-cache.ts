/**
 * A conversation's prompt cache outlives its engine: when a chat model unloads, each slot's cache
 * (its tokens and their KV state) is saved to the data folder through llama-server's slot API, and
 * the next load of the same model file, with the same context and slots, restores it, so the next
 * turn starts where the last one left off. What each slot held goes with them (slot-affinity.ts),
 * so the conversation finds its own slot again. While the model is loaded, a conversation pushed
 * out of its slot is parked here too (slot-affinity.ts says when), and loaded back when it returns.
 * The folder is bounded: least recently used files go first once it holds more than its budget.
 * Every file is written under a temporary name, flushed and renamed into place, so a crash (of the
 * server, which takes llama-server with it) never leaves half a prompt cache to be restored.
 */
import { createHash, randomUUID } from 'node:crypto'
import { closeSync, fsyncSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeSync } from 'node:fs'
import { join } from 'node:path'
import type { EngineLoadSpec } from '../engine-jobs.ts'
import type { EngineServerProcess } from '../engine-server-process.ts'
import type { SlotAffinity, SlotAffinityState } from './slot-affinity.ts'

/** All models' saved slots together. */
export const SLOT_CACHE_BUDGET_BYTES = 2 * 1024 ** 3
const SAVE_TIMEOUT_MS = 10_000
/** Files being written have this ending until they are renamed into place. */
const PARTIAL = '.partial'
/** A partial file this old belongs to no save in progress (each has SAVE_TIMEOUT_MS): a crash left it. */
const LEFTOVER_MS = 60_000

export class SlotCache {
  constructor(
    private readonly dir: string,
    private readonly spec: EngineLoadSpec,
    private readonly budgetBytes = SLOT_CACHE_BUDGET_BYTES,
  ) {}

  /** Saves every slot that holds a prompt; failures only cost the next load its head start. */
  async save(server: EngineServerProcess, affinity?: SlotAffinity): Promise<void> {
    const deadline = AbortSignal.timeout(SAVE_TIMEOUT_MS)
    for (let slot = 0; slot < this.slots; slot++) {
      if (!(await this.saveAs(server, slot, this.fileName(slot), deadline))) rmSync(this.path(slot), { force: true })
    }
    if (affinity) writeWhole(this.affinityPath(), JSON.stringify(affinity.snapshot()))
    this.prune()
  }

  /** Restores the slots saved by an earlier engine for this same model and shape; returns how many. */
  async restore(server: EngineServerProcess, affinity?: SlotAffinity): Promise<number> {
    this.sweepLeftovers()
    const restored = new Set<number>()
    for (let slot = 0; slot < this.slots; slot++) {
      const path = this.path(slot)
      if (!exists(path)) continue
      const res = await server.request(`/slots/${slot}?action=restore`, { body: { filename: this.fileName(slot) } })
      await res.body?.cancel()
      if (res.ok) {
        restored.add(slot)
        const now = new Date()
        utimesSync(path, now, now) // recently used: pruned last
      } else {
        rmSync(path, { force: true })
      }
    }
    const held = affinity && readJson<SlotAffinityState>(this.affinityPath())
    if (held)
      affinity.restore(
        held,
        (slot) => restored.has(slot),
        (file) => this.isParkedFile(file) && exists(join(this.dir, file)),
      )
    return restored.size
  }

  /** Saves what `slot` holds to a file of its own; returns its name, or undefined where the save failed. */
  async park(server: EngineServerProcess, slot: number): Promise<string | undefined> {
    const file = this.fileName(0).replace(/-slot0\.bin$/, `-parked-${randomUUID().slice(0, 8)}.bin`)
    if (await this.saveAs(server, slot, file, AbortSignal.timeout(SAVE_TIMEOUT_MS))) {
      this.prune()
      return file
    }
    // Not parked: the conversation computes its tail again when it returns.
    this.drop(file)
    return undefined
  }

  /** Has llama-server save `slot` under a temporary name, then flushes it and renames it to `file`; false where that failed. */
  private async saveAs(server: EngineServerProcess, slot: number, file: string, signal: AbortSignal): Promise<boolean> {
    const partial = join(this.dir, `${file}${PARTIAL}`)
    try {
      const res = await server.request(`/slots/${slot}?action=save`, { body: { filename: `${file}${PARTIAL}` }, signal })
      const saved = (await res.json()) as { n_saved?: number }
      if (!res.ok || !saved.n_saved) return false
      flush(partial)
      renameSync(partial, join(this.dir, file))
      return true
    } catch {
      return false
    } finally {
      rmSync(partial, { force: true })
    }
  }

  /** Removes partial files no save is writing any more (a crash cut them off). */
  private sweepLeftovers(): void {
    const now = Date.now()
    for (const name of readdirSync(this.dir)) {
      if (!name.endsWith(PARTIAL)) continue
      const path = join(this.dir, name)
      try {
        if (now - statSync(path).mtimeMs > LEFTOVER_MS) rmSync(path, { force: true })
      } catch {
        // gone meanwhile
      }
    }
  }

  /** Loads a parked prompt into `slot`, then removes its file (the slot holds it now); false where that failed. */
  async unpark(server: EngineServerProcess, slot: number, file: string): Promise<boolean> {
    if (!this.isParkedFile(file)) return false
    try {
      const res = await server.request(`/slots/${slot}?action=restore`, { body: { filename: file } })
      await res.body?.cancel()
      return res.ok
    } catch {
      return false
    } finally {
      this.drop(file)
    }
  }

  drop(file: string): void {
    if (this.isParkedFile(file)) rmSync(join(this.dir, file), { force: true })
  }

  /** A parked file of this model and shape: names read back from disk never point elsewhere. */
  private isParkedFile(file: string): boolean {
    const prefix = this.fileName(0).replace(/-slot0\.bin$/, '-parked-')
    return file.startsWith(prefix) && /^[0-9a-f]{24}-parked-[0-9a-f]{8}\.bin$/.test(file)
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

  private affinityPath(): string {
    return join(this.dir, this.fileName(0).replace(/-slot0\.bin$/, '-slots.json'))
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
    // What the slots held is kept only while their first slot's cache is.
    for (const name of readdirSync(this.dir).filter((n) => n.endsWith('-slots.json'))) {
      if (!exists(join(this.dir, name.replace(/-slots\.json$/, '-slot0.bin')))) rmSync(join(this.dir, name), { force: true })
    }
  }
}

/** Flushes a file (written by llama-server) to the disk before it is renamed into place. */
function flush(path: string): void {
  const fd = openSync(path, 'r')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/** Writes a small file whole: a temporary file, flushed, renamed over the old one. */
function writeWhole(path: string, text: string): void {
  const partial = `${path}.${randomUUID().slice(0, 8)}${PARTIAL}`
  try {
    const fd = openSync(partial, 'wx')
    try {
      writeSync(fd, text)
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    renameSync(partial, path)
  } finally {
    rmSync(partial, { force: true })
  }
}

function readJson<T>(path: string): T | undefined {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as T
  } catch {
    return undefined
  }
}

function exists(path: string): boolean {
  try {
    return statSync(path).isFile()
  } catch {
    return false
  }
}
