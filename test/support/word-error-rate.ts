/**
 * Word error rate as speech recognition is scored: both texts normalised the way whisper's basic
 * text normaliser does (lower case, punctuation and symbols to spaces, apostrophes kept inside words,
 * runs of space collapsed), then the word-level edit distance over the reference's word count.
 */
export function normaliseSpeech(text: string): string {
  return text
    .toLowerCase()
    .replace(/[\u2018\u2019]/g, "'")
    .replace(/\[[^\]]*\]|\([^)]*\)/g, ' ') // [music], (laughs): not words
    .replace(/[^\p{L}\p{N}']+/gu, ' ')
    .replace(/(^|\s)'|'(\s|$)/g, ' ')
    .replace(/\s+/g, ' ')
    .trim()
}

export function wordErrorRate(reference: string, hypothesis: string): number {
  const ref = normaliseSpeech(reference).split(' ').filter(Boolean)
  const hyp = normaliseSpeech(hypothesis).split(' ').filter(Boolean)
  if (ref.length === 0) return hyp.length === 0 ? 0 : 1
  let previous = Array.from({ length: hyp.length + 1 }, (_, j) => j)
  for (let i = 1; i <= ref.length; i++) {
    const row = [i]
    for (let j = 1; j <= hyp.length; j++) {
      row[j] = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + (ref[i - 1] === hyp[j - 1] ? 0 : 1))
    }
    previous = row
  }
  return previous[hyp.length]! / ref.length
}
