/**
 * whisper.cpp times its tokens by its own heuristics, which drift by up to half a second around
 * pauses: on jfk.wav, "Americans," ran a second into the pause after it and "what" began 0.35 s
 * before it was said. The audio itself says where the pauses are. A quiet stretch is at least
 * 200 ms of 10 ms frames under a tenth of the piece's speech level (its 95th-percentile frame), and
 * a token is moved out of one: a start inside it to its end, an end inside it to its start. Where
 * the whole recording is quiet there is nothing to measure against, and times stay as they are.
 */
import type { SpeechToken } from '../engine-jobs.ts'

const FRAME_MS = 10
const QUIET_SHARE = 0.1
const MIN_QUIET_MS = 200
/** A piece whose loud frames are below this (about -70 dBFS) holds no speech level to compare with. */
const SILENT_LEVEL = 3e-4

export interface QuietStretch {
  startMs: number
  endMs: number
}

export function quietStretches(samples: Float32Array, sampleRate: number): QuietStretch[] {
  const frame = Math.round((sampleRate * FRAME_MS) / 1000)
  const levels: number[] = []
  for (let at = 0; at + frame <= samples.length; at += frame) {
    let sum = 0
    for (let i = at; i < at + frame; i++) sum += samples[i]! * samples[i]!
    levels.push(Math.sqrt(sum / frame))
  }
  const loud = [...levels].sort((a, b) => a - b)[Math.floor(levels.length * 0.95)] ?? 0
  if (loud < SILENT_LEVEL) return []
  const stretches: QuietStretch[] = []
  let from = -1
  for (let f = 0; f <= levels.length; f++) {
    const quiet = f < levels.length && levels[f]! < loud * QUIET_SHARE
    if (quiet && from < 0) from = f
    if (!quiet && from >= 0) {
      if ((f - from) * FRAME_MS >= MIN_QUIET_MS) stretches.push({ startMs: from * FRAME_MS, endMs: f * FRAME_MS })
      from = -1
    }
  }
  return stretches
}

/** The tokens with no start or end inside a quiet stretch, still in order (a token wholly inside one starts and ends where it ends). */
export function outOfQuiet(tokens: readonly SpeechToken[], stretches: readonly QuietStretch[]): SpeechToken[] {
  if (stretches.length === 0) return [...tokens]
  // A start on a stretch's first moment is in it (a piece cut in a pause begins with one), as is an
  // end on its last.
  const startsIn = (ms: number) => stretches.find((s) => ms >= s.startMs && ms < s.endMs)
  const endsIn = (ms: number) => stretches.find((s) => ms > s.startMs && ms <= s.endMs)
  let previousEnd = 0
  return tokens.map((token) => {
    if (token.startMs < 0) return token // whisper gave it no time
    let startMs = startsIn(token.startMs)?.endMs ?? token.startMs
    let endMs = endsIn(token.endMs)?.startMs ?? token.endMs
    startMs = Math.max(startMs, previousEnd)
    endMs = Math.max(endMs, startMs)
    previousEnd = endMs
    return { ...token, startMs, endMs }
  })
}
