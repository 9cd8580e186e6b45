/**
 * Which of llama-server's slots a chat request takes, so that each conversation keeps the slot that
 * holds its prompt. llama-server alone picks the idle slot sharing the most of the prompt, or else
 * the least recently used one: an agent's title request, or a sub-agent's, can then take the slot
 * of a long conversation that merely paused, and the conversation's next turn reads its prompt
 * again (or back from the RAM cache, when it is still there). Hearth knows what each slot last
 * held and which conversation it belongs to, and picks the idle slot that leaves the least to
 * compute again, now and later: what the request must compute beyond the start it shares with the
 * slot, plus what the slot holds beyond that start, which its own conversation would lose (nothing,
 * once that conversation has been idle for ten minutes). So a conversation comes back to its slot;
 * a title or summary request, even of the same session, takes an empty slot or another side
 * request's; a sub-agent that shares only the system prompt leaves a long conversation alone, and
 * one that shares most of it joins it. Among equals, the slot that last served the same
 * conversation (`conversationKey`) wins, then the least recently used.
 * Prompts are compared by the hashes of their text in pieces of a few hundred characters; the
 * engine compares tokens, so this is the same choice made a little coarser. A slot whose content is
 * not known (its request failed) counts as empty: llama-server keeps what it pushes out in its RAM
 * cache anyway.
 *
 * A conversation pushed out of its slot is kept in memory where llama-server keeps it by itself:
 * when a request keeps less than half of what its slot holds, llama-server moves the slot's prompt
 * to its RAM prompt cache and loads the cached prompt that shares the most with the request. Hearth
 * leaves those swaps to it and only remembers what went where. llama-server does nothing of the
 * sort when the request keeps half or more, which agents sharing a long system prompt always do:
 * there, where slots can be saved (a slot cache folder), the conversation is parked on disk (the
 * slot saved to a file), and loaded back into whichever slot it returns to. Never both for one
 * conversation. Saving and loading cost time in proportion to the whole prompt, computing in
 * proportion to its tail: a slot is parked, or a parked prompt loaded, only when the tail is worth it.
 */
import { hash } from 'node:crypto'

/** A piece of a prompt's text, by hash and size. */
export interface PromptPiece {
  hash: string
  size: number
}

interface SlotState {
  busy: boolean
  /** What the slot held after its last request (nothing known: empty). */
  pieces: PromptPiece[]
  /** Its text too, where this process served it: prompts that differ within a piece are told apart. */
  text: string | undefined
  key: string | undefined
  lastUsed: number
}

/** A conversation's prompt pushed out of its slot and saved to a file, to be loaded back when it returns. */
export interface ParkedPrompt {
  file: string
  pieces: PromptPiece[]
  key: string | undefined
  lastUsed: number
}

/** A prompt llama-server moved from a slot to its RAM prompt cache (as far as Hearth can tell). */
interface KeptPrompt {
  pieces: PromptPiece[]
  key: string | undefined
  /**
   * Settles once llama-server has started the request that pushed the prompt out, which is when it
   * moves the prompt to its cache: a request that needs the prompt back waits for it, or llama-server
   * (taking concurrent requests in the order they reach it) may look for the prompt in its cache
   * before it is there, and compute it all again.
   */
  saved: Promise<void> | undefined
}

/**
 * What to do to a slot before a request runs on it: save what it holds, load a parked prompt; or
 * nothing, as llama-server swaps the slot's prompt with one from its RAM cache by itself (`byEngine`).
 */
export interface SlotSwap {
  park: boolean
  unpark: ParkedPrompt | undefined
  byEngine: boolean
}

/** What the slots hold, kept with the slots' saved caches so a restarted engine knows them again. */
export interface SlotAffinityState {
  slots: Array<{ pieces: PromptPiece[]; key: string | undefined }>
  parked?: Array<{ file: string; pieces: PromptPiece[]; key: string | undefined }>
}

/** A conversation idle this long is worth less than one that just paused. */
const STALE_MS = 10 * 60_000

/**
 * A tail worth saving or loading: at least this many characters (about 250 tokens), and a share of
 * the prompt, since a save or load takes time in proportion to the whole prompt's state. On a CPU,
 * computing a token costs about a thousand times what copying its state does (a 135M model: 13 ms
 * against 11 µs on one thread), so a sixty-fourth is plenty; a fast GPU computes a token in a few
 * times what loading its state takes, hence an eighth there.
 */
const WORTH_SWAPPING_CHARACTERS = 1024
export const SWAP_SHARE = { cpu: 1 / 64, gpu: 1 / 8 } as const

/** Parked prompts kept per model; the least recently used goes first. */
const PARKED_LIMIT = 8
/**
 * llama-server moves a slot's prompt to its RAM cache when the request keeps less than half of it
 * (in tokens). Hearth measures in characters, so it leaves the swap to llama-server only below
 * this share, clear of the edge; between the two both may keep the prompt, which costs only memory.
 */
const ENGINE_SWAPS_BELOW = 0.4
/** The least share of a cached prompt llama-server loads back for a request ("don't trash large prompts"). */
const ENGINE_LOADS_FROM = 0.25
/** Prompts remembered as in llama-server's RAM cache; it drops the oldest by its own size limit. */
const KEPT_LIMIT = 32

export class SlotAffinity {
  private readonly slots: SlotState[]
  private parkedPrompts: ParkedPrompt[] = []
  private keptPrompts: KeptPrompt[] = []

  constructor(
    slots: number,
    private readonly now: () => number = Date.now,
    /** The share of a prompt its tail must reach to be parked or loaded (SWAP_SHARE). */
    private readonly swapShare: number = SWAP_SHARE.gpu,
    /** Whether llama-server has a RAM prompt cache (`--cache-ram` above 0). */
    private readonly engineKeepsPrompts = true,
  ) {
    this.slots = Array.from({ length: slots }, () => ({ busy: false, pieces: [], text: undefined, key: undefined, lastUsed: 0 }))
  }

  /**
   * Picks an idle slot and marks it busy; undefined leaves the choice to llama-server. With the
   * prompt's `text`, the start it shares with a slot this process served is counted to the
   * character, not to the piece: short prompts (a title, a probe) fit within one piece.
   */
  take(pieces: readonly PromptPiece[], key: string | undefined, text?: string): number | undefined {
    const idle = this.slots.map((s, id) => ({ s, id })).filter(({ s }) => !s.busy)
    if (idle.length === 0) return undefined
    const scored = idle.map(({ s, id }) => {
      const whole = sharedSize(s.pieces, pieces)
      const shared = text !== undefined && s.text !== undefined ? whole + sharedCharacters(s.text, text, whole) : whole
      // Work left to do: the request's part beyond the shared start, and the slot's own part
      // beyond it, which its conversation would compute again. The request's size is the same
      // for every slot, so it drops out.
      return { id, work: this.keepingCost(s) - 2 * shared, sameKey: key !== undefined && s.key === key, lastUsed: s.lastUsed }
    })
    scored.sort((a, b) => a.work - b.work || Number(b.sameKey) - Number(a.sameKey) || a.lastUsed - b.lastUsed)
    const chosen = scored[0]!.id
    this.slots[chosen]!.busy = true
    return chosen
  }

  /** The request on `slot` is over: the slot now holds its prompt (or nothing known, if it failed). */
  release(slot: number, pieces: readonly PromptPiece[] | undefined, key: string | undefined, text?: string): void {
    const state = this.slots[slot]
    if (!state) return
    state.busy = false
    holds(state, pieces ? [...pieces] : [], key, pieces ? text : undefined)
    state.lastUsed = this.now()
  }

  /**
   * Before a request runs on `slot` (taken for it): whether to park what the slot holds, a tail the
   * request would overwrite, and which parked prompt to load, one that shares clearly more of the
   * request than the slot does.
   */
  swapFor(slot: number, pieces: readonly PromptPiece[]): SlotSwap {
    const held = this.slots[slot]?.pieces ?? []
    const shared = sharedSize(held, pieces)
    let unpark: ParkedPrompt | undefined
    let unparkShared = shared
    for (const parked of this.parkedPrompts) {
      const size = sharedSize(parked.pieces, pieces)
      if (size > unparkShared) [unpark, unparkShared] = [parked, size]
    }
    if (unpark && !this.worthSwapping(unparkShared - shared, totalSize(unpark.pieces))) unpark = undefined
    // llama-server swaps by itself, in memory, unless a file holds more of the request than its cache.
    if (this.engineSwaps(held, shared) && (!unpark || this.engineLoad(pieces, shared).size >= unparkShared))
      return { park: false, unpark: undefined, byEngine: true }
    // What the slot will hold next: the parked prompt, or the request from the shared start on.
    const kept = unpark ? sharedSize(held, unpark.pieces) : shared
    const tail = totalSize(held) - kept
    const alreadyParked = this.parkedPrompts.some((p) => contains(p.pieces, held))
    return { park: !alreadyParked && this.worthSwapping(tail, totalSize(held)), unpark, byEngine: false }
  }

  /**
   * llama-server swaps the slot's prompt for a request (swapFor said `byEngine`) when it starts the
   * request (`started`): what the slot held goes to its RAM cache, and the cached prompt it loads
   * for the request leaves it. Returns what to wait for before sending the request: the start of
   * the request that put that prompt in the cache, where it may not have started yet.
   */
  swappedByEngine(slot: number, pieces: readonly PromptPiece[], started?: Promise<void>): Promise<void> | undefined {
    const state = this.slots[slot]
    if (!state) return undefined
    const loaded = this.engineLoad(pieces, sharedSize(state.pieces, pieces)).prompt
    this.keptPrompts = this.keptPrompts.filter((k) => k !== loaded && !contains(state.pieces, k.pieces))
    if (state.pieces.length > 0) this.keptPrompts.unshift({ pieces: state.pieces, key: state.key, saved: started })
    this.keptPrompts.splice(KEPT_LIMIT)
    holds(state, loaded?.pieces ?? [], loaded?.key)
    return loaded?.saved
  }

  /** The slot's prompt was saved to `file`; returns the files of parked prompts it replaces or pushes out. */
  parked(slot: number, file: string): string[] {
    const state = this.slots[slot]
    if (!state) return []
    const size = totalSize(state.pieces)
    // A longer park of the same conversation replaces its shorter one.
    const replaced = this.parkedPrompts.filter((p) => contains(state.pieces, p.pieces) && totalSize(p.pieces) <= size)
    this.parkedPrompts = this.parkedPrompts.filter((p) => !replaced.includes(p))
    this.parkedPrompts.push({ file, pieces: [...state.pieces], key: state.key, lastUsed: this.now() })
    this.parkedPrompts.sort((a, b) => b.lastUsed - a.lastUsed)
    const pushedOut = this.parkedPrompts.splice(PARKED_LIMIT)
    return [...replaced, ...pushedOut].map((p) => p.file)
  }

  /** The parked prompt was loaded into `slot` (its file is gone), or could not be: forget it either way. */
  unparked(slot: number, prompt: ParkedPrompt, loaded: boolean): void {
    this.parkedPrompts = this.parkedPrompts.filter((p) => p !== prompt)
    const state = this.slots[slot]
    if (!state || !loaded) return
    holds(state, prompt.pieces, prompt.key)
  }

  /** What the slots hold, for the slot cache to save; what llama-server keeps in RAM is gone with it. */
  snapshot(): SlotAffinityState {
    return {
      slots: this.slots.map((s) => ({ pieces: s.pieces, key: s.key })),
      parked: this.parkedPrompts.map(({ file, pieces, key }) => ({ file, pieces, key })),
    }
  }

  /** What a restored engine's slots hold, as saved with them, and the parked prompts whose files are still there. */
  restore(state: SlotAffinityState, restored: (slot: number) => boolean, fileKept: (file: string) => boolean = () => false): void {
    state.slots.forEach((saved, i) => {
      const slot = this.slots[i]
      if (!slot || !restored(i)) return
      holds(slot, saved.pieces, saved.key)
      slot.lastUsed = this.now()
    })
    this.parkedPrompts = (state.parked ?? []).filter((p) => fileKept(p.file)).map((p) => ({ ...p, lastUsed: this.now() }))
  }

  /** Whether llama-server moves the slot's prompt to its RAM cache before this request by itself. */
  private engineSwaps(held: readonly PromptPiece[], shared: number): boolean {
    return this.engineKeepsPrompts && held.length > 0 && shared < totalSize(held) * ENGINE_SWAPS_BELOW
  }

  /** The prompt llama-server would load from its RAM cache for the request, as its own rule picks it, and how much of the request it holds. */
  private engineLoad(pieces: readonly PromptPiece[], sharedWithSlot: number): { prompt: KeptPrompt | undefined; size: number } {
    let best: { prompt: KeptPrompt | undefined; size: number } = { prompt: undefined, size: sharedWithSlot }
    for (const prompt of this.keptPrompts) {
      const size = sharedSize(prompt.pieces, pieces)
      if (size > best.size && size >= totalSize(prompt.pieces) * ENGINE_LOADS_FROM) best = { prompt, size }
    }
    return best
  }

  private worthSwapping(gain: number, whole: number): boolean {
    return gain >= WORTH_SWAPPING_CHARACTERS && gain >= whole * this.swapShare
  }

  /** What the slot holds that is worth keeping: its prompt's size, nothing once its conversation went stale. */
  private keepingCost(slot: SlotState): number {
    const size = totalSize(slot.pieces)
    return this.now() - slot.lastUsed > STALE_MS ? 0 : size
  }
}

/** What a slot holds now: its text only where this process served the prompt, so a loaded or restored one has none. */
function holds(slot: SlotState, pieces: PromptPiece[], key: string | undefined, text?: string): void {
  slot.pieces = pieces
  slot.text = text
  slot.key = key
}

function totalSize(pieces: readonly PromptPiece[]): number {
  return pieces.reduce((sum, p) => sum + p.size, 0)
}

/** Whether `longer` starts with all of `shorter` (its last piece, cut short, aside). */
function contains(longer: readonly PromptPiece[], shorter: readonly PromptPiece[]): boolean {
  return sharedSize(longer, shorter) >= totalSize(shorter) - PIECE_CHARACTERS
}

/** The size of the start two prompts share. */
function sharedSize(held: readonly PromptPiece[], wanted: readonly PromptPiece[]): number {
  let size = 0
  for (let i = 0; i < Math.min(held.length, wanted.length); i++) {
    if (held[i]!.hash !== wanted[i]!.hash) break
    size += wanted[i]!.size
  }
  return size
}

/** How many characters two texts share from `from` on, where they agree up to `from`, within one piece. */
function sharedCharacters(held: string, wanted: string, from: number): number {
  const end = Math.min(held.length, wanted.length, from + PIECE_CHARACTERS)
  let at = from
  while (at < end && held.charCodeAt(at) === wanted.charCodeAt(at)) at++
  return at - from
}

/** Characters per piece: a change costs the rest of its piece, about 60 tokens. */
const PIECE_CHARACTERS = 256

/** A prompt's text (`WrittenChatBody.promptText`) in pieces of PIECE_CHARACTERS, by hash and size. */
export function piecesOf(text: string): PromptPiece[] {
  const pieces: PromptPiece[] = []
  for (let at = 0; at < text.length; at += PIECE_CHARACTERS) {
    const piece = text.slice(at, at + PIECE_CHARACTERS)
    // The one-shot hash: a Hash object per piece cost an agent's request (~200 pieces) 2 ms.
    pieces.push({ hash: hash('sha1', piece, 'base64url').slice(0, 16), size: piece.length })
  }
  return pieces
}
