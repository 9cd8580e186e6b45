/**
 * MPEG-1 / MPEG-2 program stream (.mpeg, .mpg, .vob) demuxer: just enough to pull the MPEG audio
 * elementary stream out of the PES packets, which mpg123 then decodes like a raw .mp2/.mp3.
 */
import { UnsupportedAudioError } from '../unsupported-audio-error.ts'
import { u16be } from './bytes.ts'

const PACK_HEADER = 0xba
const PROGRAM_END = 0xb9
const PRIVATE_STREAM_1 = 0xbd // DVD AC-3 / DTS / LPCM
const FIRST_MPEG_AUDIO = 0xc0
const LAST_MPEG_AUDIO = 0xdf

export function startsWithPackHeader(bytes: Uint8Array): boolean {
  return bytes.length >= 4 && bytes[0] === 0 && bytes[1] === 0 && bytes[2] === 1 && bytes[3] === PACK_HEADER
}

export function isMpegAudioStreamId(streamId: number): boolean {
  return streamId >= FIRST_MPEG_AUDIO && streamId <= LAST_MPEG_AUDIO
}

export interface PesPacket {
  streamId: number
  payload: Uint8Array
}

/**
 * Yields every PES packet in file order. Throws 'truncated' when a packet runs past the end of
 * the file; skips junk between packets by searching for the next start code.
 */
export function* pesPackets(bytes: Uint8Array): Generator<PesPacket> {
  let at = 0
  while (at + 4 <= bytes.length) {
    if (!(bytes[at] === 0 && bytes[at + 1] === 0 && bytes[at + 2] === 1)) {
      at = nextStartCode(bytes, at + 1)
      continue
    }
    const code = bytes[at + 3]!
    if (code === PACK_HEADER) {
      const length = packHeaderLength(bytes, at)
      if (length === 0) at = nextStartCode(bytes, at + 4)
      else at += length
      continue
    }
    if (code === PROGRAM_END) {
      at += 4
      continue
    }
    if (code < PROGRAM_END) {
      at = nextStartCode(bytes, at + 4) // an elementary-stream start code out of place
      continue
    }
    if (at + 6 > bytes.length) throw new UnsupportedAudioError('truncated', 'MPEG program stream ends inside a packet header')
    const end = at + 6 + u16be(bytes, at + 4)
    if (end > bytes.length) throw new UnsupportedAudioError('truncated', 'MPEG program stream ends inside a packet')
    if (code >= PRIVATE_STREAM_1 && code !== 0xbe && code !== 0xbf) {
      const payloadStart = pesPayloadStart(bytes, at + 6, end)
      if (payloadStart >= 0 && payloadStart <= end) yield { streamId: code, payload: bytes.subarray(payloadStart, end) }
    }
    at = end
  }
}

export interface ProgramStreamContents {
  mpegAudioStreamIds: number[]
  hasPrivateStream1: boolean
}

/** Which streams the whole file carries; throws 'truncated' like `pesPackets`. */
export function readProgramStreamContents(bytes: Uint8Array): ProgramStreamContents {
  const contents: ProgramStreamContents = { mpegAudioStreamIds: [], hasPrivateStream1: false }
  for (const packet of pesPackets(bytes)) note(contents, packet)
  return contents
}

/** Which streams appear in the first `maxBytes`, for sniffing. Never throws. */
export function peekProgramStreamContents(bytes: Uint8Array, maxBytes = 1 << 20): ProgramStreamContents {
  const contents: ProgramStreamContents = { mpegAudioStreamIds: [], hasPrivateStream1: false }
  try {
    for (const packet of pesPackets(bytes.subarray(0, maxBytes))) note(contents, packet)
  } catch {
    // A packet cut by maxBytes (or by the end of a truncated file): what we saw so far is the answer.
  }
  return contents
}

function note(contents: ProgramStreamContents, packet: PesPacket): void {
  if (isMpegAudioStreamId(packet.streamId) && !contents.mpegAudioStreamIds.includes(packet.streamId)) {
    contents.mpegAudioStreamIds.push(packet.streamId)
  }
  if (packet.streamId === PRIVATE_STREAM_1) contents.hasPrivateStream1 = true
}

/** Yields the payload of the first MPEG audio stream, packet by packet. */
export function* mpegAudioPayloads(bytes: Uint8Array): Generator<Uint8Array> {
  let audioStreamId = -1
  for (const packet of pesPackets(bytes)) {
    if (audioStreamId < 0 && isMpegAudioStreamId(packet.streamId)) audioStreamId = packet.streamId
    if (packet.streamId === audioStreamId) yield packet.payload
  }
}

/** MPEG-2 packs are 14 bytes plus stuffing, MPEG-1 packs are 12; 0 when neither marker matches. */
function packHeaderLength(bytes: Uint8Array, at: number): number {
  const marker = bytes[at + 4] ?? 0
  if ((marker & 0xc0) === 0x40) return 14 + ((bytes[at + 13] ?? 0) & 7)
  if ((marker & 0xf0) === 0x20) return 12
  return 0
}

/** Skips the MPEG-2 PES header or the MPEG-1 stuffing/STD/timestamp fields; -1 if malformed. */
function pesPayloadStart(bytes: Uint8Array, at: number, end: number): number {
  if (at >= end) return -1
  if ((bytes[at]! & 0xc0) === 0x80) return at + 3 + (bytes[at + 2] ?? 0) // MPEG-2: '10' marker, then header length
  let p = at
  while (p < end && bytes[p] === 0xff && p - at < 16) p++ // MPEG-1 stuffing
  if (p < end && (bytes[p]! & 0xc0) === 0x40) p += 2 // STD buffer size
  const flags = bytes[p] ?? 0
  if ((flags & 0xf0) === 0x20) return p + 5 // PTS
  if ((flags & 0xf0) === 0x30) return p + 10 // PTS + DTS
  if (flags === 0x0f) return p + 1 // no timestamps
  return -1
}

function nextStartCode(bytes: Uint8Array, from: number): number {
  for (let at = from; at + 3 <= bytes.length; at++) {
    if (bytes[at] === 0 && bytes[at + 1] === 0 && bytes[at + 2] === 1) return at
  }
  return bytes.length
}
