/**
 * Tells the container and codec of an upload from its bytes alone. File names and content types
 * lie (browsers send `audio/webm` for Ogg, phones name MP4s `.m4a`), the bytes do not.
 */
import { readMatroskaInfo, startsWithEbmlHeader, type MatroskaAudioCodec } from './containers/ebml.ts'
import { flacStreamStart } from './containers/flac-stream-info.ts'
import { mp4AudioCodec, startsWithFtyp, type Mp4AudioCodec } from './containers/isobmff.ts'
import { findFirstMpegAudioFrame, id3v2Length, readMpegAudioFrameHeader } from './containers/mpeg-audio-frames.ts'
import { peekProgramStreamContents, startsWithPackHeader } from './containers/mpeg-program-stream.ts'
import { oggStreamCodecs, startsWithOggPage, type OggCodec } from './containers/ogg-pages.ts'
import { isRiffWave, readWavFormat } from './containers/wav.ts'

export type SniffedAudioFormat =
  | {
      container: 'wav'
      /** 'pcm-int' and 'pcm-float' we read; 'other' is e.g. ADPCM or µ-law. */
      codec: 'pcm-int' | 'pcm-float' | 'other'
      bitsPerSample: number
      channels: number
      sampleRate: number
      extensible: boolean
    }
  | { container: 'flac'; codec: 'flac' }
  | { container: 'mpeg-audio'; codec: 'mp1' | 'mp2' | 'mp3'; hasId3v2: boolean }
  | { container: 'mp4'; codec: Mp4AudioCodec }
  | { container: 'mpeg-ps'; codec: 'mpeg-audio' | 'other' | 'none' }
  | { container: 'ogg'; codec: OggCodec | 'none' }
  | { container: 'webm' | 'matroska'; codec: MatroskaAudioCodec }

export type AudioContainer = SniffedAudioFormat['container']

/** How far past the start (or an ID3v2 tag) an MPEG audio stream may begin. */
const MPEG_AUDIO_SEARCH_BYTES = 4096

export function sniffAudioFormat(bytes: Uint8Array): SniffedAudioFormat | null {
  if (bytes.length < 4) return null

  if (isRiffWave(bytes)) return sniffWav(bytes)
  if (flacStreamStart(bytes) >= 0) return { container: 'flac', codec: 'flac' }
  if (startsWithOggPage(bytes)) return { container: 'ogg', codec: oggStreamCodecs(bytes)[0] ?? 'none' }
  if (startsWithEbmlHeader(bytes)) {
    const info = readMatroskaInfo(bytes)
    if (!info) return null
    return { container: info.docType === 'webm' ? 'webm' : 'matroska', codec: info.codec }
  }
  if (startsWithFtyp(bytes)) return { container: 'mp4', codec: mp4AudioCodec(bytes) }
  if (startsWithPackHeader(bytes)) return sniffProgramStream(bytes)
  return sniffMpegAudio(bytes)
}

function sniffWav(bytes: Uint8Array): SniffedAudioFormat {
  const format = readWavFormat(bytes)
  const codec = format?.sampleFormat === 'int' ? 'pcm-int' : format?.sampleFormat === 'float' ? 'pcm-float' : 'other'
  return {
    container: 'wav',
    codec,
    bitsPerSample: format?.bitsPerSample ?? 0,
    channels: format?.channels ?? 0,
    sampleRate: format?.sampleRate ?? 0,
    extensible: format?.extensible ?? false,
  }
}

function sniffProgramStream(bytes: Uint8Array): SniffedAudioFormat {
  const contents = peekProgramStreamContents(bytes)
  const codec = contents.mpegAudioStreamIds.length > 0 ? 'mpeg-audio' : contents.hasPrivateStream1 ? 'other' : 'none'
  return { container: 'mpeg-ps', codec }
}

function sniffMpegAudio(bytes: Uint8Array): SniffedAudioFormat | null {
  const tagLength = id3v2Length(bytes)
  const first = findFirstMpegAudioFrame(bytes, tagLength, MPEG_AUDIO_SEARCH_BYTES)
  if (first < 0) return null
  const layer = readMpegAudioFrameHeader(bytes, first)!.layer
  return { container: 'mpeg-audio', codec: `mp${layer}`, hasId3v2: tagLength > 0 }
}
