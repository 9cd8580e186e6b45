/**
 * Exact-word search over a document's parts (Okapi BM25): the half of retrieval that finds "E47"
 * or "gateway" where an embedding of a long, repetitive part has drowned the one sentence that
 * holds it. Pure and in memory: a request's parts are indexed in a few milliseconds.
 */

/** BM25's usual constants: how fast a word's repeats stop counting, and how much a long part is discounted. */
const K1 = 1.2
const B = 0.75

/** Words too common to tell parts apart (English; other languages keep all their words). */
const STOP_WORDS = new Set(
  (
    'a an and are as at be been but by can could did do does for from had has have how i if in into is it its ' +
    'me my no not of on or our so than that the their them then there these they this to was we were what when ' +
    'where which who whom why will with would you your about after before did does done any all also'
  ).split(' '),
)

/**
 * A text's search terms: lowercased runs of letters and digits ("E47" stays one term), stop words
 * left out, and a plural's `s` taken off so "piers" finds "pier".
 */
export function searchTerms(text: string): string[] {
  const terms: string[] = []
  for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) {
    if (STOP_WORDS.has(word)) continue
    terms.push(stem(word))
  }
  return terms
}

function stem(word: string): string {
  if (word.length > 4 && word.endsWith('ies')) return `${word.slice(0, -3)}y`
  if (word.length > 3 && word.endsWith('s') && !word.endsWith('ss') && !word.endsWith('us') && !/\d/.test(word)) return word.slice(0, -1)
  return word
}

export class KeywordIndex {
  /** Per part: how often each of its terms occurs. */
  private readonly counts: Array<Map<string, number>>
  private readonly lengths: number[]
  private readonly averageLength: number
  /** In how many parts each term occurs. */
  private readonly partsWith = new Map<string, number>()

  constructor(texts: readonly string[]) {
    this.counts = texts.map((text) => {
      const counts = new Map<string, number>()
      for (const term of searchTerms(text)) counts.set(term, (counts.get(term) ?? 0) + 1)
      for (const term of counts.keys()) this.partsWith.set(term, (this.partsWith.get(term) ?? 0) + 1)
      return counts
    })
    this.lengths = this.counts.map((c) => [...c.values()].reduce((a, b) => a + b, 0))
    this.averageLength = this.lengths.reduce((a, b) => a + b, 0) / Math.max(1, this.lengths.length)
  }

  /** Each part's BM25 score for the query, in the parts' order (0: no word of the query in it). */
  scores(query: string): number[] {
    const terms = [...new Set(searchTerms(query))]
    const total = this.counts.length
    return this.counts.map((counts, i) => {
      let score = 0
      for (const term of terms) {
        const f = counts.get(term)
        if (!f) continue
        const n = this.partsWith.get(term)!
        const idf = Math.log(1 + (total - n + 0.5) / (n + 0.5))
        score += (idf * f * (K1 + 1)) / (f + K1 * (1 - B + (B * this.lengths[i]!) / (this.averageLength || 1)))
      }
      return score
    })
  }
}
