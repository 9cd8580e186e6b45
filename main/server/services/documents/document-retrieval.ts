/**
 * Which parts of the documents go into the chat. Each small part is ranked twice, by meaning (the
 * cosine of its embedding to the question's) and by exact words (BM25), and the two rankings are
 * fused by reciprocal rank: a fact found by either way comes near the top, one found by both comes
 * first. The best parts that fit the token budget are given, neighbours in a document joined into
 * one passage. Pure: vectors and texts in, parts out.
 */
import { estimateTokens } from './document-chunks.ts'
import { KeywordIndex } from './keyword-index.ts'

/** How parts are found: both ways (the default), or one alone (to measure, or to do without an embedding model). */
export type RetrievalMethod = 'hybrid' | 'embeddings' | 'keywords'
export const RETRIEVAL_METHODS: readonly RetrievalMethod[] = ['hybrid', 'embeddings', 'keywords']

/** A whole document, or a retrieved part of one. */
export interface DocumentPart {
  document: string
  name: string
  text: string
  /** Retrieved parts: how well the part matched, 0 to 1 (cosine alone, or the fused rank's share of the best possible). */
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
  /** The part's embedding; undefined when retrieval is by keywords alone. */
  vector: Float32Array | undefined
}

/** Candidates best first, each with its score (see DocumentPart.score). */
export interface Ranking {
  order: number[]
  scores: number[]
}

/** Tokens the chat spends around each part: its `[n] name (part k)` line and the blank lines. */
export const PART_OVERHEAD_TOKENS = 12

/**
 * Reciprocal rank fusion's constant: a part's share from one ranking is 1 / (K + its rank). Small,
 * so the first few places of either ranking count for much more than the tail (measured on
 * `npm run bench -- --only retrieval`).
 */
const FUSION_K = 10

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
 * The candidates ranked for the question by `method`. A ranking by keywords leaves out parts with
 * none of the question's words; the fused one keeps every part its embedding ranks.
 */
export function rankCandidates(candidates: readonly Candidate[], question: string, queryVector: Float32Array | undefined, method: RetrievalMethod): Ranking {
  const byMeaning = method !== 'keywords' && queryVector ? candidates.map((c) => (c.vector ? cosine(c.vector, queryVector) : -1)) : undefined
  const byWords = method !== 'embeddings' ? new KeywordIndex(candidates.map((c) => c.text)).scores(question) : undefined
  if (method === 'embeddings' || !byWords) return sortedBy(byMeaning ?? candidates.map(() => 0), (s) => Math.round(s * 10000) / 10000)
  if (method === 'keywords' || !byMeaning) {
    const best = Math.max(...byWords, 0)
    return sortedBy(byWords, (s) => (best > 0 ? Math.round((s / best) * 10000) / 10000 : 0))
  }
  const fused = new Array<number>(candidates.length).fill(0)
  for (const scores of [byMeaning, byWords]) {
    sortedBy(scores).order.forEach((i, rank) => {
      if (scores === byWords && byWords[i] === 0) return
      fused[i]! += 1 / (FUSION_K + rank + 1)
    })
  }
  const best = 2 / (FUSION_K + 1)
  return sortedBy(fused, (s) => Math.round((s / best) * 10000) / 10000)
}

function sortedBy(scores: number[], shown: (score: number) => number = (s) => s): Ranking {
  const order = scores.map((_, i) => i).sort((a, b) => scores[b]! - scores[a]! || a - b)
  return { order, scores: scores.map(shown) }
}

/**
 * The best candidates of `ranking` that fit `budgetTokens` together, best first; parts of a
 * document that overlap or meet become one passage (the sentence cut between two parts is whole
 * again, and the overlap is not paid twice). Without a ranking, the documents' beginnings in order.
 * When not even the best fits, its start does: the chat always gets something to cite. `texts`
 * holds each document's text by id; `tokensOf` is what a passage costs, with its heading.
 */
export function selectParts(
  candidates: Candidate[],
  ranking: Ranking | undefined,
  budgetTokens: number,
  texts: ReadonlyMap<string, string>,
  tokensOf: (part: { document: string; text: string }) => number = (part) => estimateTokens(part.text) + PART_OVERHEAD_TOKENS,
): DocumentPart[] {
  const order = ranking?.order ?? candidates.map((_, i) => i)
  const scoreOf = (i: number) => score(ranking?.scores[i])
  let picked: DocumentPart[] = []
  for (const i of order) {
    const c = candidates[i]!
    const next = joinPart(picked, { document: c.document, name: c.name, text: c.text, start: c.start, end: c.end, ...scoreOf(i) }, texts)
    if (next.reduce((sum, p) => sum + tokensOf(p), 0) <= budgetTokens) picked = next
  }
  if (picked.length === 0 && order.length > 0) {
    const best = candidates[order[0]!]!
    const text = longestStart(best.text, (start) => tokensOf({ document: best.document, text: start }) <= budgetTokens)
    picked.push({ document: best.document, name: best.name, text, start: best.start, end: best.start + text.length, ...scoreOf(order[0]!) })
  }
  return picked
}

const score = (value: number | undefined) => (value === undefined ? {} : { score: value })

/**
 * `parts` with `part` added: joined with the parts of its document it overlaps or meets (only blank
 * space between), in the place of the first of them and with the best score; else added last.
 */
function joinPart(parts: DocumentPart[], part: DocumentPart, texts: ReadonlyMap<string, string>): DocumentPart[] {
  const text = texts.get(part.document) ?? ''
  const meets = (a: { end: number }, b: { start: number }) => a.end >= b.start || text.slice(a.end, b.start).trim() === ''
  const touching = (p: DocumentPart) => p.document === part.document && meets(p, part) && meets(part, p)
  const first = parts.findIndex(touching)
  if (first < 0) return [...parts, part]
  const joined = [part, ...parts.filter(touching)]
  const start = Math.min(...joined.map((p) => p.start))
  const end = Math.max(...joined.map((p) => p.end))
  const scores = joined.flatMap((p) => (p.score === undefined ? [] : [p.score]))
  const merged: DocumentPart = { ...parts[first]!, start, end, text: text.slice(start, end), ...score(scores.length ? Math.max(...scores) : undefined) }
  return parts.flatMap((p, i) => (i === first ? [merged] : touching(p) ? [] : [p]))
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
