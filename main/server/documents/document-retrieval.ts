/**
 * Which parts of the documents go into the chat: the chunks most like the question, best first,
 * as many as fit the token budget. Pure: vectors in, parts out.
 */
import { estimateTokens } from './document-chunks.ts'

/** A whole document, or a retrieved part of one. */
export interface DocumentPart {
  document: string
  name: string
  text: string
  /** Retrieved parts: cosine similarity to the query. */
  score?: number
  /** Character offsets of `text` in the document's text. */
  start: number
  end: number
}

export interface Candidate {
  document: string
  name: string
  start: number
  end: number
  text: string
  /** The chunk's embedding; undefined when there is no question to compare it with. */
  vector: Float32Array | undefined
}

/** Tokens the chat spends around each part: its `[n] name (part k)` line and the blank lines. */
export const PART_OVERHEAD_TOKENS = 12

export function cosine(a: Float32Array, b: Float32Array): number {
  let dot = 0
  let na = 0
  let nb = 0
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!
    na += a[i]! * a[i]!
    nb += b[i]! * b[i]!
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb)
}

/**
 * The best candidates by cosine similarity to `query` that fit `budgetTokens` together, best
 * first. Without a query, the documents' beginnings in order. When not even the best fits, its
 * start does: the chat always gets something to cite. `tokensOf` is what a part costs, with its heading.
 */
export function selectParts(
  candidates: Candidate[],
  query: Float32Array | undefined,
  budgetTokens: number,
  tokensOf: (part: { document: string; text: string }) => number = (part) => estimateTokens(part.text) + PART_OVERHEAD_TOKENS,
): DocumentPart[] {
  const scored = candidates.map((c) => ({ c, score: query && c.vector ? cosine(c.vector, query) : undefined }))
  if (query) scored.sort((a, b) => b.score! - a.score!)
  const picked: typeof scored = []
  let used = 0
  for (const s of scored) {
    const cost = tokensOf(s.c)
    if (used + cost > budgetTokens) continue
    picked.push(s)
    used += cost
  }
  if (picked.length === 0 && scored.length > 0) {
    const best = scored[0]!
    const text = longestStart(best.c.text, (start) => tokensOf({ document: best.c.document, text: start }) <= budgetTokens)
    picked.push({ c: { ...best.c, text, end: best.c.start + text.length }, score: best.score })
  }
  return picked.map(({ c, score }) => ({
    document: c.document,
    name: c.name,
    text: c.text,
    ...(score === undefined ? {} : { score: Math.round(score * 10000) / 10000 }),
    start: c.start,
    end: c.end,
  }))
}

/** The longest start of `text` that `fits`, at least one character. */
function longestStart(text: string, fits: (start: string) => boolean): string {
  let low = 1
  let high = text.length
  while (low < high) {
    const mid = Math.ceil((low + high) / 2)
    if (fits(text.slice(0, mid))) low = mid
    else high = mid - 1
  }
  return text.slice(0, low)
}
