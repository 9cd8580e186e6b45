/**
 * Splits a document's text into overlapping parts of about a given number of tokens, cut where
 * the text itself breaks: between paragraphs, else between sentences, else between words. Token
 * counts are estimated (no tokenizer at hand): 3.5 characters of ASCII text per token, and one
 * token for every other character, since the tokenizers of the models we run spend about one
 * token per CJK character and often more than one per accented letter.
 */

export interface TextChunk {
  /** Character offsets into the text: the chunk is `text.slice(start, end)`. */
  start: number
  end: number
}

/** Estimates count in sevenths of a token, so sums stay exact: 2/7 per ASCII character (3.5 to a token), 7/7 for any other. */
const ASCII_SEVENTHS = 2
const OTHER_SEVENTHS = 7

export function estimateTokens(text: string): number {
  let sevenths = 0
  for (let i = 0; i < text.length; i++) sevenths += text.charCodeAt(i) < 128 ? ASCII_SEVENTHS : OTHER_SEVENTHS
  return Math.ceil(sevenths / 7)
}

export interface ChunkOptions {
  /** Most estimated tokens a chunk holds. */
  maxTokens: number
  /** About how many tokens of the end of one chunk start the next, so a fact cut in two is whole in one of them. */
  overlapTokens: number
}

export function chunkText(text: string, { maxTokens, overlapTokens }: ChunkOptions): TextChunk[] {
  const cost = tokenPrefix(text)
  const tokens = (start: number, end: number) => Math.ceil((cost[end]! - cost[start]!) / 7)
  const units = pieces(text, tokens, maxTokens)
  const chunks: TextChunk[] = []
  let first = 0
  while (first < units.length) {
    let last = first
    while (last + 1 < units.length && tokens(units[first]!.start, units[last + 1]!.end) <= maxTokens) last++
    chunks.push({ start: units[first]!.start, end: units[last]!.end })
    if (last === units.length - 1) break
    // The next chunk starts with the last pieces of this one that fit in the overlap, never at its start.
    let next = last + 1
    while (next - 1 > first && tokens(units[next - 1]!.start, units[last]!.end) <= overlapTokens) next--
    first = next
  }
  return chunks
}

/** Running token estimate: cost[i] / 7 is the estimate for `text.slice(0, i)`, before rounding up. */
function tokenPrefix(text: string): Float64Array {
  const cost = new Float64Array(text.length + 1)
  for (let i = 0; i < text.length; i++) cost[i + 1] = cost[i]! + (text.charCodeAt(i) < 128 ? ASCII_SEVENTHS : OTHER_SEVENTHS)
  return cost
}

/**
 * The text cut into pieces no larger than `maxTokens`: paragraphs, the paragraphs too large cut
 * into sentences, the sentences too large into runs of words (or of characters, for text without
 * spaces). Blank space between pieces belongs to none of them.
 */
function pieces(text: string, tokens: (start: number, end: number) => number, maxTokens: number): TextChunk[] {
  const out: TextChunk[] = []
  for (const paragraph of spans(text, 0, text.length, /\n\s*\n/g)) {
    if (tokens(paragraph.start, paragraph.end) <= maxTokens) {
      out.push(paragraph)
      continue
    }
    for (const sentence of spans(text, paragraph.start, paragraph.end, /(?<=[.!?]["'”’)\]]*)\s+|(?<=[。！？])|\n/g)) {
      if (tokens(sentence.start, sentence.end) <= maxTokens) out.push(sentence)
      else out.push(...wordRuns(text, sentence, tokens, maxTokens))
    }
  }
  return out
}

/** The non-blank stretches of `text[start, end)` between matches of `separator`. */
function spans(text: string, start: number, end: number, separator: RegExp): TextChunk[] {
  const out: TextChunk[] = []
  const region = text.slice(start, end)
  let from = 0
  for (const m of region.matchAll(separator)) {
    out.push(...trimmed(text, start + from, start + m.index))
    from = m.index + m[0].length
  }
  out.push(...trimmed(text, start + from, end))
  return out
}

/** `text[start, end)` without its leading and trailing blank space: one span, or none when all blank. */
function trimmed(text: string, start: number, end: number): TextChunk[] {
  while (start < end && /\s/.test(text[start]!)) start++
  while (end > start && /\s/.test(text[end - 1]!)) end--
  return end > start ? [{ start, end }] : []
}

/** A sentence too long for one chunk, cut at the last space that keeps each run within the limit. */
function wordRuns(text: string, sentence: TextChunk, tokens: (start: number, end: number) => number, maxTokens: number): TextChunk[] {
  const out: TextChunk[] = []
  let from = sentence.start
  while (from < sentence.end) {
    let to = from + 1
    while (to < sentence.end && tokens(from, to + 1) <= maxTokens) to++
    if (to < sentence.end) {
      const space = text.lastIndexOf(' ', to)
      if (space > from) to = space
    }
    out.push(...trimmed(text, from, to))
    from = to
  }
  return out
}
