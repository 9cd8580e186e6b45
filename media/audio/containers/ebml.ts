/**
 * EBML (WebM / Matroska) reading: the DocType, the audio track's codec, and whether the file is
 * whole with intact clusters. Handles unknown-size Segments and Clusters, which browser
 * MediaRecorder writes.
 */
import { UnsupportedAudioError } from '../unsupported-audio-error.ts'
import { ascii } from './bytes.ts'

const EBML_HEADER = 0x1a45dfa3
const DOC_TYPE = 0x4282
const SEGMENT = 0x18538067
const TRACKS = 0x1654ae6b
const TRACK_ENTRY = 0xae
const TRACK_TYPE = 0x83
const CODEC_ID = 0x86
const CLUSTER = 0x1f43b675
const AUDIO_TRACK = 2
/** Timecode, SilentTracks, Position, PrevSize, SimpleBlock, BlockGroup, EncryptedBlock, Void, CRC-32. */
const CLUSTER_CHILDREN = new Set([0xe7, 0x5854, 0xa7, 0xab, 0xa3, 0xa0, 0xaf, 0xec, 0xbf])
/** Elements that sit directly in a Segment: seeing one ends an unknown-size Cluster. */
const SEGMENT_CHILDREN = new Set([0x114d9b74, 0x1549a966, TRACKS, CLUSTER, 0x1c53bb6b, 0x1941a469, 0x1043a770, 0x1254c367])

export type MatroskaAudioCodec = 'opus' | 'vorbis' | 'aac' | 'mp3' | 'flac' | 'pcm' | 'other' | 'none' | 'unknown'

export interface MatroskaInfo {
  docType: string
  codec: MatroskaAudioCodec
}

interface Element {
  id: number
  dataStart: number
  /** null for "unknown size" (all ones): the element runs until its parent's next sibling. */
  size: number | null
  end: number
}

export function startsWithEbmlHeader(bytes: Uint8Array): boolean {
  return bytes[0] === 0x1a && bytes[1] === 0x45 && bytes[2] === 0xdf && bytes[3] === 0xa3
}

/** Reads an element header at `at`, or null when the header itself is malformed or cut. */
function readElement(bytes: Uint8Array, at: number): Element | null {
  const idWidth = vintWidth(bytes[at])
  if (idWidth === 0 || idWidth > 4 || at + idWidth > bytes.length) return null
  let id = 0
  for (let i = 0; i < idWidth; i++) id = id * 256 + bytes[at + i]!
  const sizeAt = at + idWidth
  const sizeWidth = vintWidth(bytes[sizeAt])
  if (sizeWidth === 0 || sizeAt + sizeWidth > bytes.length) return null
  let size = bytes[sizeAt]! & (0xff >> sizeWidth)
  let allOnes = size === 0xff >> sizeWidth
  for (let i = 1; i < sizeWidth; i++) {
    const byte = bytes[sizeAt + i]!
    size = size * 256 + byte
    allOnes &&= byte === 0xff
  }
  const dataStart = sizeAt + sizeWidth
  if (allOnes) return { id, dataStart, size: null, end: bytes.length }
  return { id, dataStart, size, end: dataStart + size }
}

/** EBML variable-length integers announce their width by the position of the first set bit. */
function vintWidth(firstByte: number | undefined): number {
  if (!firstByte) return 0
  return Math.clz32(firstByte) - 23
}

function* children(bytes: Uint8Array, start: number, end: number): Generator<Element> {
  let at = start
  while (at < end) {
    const element = readElement(bytes, at)
    if (!element) return
    yield element
    if (element.size === null) return // cannot step over it
    at = element.end
  }
}

/** DocType and first audio track codec. Never throws; fields it cannot see come back as 'unknown'. */
export function readMatroskaInfo(bytes: Uint8Array): MatroskaInfo | null {
  const header = readElement(bytes, 0)
  if (!header || header.id !== EBML_HEADER || header.size === null) return null
  let docType = 'matroska' // the spec's default DocType
  for (const element of children(bytes, header.dataStart, Math.min(header.end, bytes.length))) {
    if (element.id === DOC_TYPE) docType = ascii(bytes, element.dataStart, element.size ?? 0).replace(/\0+$/, '')
  }
  const segment = readElement(bytes, header.end)
  if (!segment || segment.id !== SEGMENT) return { docType, codec: 'unknown' }
  for (const element of children(bytes, segment.dataStart, Math.min(segment.end, bytes.length))) {
    if (element.id === CLUSTER) break // tracks always come before the first cluster
    if (element.id === TRACKS) return { docType, codec: audioCodecIn(bytes, element) }
  }
  return { docType, codec: 'unknown' }
}

function audioCodecIn(bytes: Uint8Array, tracks: Element): MatroskaAudioCodec {
  for (const entry of children(bytes, tracks.dataStart, Math.min(tracks.end, bytes.length))) {
    if (entry.id !== TRACK_ENTRY) continue
    let type = 0
    let codecId = ''
    for (const field of children(bytes, entry.dataStart, Math.min(entry.end, bytes.length))) {
      if (field.id === TRACK_TYPE) type = bytes[field.dataStart] ?? 0
      if (field.id === CODEC_ID) codecId = ascii(bytes, field.dataStart, field.size ?? 0).replace(/\0+$/, '')
    }
    if (type === AUDIO_TRACK || codecId.startsWith('A_')) return codecFromId(codecId)
  }
  return 'none'
}

function codecFromId(codecId: string): MatroskaAudioCodec {
  if (codecId === 'A_OPUS') return 'opus'
  if (codecId === 'A_VORBIS') return 'vorbis'
  if (codecId.startsWith('A_AAC')) return 'aac'
  if (codecId === 'A_MPEG/L3' || codecId === 'A_MPEG/L2') return 'mp3'
  if (codecId === 'A_FLAC') return 'flac'
  if (codecId.startsWith('A_PCM')) return 'pcm'
  return 'other'
}

/**
 * Throws 'truncated' when the EBML header, the Segment, or any element in it claims more bytes
 * than the file has, and 'corrupt' when a Cluster's blocks do not tile it. The block walk matters:
 * the decoder quietly stops at a damaged block header and would hand back half the audio.
 */
export function assertMatroskaIntact(bytes: Uint8Array): void {
  const header = readElement(bytes, 0)
  if (!header || header.size === null || header.end > bytes.length) throw truncated('the EBML header')
  const segment = readElement(bytes, header.end)
  if (!segment) throw truncated('the Segment header')
  if (segment.end > bytes.length) throw truncated('the Segment')
  let at = segment.dataStart
  while (at < segment.end) {
    const element = readElement(bytes, at)
    if (!element) throw truncated('an element header')
    if (element.id === CLUSTER) {
      at = assertClusterIntact(bytes, element)
      continue
    }
    if (element.size === null) return // an unknown-size element we do not look inside
    if (element.end > bytes.length) throw truncated('an element')
    at = element.end
  }
}

/** Walks a Cluster's children; returns where the next Segment child starts. */
function assertClusterIntact(bytes: Uint8Array, cluster: Element): number {
  if (cluster.end > bytes.length) throw truncated('a Cluster')
  let at = cluster.dataStart
  while (at < cluster.end) {
    const element = readElement(bytes, at)
    if (!element) throw at + 12 > bytes.length ? truncated('a block header') : damaged()
    // Unknown-size clusters (MediaRecorder) end where the next Segment-level element begins.
    if (cluster.size === null && SEGMENT_CHILDREN.has(element.id)) return at
    if (!CLUSTER_CHILDREN.has(element.id) || element.size === null) throw damaged()
    if (element.end > bytes.length) throw truncated('a block')
    if (element.end > cluster.end) throw damaged()
    at = element.end
  }
  return at
}

function truncated(what: string): UnsupportedAudioError {
  return new UnsupportedAudioError('truncated', `WebM/Matroska file ends inside ${what}`)
}

function damaged(): UnsupportedAudioError {
  return new UnsupportedAudioError('corrupt', 'WebM/Matroska cluster holds a damaged block')
}
