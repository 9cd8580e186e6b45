/**
 * MPEG-1/2/2.5 audio (Layer I, II, III) frame headers: finding the first real frame, and walking
 * the frames to tell a complete stream from a cut one.
 */
import { UnsupportedAudioError } from '../unsupported-audio-error.ts'
import { hasAscii, u32be } from './bytes.ts'

export interface MpegAudioFrameHeader {
  /** 1 = MPEG-1, 2 = MPEG-2, 2.5 = MPEG-2.5 */
  version: 1 | 2 | 2.5
  layer: 1 | 2 | 3
  bitrateKbps: number
  sampleRate: number
  channels: 1 | 2
  frameLength: number
  samplesPerFrame: number
}

const BITRATES_KBPS: Record<string, readonly number[]> = {
  'v1-l1': [0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],
  'v1-l2': [0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],
  'v1-l3': [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
  'v2-l1': [0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],
  'v2-l2': [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
}
const SAMPLE_RATES: Record<number, readonly number[]> = {
  1: [44_100, 48_000, 32_000],
  2: [22_050, 24_000, 16_000],
  2.5: [11_025, 12_000, 8_000],
}

/** Parses the 4-byte header at `at`, or returns null if it is not a valid (non-free-format) frame header. */
export function readMpegAudioFrameHeader(bytes: Uint8Array, at: number): MpegAudioFrameHeader | null {
  if (at + 4 > bytes.length) return null
  const header = u32be(bytes, at)
  if (header >>> 21 !== 0x7ff) return null // 11-bit frame sync
  const versionBits = (header >>> 19) & 3
  const layerBits = (header >>> 17) & 3
  const bitrateIndex = (header >>> 12) & 15
  const rateIndex = (header >>> 10) & 3
  if (versionBits === 1 || layerBits === 0 || bitrateIndex === 0 || bitrateIndex === 15 || rateIndex === 3) return null
  if ((header & 3) === 2) return null // reserved emphasis

  const version = versionBits === 3 ? 1 : versionBits === 2 ? 2 : 2.5
  const layer = (4 - layerBits) as 1 | 2 | 3
  const table = version === 1 ? `v1-l${layer}` : layer === 1 ? 'v2-l1' : 'v2-l2'
  const bitrateKbps = BITRATES_KBPS[table]![bitrateIndex]!
  const sampleRate = SAMPLE_RATES[version]![rateIndex]!
  const padding = (header >>> 9) & 1
  const channels = ((header >>> 6) & 3) === 3 ? 1 : 2
  const samplesPerFrame = layer === 1 ? 384 : layer === 3 && version !== 1 ? 576 : 1152
  const frameLength =
    layer === 1
      ? (Math.floor((12_000 * bitrateKbps) / sampleRate) + padding) * 4
      : Math.floor(((samplesPerFrame / 8) * 1000 * bitrateKbps) / sampleRate) + padding
  return { version, layer, bitrateKbps, sampleRate, channels, frameLength, samplesPerFrame }
}

/** Size of a leading ID3v2 tag (header, body and optional footer), or 0 when there is none. */
export function id3v2Length(bytes: Uint8Array, at = 0): number {
  if (!hasAscii(bytes, at, 'ID3') || at + 10 > bytes.length) return 0
  const size = syncsafe(bytes, at + 6)
  if (size < 0) return 0
  const hasFooter = (bytes[at + 5]! & 0x10) !== 0
  return 10 + size + (hasFooter ? 10 : 0)
}

function syncsafe(bytes: Uint8Array, at: number): number {
  let value = 0
  for (let i = 0; i < 4; i++) {
    const byte = bytes[at + i]!
    if (byte & 0x80) return -1
    value = value * 128 + byte
  }
  return value
}

/** How many consecutive frames must chain before we believe random bytes are MPEG audio. */
const FRAMES_TO_CONFIRM = 3

/**
 * Finds the first frame of a real MPEG audio stream at or after `start`, looking at most
 * `maxSkip` bytes ahead (encoders and taggers leave padding). A candidate counts only when
 * the next frames chain on from it with the same version/layer/sample rate, or the stream
 * ends cleanly right after it.
 */
export function findFirstMpegAudioFrame(bytes: Uint8Array, start: number, maxSkip: number): number {
  const last = Math.min(bytes.length - 4, start + maxSkip)
  for (let at = start; at <= last; at++) {
    if (bytes[at] !== 0xff) continue
    if (chainsFrom(bytes, at)) return at
  }
  return -1
}

function chainsFrom(bytes: Uint8Array, at: number): boolean {
  const first = readMpegAudioFrameHeader(bytes, at)
  if (!first) return false
  let next = at
  for (let i = 0; i < FRAMES_TO_CONFIRM; i++) {
    const frame = readMpegAudioFrameHeader(bytes, next)
    if (!frame || frame.version !== first.version || frame.layer !== first.layer || frame.sampleRate !== first.sampleRate) return false
    next += frame.frameLength
    if (next === bytes.length) return true
    if (next > bytes.length) return false
  }
  return true
}

export interface MpegAudioStreamSummary {
  firstFrame: MpegAudioFrameHeader
  frames: number
  /** Audio frames the Xing/Info or VBRI header says the stream has, when it says. */
  declaredFrames: number | null
}

/**
 * Walks every frame from `start` and throws 'truncated' when the last frame is cut short or when
 * fewer frames are present than the encoder's Xing/Info/VBRI header declares. Junk between
 * frames is skipped (resynchronising), and trailing ID3v1/APE/Lyrics tags end the walk.
 */
export function summarizeMpegAudioStream(bytes: Uint8Array, start: number): MpegAudioStreamSummary {
  const firstFrame = readMpegAudioFrameHeader(bytes, start)
  if (!firstFrame) throw new UnsupportedAudioError('corrupt', 'no MPEG audio frame at the start of the stream')
  const declaredFrames = encoderDeclaredFrames(bytes, start, firstFrame)
  let frames = declaredFrames === null ? 0 : -1 // the Xing/Info frame itself carries no audio
  let at = start
  while (at + 4 <= bytes.length) {
    const frame = readMpegAudioFrameHeader(bytes, at)
    if (frame && frame.sampleRate === firstFrame.sampleRate && frame.layer === firstFrame.layer) {
      if (at + frame.frameLength > bytes.length) {
        throw new UnsupportedAudioError('truncated', `MPEG audio frame ${frames + 1} is cut off at the end of the file`)
      }
      frames++
      at += frame.frameLength
      continue
    }
    if (isTrailingTag(bytes, at)) break
    const resync = findFirstMpegAudioFrame(bytes, at + 1, bytes.length)
    if (resync < 0) break // trailing junk
    at = resync
  }
  if (declaredFrames !== null && frames < declaredFrames) {
    throw new UnsupportedAudioError('truncated', `MPEG audio stream has ${frames} of the ${declaredFrames} frames its header declares`)
  }
  return { firstFrame, frames, declaredFrames }
}

function isTrailingTag(bytes: Uint8Array, at: number): boolean {
  return hasAscii(bytes, at, 'TAG') || hasAscii(bytes, at, 'APETAGEX') || hasAscii(bytes, at, 'LYRICS')
}

/** The frame count from a Xing/Info (LAME) or VBRI header inside the first frame, if any. */
function encoderDeclaredFrames(bytes: Uint8Array, at: number, frame: MpegAudioFrameHeader): number | null {
  if (frame.layer !== 3) return null
  const sideInfo = frame.version === 1 ? (frame.channels === 1 ? 17 : 32) : frame.channels === 1 ? 9 : 17
  const xing = at + 4 + sideInfo
  if (hasAscii(bytes, xing, 'Xing') || hasAscii(bytes, xing, 'Info')) {
    const flags = u32be(bytes, xing + 4)
    return flags & 1 ? u32be(bytes, xing + 8) : null
  }
  const vbri = at + 4 + 32
  if (hasAscii(bytes, vbri, 'VBRI')) return u32be(bytes, vbri + 14)
  return null
}
