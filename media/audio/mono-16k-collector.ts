/**
 * Turns decoder output, block by block, into one 16 kHz mono signal (what Whisper eats).
 * Each block is downmixed and resampled as it arrives, so a long file never exists as a
 * full-rate multi-channel copy: only the 16 kHz result grows, in memory, or, given a sink, not at
 * all: then blocks of a few seconds go out as they fill, and memory stays flat however long the
 * audio is.
 */
import { SincResampler } from './sinc-resampler.ts'

export const WHISPER_SAMPLE_RATE = 16_000

const EMPTY = new Float32Array(0)
/** Extra room in a reservation for the resampler's rounding and decoder padding (one second). */
const RESERVE_SLACK = WHISPER_SAMPLE_RATE
/** Samples gathered before a sink is handed them: four seconds, 256 KB. */
const SINK_BLOCK_SAMPLES = 4 * WHISPER_SAMPLE_RATE

/** Decoded audio longer than the caller allows: thrown as soon as the limit is passed. */
export class AudioTooLongError extends Error {
  override name = 'AudioTooLongError'
  constructor(readonly maxSeconds: number) {
    super(`the audio is longer than ${maxSeconds} seconds`)
  }
}

export interface CollectorOptions {
  /** Takes the signal block by block instead of keeping it. */
  sink?: (block: Float32Array) => void
  /** The most audio taken, in seconds; more throws AudioTooLongError. */
  maxSeconds?: number
}

export class Mono16kCollector {
  private readonly blocks: Float32Array[] = []
  private length = 0
  private pendingLength = 0
  private readonly sink: ((block: Float32Array) => void) | undefined
  private readonly maxSamples: number

  constructor(private readonly options: CollectorOptions = {}) {
    this.sink = options.sink
    this.maxSamples = options.maxSeconds === undefined ? Infinity : Math.ceil(options.maxSeconds * WHISPER_SAMPLE_RATE)
  }

  /** Samples taken so far. */
  get sampleCount(): number {
    return this.length
  }
  /** When the length is known up front, output goes straight here and `finish` needs no second copy. */
  private reserved: Float32Array | null = null
  private resampler: SincResampler | null = null
  private inputRate = 0

  /**
   * Pre-sizes the output for `seconds` of audio. Only for counts taken from the bytes actually
   * present (WAV data, MPEG frames), never from a header's claim, which could be anything.
   */
  reserveSeconds(seconds: number): void {
    if (this.sink || this.length > 0 || !(seconds > 0)) return
    if (seconds * WHISPER_SAMPLE_RATE > this.maxSamples) throw new AudioTooLongError(this.options.maxSeconds!)
    this.reserved = new Float32Array(Math.ceil(seconds * WHISPER_SAMPLE_RATE) + RESERVE_SLACK)
  }

  /** Adds decoded audio: one array per channel, all the same length. */
  push(channels: readonly Float32Array[], sampleRate: number): void {
    const frames = channels.length === 0 ? 0 : Math.min(...channels.map((channel) => channel.length))
    if (frames === 0) return
    if (!(sampleRate > 0)) throw new RangeError(`decoder reported sample rate ${sampleRate}`)
    if (sampleRate !== this.inputRate) this.switchRate(sampleRate) // MP3 streams may change rate mid-way
    const mono = downmix(channels, frames)
    if (this.resampler) this.append(this.resampler.process(mono))
    else this.append(mono, { borrowed: channels.length === 1 }) // a decoder's own array: copy before keeping it
  }

  /** Flushes the resampler and returns the whole signal in one array (empty when a sink took it). */
  finish(): Float32Array {
    this.flushResampler()
    if (this.sink) {
      this.drainToSink()
      return EMPTY
    }
    const reserved = this.reserved
    if (reserved && this.blocks.length === 0) {
      this.reserved = null
      const unused = reserved.length - this.length
      return unused <= RESERVE_SLACK ? reserved.subarray(0, this.length) : reserved.slice(0, this.length)
    }
    const samples = new Float32Array(this.length)
    let at = 0
    for (let i = 0; i < this.blocks.length; i++) {
      samples.set(this.blocks[i]!, at)
      at += this.blocks[i]!.length
      this.blocks[i] = EMPTY // let each block go as soon as it is copied
    }
    this.blocks.length = 0
    return samples
  }

  private switchRate(sampleRate: number): void {
    this.flushResampler()
    this.inputRate = sampleRate
    this.resampler = sampleRate === WHISPER_SAMPLE_RATE ? null : new SincResampler(sampleRate, WHISPER_SAMPLE_RATE)
  }

  private flushResampler(): void {
    if (this.resampler) this.append(this.resampler.flush())
    this.resampler = null
  }

  private append(block: Float32Array, { borrowed = false } = {}): void {
    if (block.length === 0) return
    if (this.length + block.length > this.maxSamples) throw new AudioTooLongError(this.options.maxSeconds!)
    if (this.sink) {
      this.blocks.push(borrowed ? block.slice() : block)
      this.length += block.length
      this.pendingLength += block.length
      if (this.pendingLength >= SINK_BLOCK_SAMPLES) this.drainToSink()
      return
    }
    if (this.reserved && this.length + block.length > this.reserved.length) {
      this.blocks.push(this.reserved.subarray(0, this.length)) // the estimate was short: carry on in blocks
      this.reserved = null
    }
    if (this.reserved) this.reserved.set(block, this.length)
    else this.blocks.push(borrowed ? block.slice() : block)
    this.length += block.length
  }

  private drainToSink(): void {
    if (this.pendingLength === 0) return
    const block = new Float32Array(this.pendingLength)
    let at = 0
    for (const pending of this.blocks) {
      block.set(pending, at)
      at += pending.length
    }
    this.blocks.length = 0
    this.pendingLength = 0
    this.sink!(block)
  }
}

/** Average of the channels (what `ffmpeg -ac 1` does), without a copy when there is one channel. */
function downmix(channels: readonly Float32Array[], frames: number): Float32Array {
  if (channels.length === 1) return channels[0]!.subarray(0, frames)
  const mono = new Float32Array(frames)
  for (const channel of channels) for (let i = 0; i < frames; i++) mono[i] = mono[i]! + channel[i]!
  const scale = 1 / channels.length
  for (let i = 0; i < frames; i++) mono[i] = mono[i]! * scale
  return mono
}
