/** What decoding gives, and what it takes: shared by the decoder and its worker pool. */
import type { WHISPER_SAMPLE_RATE } from './mono-16k-collector.ts'
import type { SniffedAudioFormat } from './sniff-audio-format.ts'

export interface DecodedAudio {
  /** Mono, 16 kHz, nominally in [-1, 1]. */
  samples: Float32Array
  sampleRate: typeof WHISPER_SAMPLE_RATE
  durationSeconds: number
  /** What the bytes are; null when only ffmpeg recognised them. */
  format: SniffedAudioFormat | null
  decodedBy: 'javascript' | 'ffmpeg'
}

/** The same, written to a file (raw little-endian float32) rather than held in memory. */
export type DecodedAudioFile = Omit<DecodedAudio, 'samples'> & { path: string }

export interface DecodeAudioOptions {
  signal?: AbortSignal
  /**
   * The ffmpeg fallback: undefined looks for `ffmpeg` on PATH, null turns the fallback off,
   * a string is the executable to use.
   */
  ffmpegPath?: string | null
  /** The longest audio taken; longer throws AudioTooLongError as soon as decoding passes it. */
  maxSeconds?: number
}
