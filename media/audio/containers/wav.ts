/**
 * RIFF/WAVE reader. Our own because it is short and exact: integer PCM 8/16/24/32-bit,
 * IEEE float 32/64-bit, plain or WAVE_FORMAT_EXTENSIBLE.
 */
import { UnsupportedAudioError } from '../unsupported-audio-error.ts'
import { ascii, hasAscii, u16le, u32le } from './bytes.ts'

const WAVE_FORMAT_PCM = 0x0001
const WAVE_FORMAT_IEEE_FLOAT = 0x0003
const WAVE_FORMAT_EXTENSIBLE = 0xfffe
/** Writers that stream WAV to a pipe leave the data size at 0 or all ones: read to the end then. */
const UNKNOWN_SIZES = new Set([0, 0xffff_ffff])

export type WavSampleFormat = 'int' | 'float'

export interface WavFormat {
  /** The effective format tag (the sub-format for WAVE_FORMAT_EXTENSIBLE). */
  formatTag: number
  extensible: boolean
  channels: number
  sampleRate: number
  bitsPerSample: number
  /** null when the format tag is neither PCM nor IEEE float, or the bit depth is one we do not read. */
  sampleFormat: WavSampleFormat | null
}

export interface WavLayout extends WavFormat {
  dataOffset: number
  dataLength: number
  frameCount: number
}

export function isRiffWave(bytes: Uint8Array): boolean {
  return hasAscii(bytes, 0, 'RIFF') && hasAscii(bytes, 8, 'WAVE')
}

/** Reads just the fmt chunk, for sniffing. Never throws. */
export function readWavFormat(bytes: Uint8Array): WavFormat | null {
  for (const chunk of riffChunks(bytes)) {
    if (chunk.id === 'fmt ') return chunk.end <= bytes.length ? parseFmt(bytes, chunk.start, chunk.size) : null
  }
  return null
}

/** Locates fmt and data and checks that the data is all there. */
export function readWavLayout(bytes: Uint8Array): WavLayout {
  let format: WavFormat | null = null
  for (const chunk of riffChunks(bytes)) {
    if (chunk.id === 'fmt ') {
      if (chunk.end > bytes.length) throw new UnsupportedAudioError('truncated', 'WAV file ends inside its fmt chunk')
      format = parseFmt(bytes, chunk.start, chunk.size)
      if (!format) throw new UnsupportedAudioError('corrupt', 'WAV fmt chunk is malformed')
      continue
    }
    if (chunk.id !== 'data') continue
    if (!format) throw new UnsupportedAudioError('corrupt', 'WAV data chunk comes before its fmt chunk')
    if (!format.sampleFormat) {
      throw new UnsupportedAudioError(
        'unsupported_codec',
        `WAV format tag 0x${format.formatTag.toString(16)} at ${format.bitsPerSample} bits is not PCM or IEEE float`,
      )
    }
    const available = bytes.length - chunk.start
    let dataLength = chunk.size
    if (UNKNOWN_SIZES.has(chunk.size)) dataLength = available
    else if (chunk.size > available) {
      throw new UnsupportedAudioError('truncated', `WAV data chunk declares ${chunk.size} bytes but only ${available} are present`)
    }
    const blockAlign = format.channels * (format.bitsPerSample / 8)
    return { ...format, dataOffset: chunk.start, dataLength, frameCount: Math.floor(dataLength / blockAlign) }
  }
  throw new UnsupportedAudioError(format ? 'truncated' : 'corrupt', 'WAV file has no data chunk')
}

/**
 * Yields the samples as float channels, `framesPerChunk` frames at a time, so a long file never
 * needs a second full-length copy.
 */
export function* readWavSamples(bytes: Uint8Array, layout: WavLayout, framesPerChunk = 65_536): Generator<Float32Array[]> {
  const { channels, bitsPerSample, sampleFormat, frameCount } = layout
  const bytesPerSample = bitsPerSample / 8
  const blockAlign = channels * bytesPerSample
  const view = new DataView(bytes.buffer, bytes.byteOffset + layout.dataOffset, frameCount * blockAlign)
  const readSample = sampleReader(view, sampleFormat!, bitsPerSample)

  for (let firstFrame = 0; firstFrame < frameCount; firstFrame += framesPerChunk) {
    const frames = Math.min(framesPerChunk, frameCount - firstFrame)
    const chunk = Array.from({ length: channels }, () => new Float32Array(frames))
    let at = firstFrame * blockAlign
    for (let frame = 0; frame < frames; frame++) {
      for (let channel = 0; channel < channels; channel++, at += bytesPerSample) chunk[channel]![frame] = readSample(at)
    }
    yield chunk
  }
}

function sampleReader(view: DataView, format: WavSampleFormat, bits: number): (at: number) => number {
  if (format === 'float') return bits === 32 ? (at) => view.getFloat32(at, true) : (at) => view.getFloat64(at, true)
  switch (bits) {
    case 8:
      return (at) => (view.getUint8(at) - 128) / 128 // 8-bit WAV is unsigned
    case 16:
      return (at) => view.getInt16(at, true) / 32_768
    case 24:
      return (at) => (view.getUint16(at, true) | (view.getInt8(at + 2) << 16)) / 8_388_608
    default:
      return (at) => view.getInt32(at, true) / 2_147_483_648
  }
}

function parseFmt(bytes: Uint8Array, start: number, size: number): WavFormat | null {
  if (size < 16) return null
  let formatTag = u16le(bytes, start)
  const channels = u16le(bytes, start + 2)
  const sampleRate = u32le(bytes, start + 4)
  const bitsPerSample = u16le(bytes, start + 14)
  const extensible = formatTag === WAVE_FORMAT_EXTENSIBLE
  if (extensible) {
    // WAVEFORMATEXTENSIBLE: cbSize(2) validBits(2) channelMask(4), then a GUID whose first two bytes are the real tag.
    if (size < 40) return null
    formatTag = u16le(bytes, start + 24)
  }
  if (channels === 0 || sampleRate === 0) return null
  return { formatTag, extensible, channels, sampleRate, bitsPerSample, sampleFormat: sampleFormatOf(formatTag, bitsPerSample) }
}

function sampleFormatOf(formatTag: number, bits: number): WavSampleFormat | null {
  if (formatTag === WAVE_FORMAT_PCM && [8, 16, 24, 32].includes(bits)) return 'int'
  if (formatTag === WAVE_FORMAT_IEEE_FLOAT && (bits === 32 || bits === 64)) return 'float'
  return null
}

interface RiffChunk {
  id: string
  start: number
  size: number
  end: number
}

/** Top-level chunks after the 12-byte RIFF/WAVE header; the last one may run past the end of the file. */
function* riffChunks(bytes: Uint8Array): Generator<RiffChunk> {
  let at = 12
  while (at + 8 <= bytes.length) {
    const size = u32le(bytes, at + 4)
    const chunk = { id: ascii(bytes, at, 4), start: at + 8, size, end: at + 8 + size }
    yield chunk
    at = chunk.end + (size & 1) // chunks are padded to an even length
  }
}
