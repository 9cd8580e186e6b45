/**
 * Where an answer cites the documents it was given, as OpenAI's `file_citation` annotations. A
 * model told to cite writes `[n]`; a small local model often does not, so an answer without any
 * cites, for each sentence, the one source it repeats at least a few words of in a row: the
 * source the sentence was read from, marked at its end. Pure: text in, citations out.
 */
import type { DocumentSource } from './document-inputs.ts'

/**
 * OpenAI's file citation, at the character just after the `[n]` (or the sentence) it stands for;
 * `quote` (Hearth's own) is the source's text, so a client can show it without asking again.
 */
export interface FileCitation {
  type: 'file_citation'
  file_id: string
  filename: string
  index: number
  quote: string
}

/** Words in a row a sentence must share with a source to be read as taken from it. */
const MIN_SHARED_RUN = 4

/** A source an answer cites, and where: the character just after its `[n]` or its sentence. */
export interface CitedSource {
  source: DocumentSource
  index: number
}

export function citationsIn(text: string, sources: readonly DocumentSource[] | undefined): FileCitation[] {
  return citedSources(text, sources).map(({ source, index }) => ({
    type: 'file_citation',
    file_id: source.fileId,
    filename: source.filename,
    index,
    quote: source.text,
  }))
}

/** The sources an answer cites, in the order it cites them (any protocol's citations are built from these). */
export function citedSources(text: string, sources: readonly DocumentSource[] | undefined): CitedSource[] {
  if (!sources?.length) return []
  const marked: CitedSource[] = []
  for (const m of text.matchAll(/\[(\d{1,4})\]/g)) {
    const source = sources.find((s) => s.citation === Number(m[1]))
    if (source) marked.push({ source, index: m.index + m[0].length })
  }
  if (marked.length) return marked
  const sourceWords = sources.map((s) => wordsOf(s.text))
  const found: CitedSource[] = []
  for (const sentence of text.matchAll(/[^.!?\n]+[.!?]*/g)) {
    const words = wordsOf(sentence[0])
    let best = -1
    let bestRun = MIN_SHARED_RUN - 1
    sourceWords.forEach((own, i) => {
      const run = longestSharedRun(words, own)
      if (run > bestRun) [best, bestRun] = [i, run]
    })
    if (best >= 0) found.push({ source: sources[best]!, index: sentence.index + sentence[0].trimEnd().length })
  }
  return found
}

function wordsOf(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []
}

/** The most words in a row `a` and `b` share (longest common run, by rows of the table). */
function longestSharedRun(a: string[], b: string[]): number {
  let best = 0
  let previous = new Array<number>(b.length + 1).fill(0)
  for (let i = 1; i <= a.length; i++) {
    const row = new Array<number>(b.length + 1).fill(0)
    for (let j = 1; j <= b.length; j++) {
      if (a[i - 1] === b[j - 1]) {
        row[j] = previous[j - 1]! + 1
        if (row[j]! > best) best = row[j]!
      }
    }
    previous = row
  }
  return best
}
