/**
 * Word times moved out of the pauses the audio itself shows: whisper.cpp's token times drift into
 * them, and a piece cut in a pause begins with one.
 */
import { describe, expect, it } from 'vitest'
import { outOfQuiet, quietStretches } from '../../engines/speech/quiet-stretches.ts'

const RATE = 16_000

/** A tone for each `[fromMs, toMs]`, silence elsewhere, `totalMs` long. */
function speechAt(totalMs: number, ...spans: Array<[number, number]>): Float32Array {
  const samples = new Float32Array((totalMs * RATE) / 1000)
  for (const [from, to] of spans) for (let i = (from * RATE) / 1000; i < (to * RATE) / 1000; i++) samples[i] = 0.5 * Math.sin(i / 5)
  return samples
}

const token = (text: string, startMs: number, endMs: number) => ({ text, probability: 0.9, startMs, endMs })

describe('quiet stretches', () => {
  it('finds the pauses of 200 ms or more, not shorter gaps', () => {
    const audio = speechAt(3_000, [500, 1_000], [1_100, 2_000])
    expect(quietStretches(audio, RATE)).toEqual([
      { startMs: 0, endMs: 500 },
      { startMs: 2_000, endMs: 3_000 },
    ])
  })

  it('finds nothing where the whole recording is quiet', () => {
    expect(quietStretches(new Float32Array(RATE), RATE)).toEqual([])
  })

  it('moves a start in a pause to where speech resumes, and an end to where it stopped', () => {
    const quiet = quietStretches(speechAt(3_000, [500, 1_500], [2_000, 3_000]), RATE)
    expect(outOfQuiet([token(' so', 1_200, 1_800), token(' fellow', 1_700, 2_400)], quiet)).toEqual([
      token(' so', 1_200, 1_500),
      token(' fellow', 2_000, 2_400),
    ])
  })

  it('moves a word on the first moment of a piece that begins in a pause to the speech', () => {
    // A piece cut in a pause: whisper put its first word at the piece's start.
    const quiet = quietStretches(speechAt(3_000, [1_450, 3_000]), RATE)
    expect(outOfQuiet([token(' And', 0, 0), token(' so', 1_500, 1_700)], quiet)).toEqual([token(' And', 1_450, 1_450), token(' so', 1_500, 1_700)])
  })

  it('leaves tokens whisper gave no time, and keeps the rest in order', () => {
    const quiet = quietStretches(speechAt(2_000, [0, 800], [1_200, 2_000]), RATE)
    const moved = outOfQuiet([token(' a', 700, 1_000), token('[_TT_]', -1, -1), token(' b', 900, 1_300)], quiet)
    expect(moved).toEqual([token(' a', 700, 800), token('[_TT_]', -1, -1), token(' b', 1_200, 1_300)])
  })
})
