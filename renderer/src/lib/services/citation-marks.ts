/**
 * The answer's citations as the page shows them: each a `[n]` the person can click to read the
 * passage the answer came from. A model that wrote `[n]` has its own marks; where the server found
 * the source by the words an answer repeats (a small model writes no `[n]`), the mark goes where
 * the server's citation points, at the end of the sentence.
 */

/** Where a citation points in the answer's text, and which source (its number) it cites. */
export interface CitationMark {
  at: number
  n: number
}

/** The text with `[n]` at each mark that the model did not write there itself. */
export function withCitationMarks(text: string, marks: readonly CitationMark[] | undefined): string {
  if (!marks?.length) return text
  let out = text
  for (const { at, n } of [...marks].sort((a, b) => b.at - a.at)) {
    if (at < 0 || at > out.length || /\[\d{1,4}\]$/.test(out.slice(0, at))) continue
    out = `${out.slice(0, at)} [${n}]${out.slice(at)}`
  }
  return out
}

export type CitationPiece = { text: string } | { n: number }

/** Text cut at its `[n]` marks of sources the answer has, for the marks to become buttons. */
export function citationPieces(text: string, sources: ReadonlySet<number>): CitationPiece[] {
  if (sources.size === 0) return [{ text }]
  const pieces: CitationPiece[] = []
  let from = 0
  for (const m of text.matchAll(/\[(\d{1,4})\]/g)) {
    const n = Number(m[1])
    if (!sources.has(n)) continue
    if (m.index > from) pieces.push({ text: text.slice(from, m.index) })
    pieces.push({ n })
    from = m.index + m[0].length
  }
  if (from < text.length) pieces.push({ text: text.slice(from) })
  return pieces
}
