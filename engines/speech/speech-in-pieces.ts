/**
 * Long audio through whisper in pieces (a short first one, then at most CHUNK_SECONDS), cut at
 * quiet moments, each piece's text carried into the next as its prompt, as whisper does between its
 * own windows. whisper-server only ever transcribes one piece.
 */
import { open, type FileHandle } from 'node:fs/promises'
import { ModelError } from '../errors.ts'
import { CHUNK_SECONDS, FIRST_CHUNK_SECONDS, WHISPER_SAMPLE_RATE, carriedPrompt, chunkEnd } from './audio-chunks.ts'
import type { SpeechJob, SpeechResult, SpeechSegment } from '../engine-jobs.ts'

const BYTES_PER_SAMPLE = Float32Array.BYTES_PER_ELEMENT
/**
 * whisper.cpp skips input shorter than 100 ms anyway, but on a few samples its language detection
 * fails, and a call that failed there has been seen never to return: such pieces (a WAV
 * whose header claims a huge sample rate, the last sliver of a long recording) are not sent at all.
 */
const MIN_PIECE_SAMPLES = WHISPER_SAMPLE_RATE / 10

export interface PieceOptions {
  language: string | undefined
  prompt: string | undefined
  temperature: number | undefined
}

/** One piece's segments in audio time (the piece's offset added), and the language whisper heard. */
export interface PieceResult {
  segments: SpeechSegment[]
  language: string | undefined
}

export type TranscribePiece = (samples: Float32Array, offsetSamples: number, options: PieceOptions) => Promise<PieceResult>

export async function speechInPieces(job: SpeechJob, transcribe: TranscribePiece, signal: AbortSignal): Promise<SpeechResult> {
  const file = await open(job.audioPath, 'r')
  try {
    const total = Math.floor((await file.stat()).size / BYTES_PER_SAMPLE)
    const segments: SpeechSegment[] = []
    let language = job.language
    let prompt = job.prompt
    let processMs = 0
    for (let start = 0; start < total;) {
      if (signal.aborted) throw cancelled()
      const chunkSamples = (start === 0 ? FIRST_CHUNK_SECONDS : CHUNK_SECONDS) * WHISPER_SAMPLE_RATE
      const isLast = start + chunkSamples >= total
      const window = await readSamples(file, start, Math.min(total, start + chunkSamples))
      const end = start + chunkEnd(window, isLast)
      const samples = window.subarray(0, end - start)
      if (samples.length >= MIN_PIECE_SAMPLES) {
        const began = performance.now()
        const piece = await transcribe(samples, start, { language, prompt, temperature: job.temperature })
        processMs += performance.now() - began
        segments.push(...piece.segments)
        language ??= piece.language
        const said = carriedPrompt(piece.segments.map((s) => s.text).join(''))
        if (said) prompt = said
      }
      start = end
    }
    return { type: 'speech', segments, language: language ?? 'en', durationSeconds: total / WHISPER_SAMPLE_RATE, processMs }
  } finally {
    await file.close()
  }
}

/**
 * A segment whisper timed within a piece, in the audio's time: whisper may run past a short
 * piece's end, and its token times may stray outside their segment, so both are held inside.
 */
export function inAudioTime(segment: SpeechSegment, offsetSamples: number, lengthSamples: number): SpeechSegment {
  const offsetMs = (offsetSamples / WHISPER_SAMPLE_RATE) * 1000
  const lengthMs = (lengthSamples / WHISPER_SAMPLE_RATE) * 1000
  const endMs = Math.min(Math.max(segment.endMs, 0), lengthMs)
  const startMs = Math.min(Math.max(segment.startMs, 0), endMs)
  const within = (ms: number) => offsetMs + Math.min(Math.max(ms, startMs), endMs)
  const timed: SpeechSegment = { startMs: offsetMs + startMs, endMs: offsetMs + endMs, text: segment.text }
  if (segment.detail) {
    let previousEnd = startMs
    const tokens = segment.detail.tokens.map((t) => {
      // Unknown (-1) or backwards times take the previous token's end: timings stay in order.
      const tokenStart = Math.max(t.startMs, previousEnd)
      const tokenEnd = Math.max(t.endMs, tokenStart)
      previousEnd = Math.min(tokenEnd, endMs)
      return { ...t, startMs: within(tokenStart), endMs: within(tokenEnd) }
    })
    timed.detail = { ...segment.detail, tokens }
  }
  return timed
}

export function cancelled(): ModelError {
  return new ModelError('cancelled', 'the request was cancelled')
}

/** Samples [from, to) of a file of float32 samples. */
async function readSamples(file: FileHandle, from: number, to: number): Promise<Float32Array> {
  const samples = new Float32Array(to - from)
  const bytes = new Uint8Array(samples.buffer)
  for (let done = 0; done < bytes.length;) {
    const { bytesRead } = await file.read(bytes, done, bytes.length - done, from * BYTES_PER_SAMPLE + done)
    if (bytesRead === 0) throw new ModelError('internal_error', 'the audio file ended early')
    done += bytesRead
  }
  return samples
}
