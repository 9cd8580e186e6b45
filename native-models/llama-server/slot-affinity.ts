/**
 * Which of llama-server's slots a chat request takes, so that each conversation keeps the slot that
 * holds its prompt. llama-server alone picks the idle slot sharing the most of the prompt, or else
 * the least recently used one: an agent's title request, or a sub-agent's, can then take the slot
 * of a long conversation that merely paused, and the conversation's next turn reads its prompt
 * again (or back from the RAM cache, when it is still there). Hearth knows more: the messages
 * each slot last held and the conversation they belong to. It picks
 * - the idle slot that shares the longest start with the request (the system prompt and tools
 *   count: an agent's sub-agents share them);
 * - among equals, the one that last served the same conversation (`conversationKey`);
 * - where none shares anything, the slot that is cheapest to give up: empty, then the one holding
 *   least, preferring a slot whose conversation has been idle for a while.
 * Prompts are compared by the hashes of their text in pieces of a few hundred characters; the
 * engine compares tokens, so this is the same choice made a little coarser. A slot whose content is not
 * known (its request failed) counts as empty: llama-server keeps what it pushes out in its RAM
 * cache anyway.
 */
import { createHash } from 'node:crypto'

/** A piece of a prompt's text, by hash and size. */
export interface PromptPiece {
  hash: string
  size: number
}

interface SlotState {
  busy: boolean
  /** What the slot held after its last request (nothing known: empty). */
  pieces: PromptPiece[]
  key: string | undefined
  lastUsed: number
}

/** What the slots hold, kept with the slots' saved caches so a restarted engine knows them again. */
export interface SlotAffinityState {
  slots: Array<{ pieces: PromptPiece[]; key: string | undefined }>
}

/** A conversation idle this long is worth less than one that just paused. */
const STALE_MS = 10 * 60_000

export class SlotAffinity {
  private readonly slots: SlotState[]

  constructor(
    slots: number,
    private readonly now: () => number = Date.now,
  ) {
    this.slots = Array.from({ length: slots }, () => ({ busy: false, pieces: [], key: undefined, lastUsed: 0 }))
  }

  /** Picks an idle slot and marks it busy; undefined leaves the choice to llama-server. */
  take(pieces: readonly PromptPiece[], key: string | undefined): number | undefined {
    const idle = this.slots.map((s, id) => ({ s, id })).filter(({ s }) => !s.busy)
    if (idle.length === 0) return undefined
    const scored = idle.map(({ s, id }) => ({
      id,
      shared: sharedSize(s.pieces, pieces),
      sameKey: key !== undefined && s.key === key,
      cost: this.keepingCost(s),
      lastUsed: s.lastUsed,
    }))
    scored.sort((a, b) => b.shared - a.shared || Number(b.sameKey) - Number(a.sameKey) || a.cost - b.cost || a.lastUsed - b.lastUsed)
    const chosen = scored[0]!.id
    this.slots[chosen]!.busy = true
    return chosen
  }

  /** The request on `slot` is over: the slot now holds its prompt (or nothing known, if it failed). */
  release(slot: number, pieces: readonly PromptPiece[] | undefined, key: string | undefined): void {
    const state = this.slots[slot]
    if (!state) return
    state.busy = false
    state.pieces = pieces ? [...pieces] : []
    state.key = key
    state.lastUsed = this.now()
  }

  snapshot(): SlotAffinityState {
    return { slots: this.slots.map((s) => ({ pieces: s.pieces, key: s.key })) }
  }

  /** What a restored engine's slots hold, as saved with them. */
  restore(state: SlotAffinityState, restored: (slot: number) => boolean): void {
    state.slots.forEach((saved, i) => {
      const slot = this.slots[i]
      if (!slot || !restored(i)) return
      slot.pieces = saved.pieces
      slot.key = saved.key
      slot.lastUsed = this.now()
    })
  }

  /** What giving up this slot costs: its prompt's size, nothing once its conversation went stale. */
  private keepingCost(slot: SlotState): number {
    const size = slot.pieces.reduce((sum, p) => sum + p.size, 0)
    return this.now() - slot.lastUsed > STALE_MS ? 0 : size
  }
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

/** Characters per piece: a change costs the rest of its piece, about 60 tokens. */
const PIECE_CHARACTERS = 256

/** A chat request body's prompt (its tools, then its messages) as pieces of its text. */
export function promptPieces(body: { messages: readonly unknown[]; tools?: unknown }): PromptPiece[] {
  const text = JSON.stringify([body.tools ?? null, ...body.messages])
  const pieces: PromptPiece[] = []
  for (let at = 0; at < text.length; at += PIECE_CHARACTERS) {
    const piece = text.slice(at, at + PIECE_CHARACTERS)
    pieces.push({ hash: createHash('sha1').update(piece).digest('base64url').slice(0, 16), size: piece.length })
  }
  return pieces
}
