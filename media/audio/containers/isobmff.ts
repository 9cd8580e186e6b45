/** ISO base media file format (MP4, M4A, MOV): box walking, the audio codec, and completeness. */
import { UnsupportedAudioError } from '../unsupported-audio-error.ts'
import { ascii, hasAscii, u32be, u64be } from './bytes.ts'

/** 'none' = the movie has no audio track; 'unknown' = the moov box is not (yet) in the bytes. */
export type Mp4AudioCodec = 'aac' | 'mp3' | 'alac' | 'opus' | 'flac' | 'ac3' | 'pcm' | 'other' | 'none' | 'unknown'

export function startsWithFtyp(bytes: Uint8Array): boolean {
  return hasAscii(bytes, 4, 'ftyp') && u32be(bytes, 0) >= 8
}

interface Box {
  type: string
  bodyStart: number
  end: number
}

/** Boxes directly inside [start, end); the last one may claim to run past `end`. */
function* boxes(bytes: Uint8Array, start: number, end: number): Generator<Box> {
  let at = start
  while (at + 8 <= end) {
    let size = u32be(bytes, at)
    let header = 8
    if (size === 1) {
      size = u64be(bytes, at + 8)
      header = 16
    } else if (size === 0) size = end - at // runs to the end of the enclosing box / file
    if (size < header) return
    yield { type: ascii(bytes, at + 4, 4), bodyStart: at + header, end: at + size }
    at += size
  }
}

function child(bytes: Uint8Array, parent: Box, type: string): Box | undefined {
  for (const box of boxes(bytes, parent.bodyStart, Math.min(parent.end, bytes.length))) if (box.type === type) return box
  return undefined
}

/** Throws 'truncated' when a top-level box claims more bytes than the file has. */
export function assertTopLevelBoxesComplete(bytes: Uint8Array): void {
  for (const box of boxes(bytes, 0, bytes.length)) {
    if (box.end > bytes.length) throw new UnsupportedAudioError('truncated', `MP4 '${box.type}' box runs past the end of the file`)
  }
}

/** The codec of the first sound track, read from moov/trak/mdia/minf/stbl/stsd. Never throws. */
export function mp4AudioCodec(bytes: Uint8Array): Mp4AudioCodec {
  const moov = [...boxes(bytes, 0, bytes.length)].find((box) => box.type === 'moov')
  if (!moov || moov.end > bytes.length) return 'unknown'
  for (const trak of boxes(bytes, moov.bodyStart, moov.end)) {
    if (trak.type !== 'trak') continue
    const mdia = child(bytes, trak, 'mdia')
    const hdlr = mdia && child(bytes, mdia, 'hdlr')
    if (!mdia || !hdlr || !hasAscii(bytes, hdlr.bodyStart + 8, 'soun')) continue
    const minf = child(bytes, mdia, 'minf')
    const stbl = minf && child(bytes, minf, 'stbl')
    const stsd = stbl && child(bytes, stbl, 'stsd')
    if (!stsd) return 'other'
    const entryStart = stsd.bodyStart + 8 // version/flags + entry count
    return sampleEntryCodec(bytes, ascii(bytes, entryStart + 4, 4), entryStart, Math.min(stsd.end, bytes.length))
  }
  return 'none'
}

function sampleEntryCodec(bytes: Uint8Array, type: string, start: number, end: number): Mp4AudioCodec {
  switch (type) {
    case 'mp4a':
      return esdsCodec(bytes, start, end)
    case '.mp3':
      return 'mp3'
    case 'alac':
      return 'alac'
    case 'Opus':
      return 'opus'
    case 'fLaC':
      return 'flac'
    case 'ac-3':
    case 'ec-3':
      return 'ac3'
    case 'sowt':
    case 'twos':
    case 'lpcm':
    case 'ipcm':
    case 'fpcm':
    case 'in24':
    case 'in32':
    case 'fl32':
    case 'fl64':
    case 'raw ':
      return 'pcm'
    default:
      return 'other'
  }
}

/** mp4a entries name their codec by the esds DecoderConfigDescriptor's objectTypeIndication. */
function esdsCodec(bytes: Uint8Array, start: number, end: number): Mp4AudioCodec {
  let esds = -1
  for (let at = start; at + 4 <= end; at++) {
    if (bytes[at] === 0x65 && hasAscii(bytes, at, 'esds')) {
      esds = at + 8 // type + version/flags
      break
    }
  }
  if (esds < 0) return 'aac' // QuickTime without esds: AAC is what mp4a means in practice
  let at = esds
  const readDescriptor = (): { tag: number; body: number } => {
    const tag = bytes[at++] ?? 0
    for (let i = 0; i < 4 && (bytes[at++] ?? 0) & 0x80; i++); // variable-length size, unused
    return { tag, body: at }
  }
  const es = readDescriptor()
  if (es.tag !== 0x03) return 'other'
  const flags = bytes[es.body + 2] ?? 0
  at = es.body + 3
  if (flags & 0x80) at += 2 // dependsOn_ES_ID
  if (flags & 0x40) at += 1 + (bytes[at] ?? 0) // URL
  if (flags & 0x20) at += 2 // OCR_ES_ID
  const config = readDescriptor()
  if (config.tag !== 0x04) return 'other'
  const objectType = bytes[config.body] ?? 0
  if (objectType === 0x40 || (objectType >= 0x66 && objectType <= 0x68)) return 'aac'
  if (objectType === 0x69 || objectType === 0x6b) return 'mp3'
  return 'other'
}
