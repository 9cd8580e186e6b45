/**
 * How long audio is cut into the pieces whisper.cpp is given one at a time, and the sample
 * conversions on the way. Pure functions, so the cutting rules are tested without a model.
 */

export const WHISPER_SAMPLE_RATE = 16_000
/**
 * Longest piece handed to whisper.cpp in one call. It bounds the engine's memory (whisper.cpp
 * keeps the mel spectrogram of the whole call) and how long a cancelled job runs on, since
 * whisper.cpp cannot be stopped inside a call.
 */
export const CHUNK_SECONDS = 300
/**
 * The first piece is short (whisper's own window), so a streamed answer starts within seconds even
 * where the engine only answers a piece once it is done (whisper-server); later pieces are long,
 * since each piece's last window is padded to whisper's 30 s.
 */
export const FIRST_CHUNK_SECONDS = 30
/** A cut is placed in the quietest moment of the piece's last this-many seconds, so words are not cut. */
export const CUT_SEARCH_SECONDS = 20
/** The length of the quiet moment looked for. */
export const CUT_FRAME_SECONDS = 0.1
/** Characters of the previous pieces' text given to the next piece as its prompt, as whisper does between windows. */
export const CARRIED_PROMPT_CHARS = 400

/**
 * Where to end a piece, given its samples (`samples[0]` is the piece's first sample and
 * `samples.length` the longest it may be). The end of the audio ends the last piece; otherwise
 * the cut goes in the middle of the quietest frame of the search window.
 */
export function chunkEnd(samples: Float32Array, isLast: boolean, sampleRate = WHISPER_SAMPLE_RATE): number {
  if (isLast) return samples.length
  const frame = Math.max(1, Math.round(CUT_FRAME_SECONDS * sampleRate))
  const searchFrom = Math.max(0, samples.length - Math.round(CUT_SEARCH_SECONDS * sampleRate))
  return quietestFrameMiddle(samples, searchFrom, frame)
}

/** The middle of the `frame`-long stretch in `samples[from…]` with the least energy (the first of equals). */
export function quietestFrameMiddle(samples: Float32Array, from: number, frame: number): number {
  if (samples.length - from < frame) return samples.length
  let energy = 0
  for (let i = from; i < from + frame; i++) energy += samples[i]! * samples[i]!
  let best = energy
  let bestStart = from
  // Sliding sum: add the sample that enters, drop the one that leaves. Rounding drift over a
  // 20 s window is far below any difference between speech and a pause.
  for (let start = from + 1; start + frame <= samples.length; start++) {
    const leaving = samples[start - 1]!
    const entering = samples[start + frame - 1]!
    energy += entering * entering - leaving * leaving
    if (energy < best) {
      best = energy
      bestStart = start
    }
  }
  return bestStart + (frame >> 1)
}

/** Float samples in [-1, 1] to 16-bit PCM, as the WAV pieces whisper-server is sent hold them (it divides by 32768 again). */
export function toPcm16(samples: Float32Array): Int16Array {
  const out = new Int16Array(samples.length)
  for (let i = 0; i < samples.length; i++) {
    const v = samples[i]! * 32768
    out[i] = v >= 32767 ? 32767 : v <= -32768 ? -32768 : v
  }
  return out
}

/** The end of `text` to carry into the next piece's prompt, starting at a word. */
export function carriedPrompt(text: string, maxChars = CARRIED_PROMPT_CHARS): string {
  const trimmed = text.trim()
  if (trimmed.length <= maxChars) return trimmed
  const tail = trimmed.slice(-maxChars)
  const space = tail.indexOf(' ')
  return (space >= 0 ? tail.slice(space + 1) : tail).trim()
}
