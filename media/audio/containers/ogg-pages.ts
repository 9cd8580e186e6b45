/** Ogg page walking: which codec the logical streams carry, and whether the last page is whole. */
import { UnsupportedAudioError } from '../unsupported-audio-error.ts'
import { hasAscii } from './bytes.ts'

export type OggCodec = 'vorbis' | 'opus' | 'flac' | 'speex' | 'other'

const BEGINNING_OF_STREAM = 0x02

export function startsWithOggPage(bytes: Uint8Array): boolean {
  return hasAscii(bytes, 0, 'OggS') && bytes[4] === 0
}

interface OggPage {
  headerType: number
  bodyStart: number
  end: number
}

/** The page at `at`, or 'cut' when it runs past the end, or null when there is no page there. */
function readPage(bytes: Uint8Array, at: number): OggPage | 'cut' | null {
  if (at + 27 > bytes.length) return hasAscii(bytes, at, 'OggS'.slice(0, bytes.length - at)) ? 'cut' : null
  if (!hasAscii(bytes, at, 'OggS') || bytes[at + 4] !== 0) return null
  const segments = bytes[at + 26]!
  const bodyStart = at + 27 + segments
  if (bodyStart > bytes.length) return 'cut'
  let bodyLength = 0
  for (let i = 0; i < segments; i++) bodyLength += bytes[at + 27 + i]!
  const end = bodyStart + bodyLength
  if (end > bytes.length) return 'cut'
  return { headerType: bytes[at + 5]!, bodyStart, end }
}

/**
 * The codecs of the logical streams that begin on the first pages (an Ogg file opens with one
 * beginning-of-stream page per stream, e.g. Theora video plus Vorbis audio).
 */
export function oggStreamCodecs(bytes: Uint8Array): OggCodec[] {
  const codecs: OggCodec[] = []
  let at = 0
  for (;;) {
    const page = readPage(bytes, at)
    if (!page || page === 'cut' || !(page.headerType & BEGINNING_OF_STREAM)) return codecs
    const codec = codecOf(bytes, page.bodyStart)
    if (codec) codecs.push(codec)
    at = page.end
  }
}

function codecOf(bytes: Uint8Array, at: number): OggCodec | null {
  if (bytes[at] === 0x01 && hasAscii(bytes, at + 1, 'vorbis')) return 'vorbis'
  if (hasAscii(bytes, at, 'OpusHead')) return 'opus'
  if (bytes[at] === 0x7f && hasAscii(bytes, at + 1, 'FLAC')) return 'flac'
  if (hasAscii(bytes, at, 'Speex   ')) return 'speex'
  if (bytes[at] === 0x80 && hasAscii(bytes, at + 1, 'theora')) return null // video
  return 'other'
}

/** Throws 'truncated' when the last page is cut short; skips junk between pages. */
export function assertOggPagesComplete(bytes: Uint8Array): void {
  let at = 0
  while (at < bytes.length) {
    const page = readPage(bytes, at)
    if (page === 'cut') throw new UnsupportedAudioError('truncated', 'Ogg file ends inside a page')
    if (page) {
      at = page.end
      continue
    }
    const next = indexOfCapturePattern(bytes, at + 1)
    if (next < 0) return // trailing junk
    at = next
  }
}

/**
 * The file page by page (junk between pages as it lies): what an Ogg decoder is fed, so one call
 * never decodes more than a page, at most 255 packets (30 s of Opus).
 */
export function* oggPageSlices(bytes: Uint8Array): Generator<Uint8Array> {
  let at = 0
  while (at < bytes.length) {
    const page = readPage(bytes, at)
    const end = page && page !== 'cut' ? page.end : indexOfCapturePattern(bytes, at + 1)
    const next = end < 0 ? bytes.length : end
    yield bytes.subarray(at, next)
    at = next
  }
}

function indexOfCapturePattern(bytes: Uint8Array, from: number): number {
  for (let at = from; at + 4 <= bytes.length; at++) if (bytes[at] === 0x4f && hasAscii(bytes, at, 'OggS')) return at
  return -1
}
