/**
 * A chat model's conversations kept in its slots, across requests and loads: which slot a request
 * takes (slot-affinity.ts decides), a conversation pushed out of its slot parked on disk and loaded
 * back when it returns, and every slot saved when the engine stops and restored when the same model
 * loads again (slot-cache.ts does the disk work). The engine only takes a slot for a request, readies
 * it before sending, and gives it back when the request is over.
 */
import type { EngineLoadSpec } from '../engine-jobs.ts'
import type { EngineServerProcess } from '../engine-server-process.ts'
import { DEFAULT_PROMPT_CACHE_MIB } from './llama-server-args.ts'
import { SlotAffinity, SWAP_SHARE, piecesOf, type PromptPiece } from './slot-affinity.ts'
import { SlotCache } from './slot-cache.ts'

/** The longest a request waits for llama-server to start the one whose pushed-out prompt it needs back. */
const SAVED_WAIT_MS = 30_000

/** A slot taken for one request, with the prompt it will hold once the request is served. */
export interface TakenSlot {
  slot: number
  pieces: PromptPiece[]
  text: string
  conversationKey: string | undefined
}

export class SlotParking {
  private constructor(
    private readonly server: EngineServerProcess,
    private readonly affinity: SlotAffinity,
    private readonly cache: SlotCache | undefined,
  ) {}

  /** For a chat model with slots to choose among, or a folder to park them in; otherwise undefined. */
  static forModel(server: EngineServerProcess, spec: EngineLoadSpec, options: { slotCacheDir: string | undefined; onCpu: boolean }): SlotParking | undefined {
    if (spec.kind !== 'chat') return undefined
    const cache = options.slotCacheDir ? new SlotCache(options.slotCacheDir, spec) : undefined
    // One slot needs no choosing, only parking, which needs the slot cache's folder.
    if (!(spec.parallel > 1 || cache)) return undefined
    const ramCache = (spec.promptCacheMiB ?? DEFAULT_PROMPT_CACHE_MIB) > 0
    return new SlotParking(server, new SlotAffinity(spec.parallel, Date.now, options.onCpu ? SWAP_SHARE.cpu : SWAP_SHARE.gpu, ramCache), cache)
  }

  /** Whether slots are saved to disk (a slot cache folder was given). */
  get keepsSlotsOnDisk(): boolean {
    return this.cache !== undefined
  }

  /** Loads the slots an earlier engine of this model saved, and what each held. */
  async restoreSaved(): Promise<void> {
    await this.cache?.restore(this.server, this.affinity)
  }

  /** Saves every slot and what each holds, for the next load; the engine is stopping. */
  async saveAll(): Promise<void> {
    await this.cache?.save(this.server, this.affinity)
  }

  /** Takes the idle slot that suits the request's prompt (`promptText`); undefined leaves the choice to llama-server. */
  take(text: string, conversationKey: string | undefined): TakenSlot | undefined {
    const pieces = piecesOf(text)
    const slot = this.affinity.take(pieces, conversationKey, text)
    return slot === undefined ? undefined : { slot, pieces, text, conversationKey }
  }

  /**
   * Parks what the slot holds and loads a parked conversation into it, where slot-affinity.ts says
   * it pays. Where llama-server swaps in memory by itself, notes what it will do (the slot's prompt
   * reaches its cache once this request has `started`), and waits, bounded, for the start of the
   * request that put the wanted prompt there.
   */
  async ready(taken: TakenSlot, started: Promise<void>): Promise<void> {
    const { slot, pieces } = taken
    const swap = this.affinity.swapFor(slot, pieces)
    if (swap.byEngine) {
      const saved = this.affinity.swappedByEngine(slot, pieces, started)
      // Bounded: a request that never starts must not hold this one forever.
      if (saved) await Promise.race([saved, new Promise((r) => setTimeout(r, SAVED_WAIT_MS).unref())])
      return
    }
    if (!this.cache) return
    if (swap.park) {
      const file = await this.cache.park(this.server, slot)
      if (file) for (const pushedOut of this.affinity.parked(slot, file)) this.cache.drop(pushedOut)
    }
    if (swap.unpark) this.affinity.unparked(slot, swap.unpark, await this.cache.unpark(this.server, slot, swap.unpark.file))
  }

  /** The request is over: the slot holds its prompt where it was served, else nothing known. */
  release(taken: TakenSlot, served: boolean): void {
    this.affinity.release(taken.slot, served ? taken.pieces : undefined, taken.conversationKey, taken.text)
  }
}
