/** Native FLAC: the "fLaC" marker (possibly behind an ID3v2 tag) and the STREAMINFO block. */
import { UnsupportedAudioError } from '../unsupported-audio-error.ts'
import { hasAscii, u32be } from './bytes.ts'
import { id3v2Length } from './mpeg-audio-frames.ts'

export interface FlacStreamInfo {
  /** Where "fLaC" starts (after any ID3v2 tag). */
  streamStart: number
  sampleRate: number
  channels: number
  bitsPerSample: number
  /** 0 when the encoder did not know it (streamed FLAC). */
  totalSamples: number
}

/** Offset of the "fLaC" marker, or -1. */
export function flacStreamStart(bytes: Uint8Array): number {
  const start = id3v2Length(bytes)
  return hasAscii(bytes, start, 'fLaC') ? start : -1
}

/** Reads STREAMINFO and checks the metadata blocks are all present. */
export function readFlacStreamInfo(bytes: Uint8Array): FlacStreamInfo {
  const streamStart = flacStreamStart(bytes)
  if (streamStart < 0) throw new UnsupportedAudioError('corrupt', 'no fLaC marker')
  const info = streamStart + 8 // marker + first block header
  if (info + 34 > bytes.length) throw new UnsupportedAudioError('truncated', 'FLAC file ends inside STREAMINFO')
  if ((bytes[streamStart + 4]! & 0x7f) !== 0) throw new UnsupportedAudioError('corrupt', 'FLAC does not start with STREAMINFO')

  let at = streamStart + 4
  for (;;) {
    if (at + 4 > bytes.length) throw new UnsupportedAudioError('truncated', 'FLAC file ends inside its metadata')
    const isLast = (bytes[at]! & 0x80) !== 0
    at += 4 + ((bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!)
    if (at > bytes.length) throw new UnsupportedAudioError('truncated', 'FLAC file ends inside its metadata')
    if (isLast) break
  }

  const packed = bytes[info + 12]!
  return {
    streamStart,
    sampleRate: (bytes[info + 10]! << 12) | (bytes[info + 11]! << 4) | (packed >> 4),
    channels: ((packed >> 1) & 7) + 1,
    bitsPerSample: (((packed & 1) << 4) | (bytes[info + 13]! >> 4)) + 1,
    totalSamples: (bytes[info + 13]! & 0x0f) * 0x1_0000_0000 + u32be(bytes, info + 14),
  }
}
