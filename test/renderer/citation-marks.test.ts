/** The answer's citations on the chat page: a `[n]` for each, where the server's citation points, that the page turns into a button. */
import { describe, expect, it } from 'vitest'
import { citationPieces, withCitationMarks } from '../../renderer/src/lib/services/citation-marks.ts'

describe('citation marks', () => {
  it('puts [n] where a citation points, unless the model wrote it there itself', () => {
    const text = 'The gateway failed. Its certificate had expired [2]. Nothing else.'
    const marks = [
      { at: text.indexOf(' Its'), n: 1 },
      { at: text.indexOf(' Nothing') - 1, n: 2 },
      { at: text.length, n: 2 },
    ]
    expect(withCitationMarks(text, marks)).toBe('The gateway failed. [1] Its certificate had expired [2]. Nothing else. [2]')
    expect(withCitationMarks(text, undefined)).toBe(text)
    expect(withCitationMarks('Short.', [{ at: 99, n: 1 }])).toBe('Short.')
  })

  it('cuts the text at the marks of sources the answer has, and leaves other brackets as text', () => {
    expect(citationPieces('See [1] and [7], or [2].', new Set([1, 2]))).toEqual([
      { text: 'See ' },
      { n: 1 },
      { text: ' and [7], or ' },
      { n: 2 },
      { text: '.' },
    ])
    expect(citationPieces('See [1].', new Set())).toEqual([{ text: 'See [1].' }])
  })
})
