/**
 * The pure JavaScript/WebAssembly decode path: our own WAV reader and MPEG program stream demuxer,
 * and the @audio/decode-* packages (mpg123, libFLAC, libvorbis, libopus, FAAD2 builds) for the rest.
 * Each container is checked for truncation first, because the decoders quietly stop at a cut.
 */
import { assertMatroskaIntact } from './containers/ebml.ts'
import { readFlacStreamInfo } from './containers/flac-stream-info.ts'
import { assertTopLevelBoxesComplete } from './containers/isobmff.ts'
import { findFirstMpegAudioFrame, id3v2Length, summarizeMpegAudioStream } from './containers/mpeg-audio-frames.ts'
import { mpegAudioPayloads, readProgramStreamContents } from './containers/mpeg-program-stream.ts'
import { assertOggPagesComplete, oggPageSlices } from './containers/ogg-pages.ts'
import { readWavLayout, readWavSamples } from './containers/wav.ts'
import { AudioTooLongError, type Mono16kCollector } from './mono-16k-collector.ts'
import type { SniffedAudioFormat } from './sniff-audio-format.ts'
import { UnsupportedAudioError } from './unsupported-audio-error.ts'

/**
 * Encoded bytes handed to a decoder per call, which returns everything they decode to at once. A
 * few bytes can stand for seconds of silence (two-byte Opus packets, FLAC constant frames), so the
 * feed is small (8 KB of constant FLAC frames is about a minute), and Ogg goes a page at a time.
 */
const FEED_BYTES = 8 * 1024

/** What the @audio/decode-* packages return per call. */
interface DecodedBlock {
  channelData: Float32Array[]
  sampleRate: number
  samplesDecoded?: number
}

interface StreamingDecoder {
  decode(chunk: Uint8Array): DecodedBlock | Promise<DecodedBlock>
  flush?(): DecodedBlock | Promise<DecodedBlock>
  free(): void
}

type DecoderModule = { decoder(): Promise<StreamingDecoder> }

/** Loaded on first use: each package carries its own WebAssembly build. */
const DECODERS = {
  mp3: () => import('@audio/decode-mp3'),
  flac: () => import('@audio/decode-flac'),
  vorbis: () => import('@audio/decode-vorbis'),
  opus: () => import('@audio/decode-opus'),
  mp4: () => import('@audio/decode-mp4'),
  webm: () => import('@audio/decode-webm'),
} satisfies Record<string, () => Promise<DecoderModule>>

type DecoderName = keyof typeof DECODERS

/** Decodes `bytes` (already sniffed as `format`) into `collector`. */
export async function decodeInJavaScript(bytes: Uint8Array, format: SniffedAudioFormat, collector: Mono16kCollector, signal?: AbortSignal): Promise<void> {
  switch (format.container) {
    case 'wav':
      return decodeWav(bytes, collector, signal)
    case 'flac':
      return decodeFlac(bytes, collector, signal)
    case 'mpeg-audio':
      return decodeMpegAudio(bytes, collector, signal)
    case 'mpeg-ps':
      return decodeProgramStream(bytes, collector, signal)
    case 'ogg':
      return decodeOgg(bytes, format.codec, collector, signal)
    case 'mp4':
      assertTopLevelBoxesComplete(bytes)
      if (format.codec === 'none') throw new UnsupportedAudioError('no_audio', 'the MP4 file has no audio track')
      if (format.codec === 'other') throw new UnsupportedAudioError('unsupported_codec', 'the MP4 audio codec is not supported')
      return expectAudio(await runDecoder('mp4', slices(bytes), collector, signal), 'MP4')
    case 'webm':
    case 'matroska':
      assertMatroskaIntact(bytes)
      if (format.codec === 'none') throw new UnsupportedAudioError('no_audio', 'the WebM/Matroska file has no audio track')
      if (format.codec === 'other') throw new UnsupportedAudioError('unsupported_codec', 'the WebM/Matroska audio codec is not supported')
      return expectAudio(await runDecoder('webm', slices(bytes), collector, signal), 'WebM/Matroska')
  }
}

function decodeWav(bytes: Uint8Array, collector: Mono16kCollector, signal?: AbortSignal): void {
  const layout = readWavLayout(bytes)
  if (layout.frameCount === 0) throw new UnsupportedAudioError('no_audio', 'the WAV data chunk is empty')
  collector.reserveSeconds(layout.frameCount / layout.sampleRate)
  for (const channels of readWavSamples(bytes, layout)) {
    signal?.throwIfAborted()
    collector.push(channels, layout.sampleRate)
  }
}

async function decodeFlac(bytes: Uint8Array, collector: Mono16kCollector, signal?: AbortSignal): Promise<void> {
  const info = readFlacStreamInfo(bytes)
  const frames = await runDecoder('flac', slices(bytes.subarray(info.streamStart)), collector, signal)
  // libFLAC stops quietly at a cut or damaged frame; lossless means the count must match exactly.
  if (info.totalSamples > 0 && frames < info.totalSamples) {
    throw new UnsupportedAudioError('truncated', `FLAC stream stops after ${frames} of its ${info.totalSamples} samples (cut short or damaged)`)
  }
  expectAudio(frames, 'FLAC')
}

async function decodeMpegAudio(bytes: Uint8Array, collector: Mono16kCollector, signal?: AbortSignal): Promise<void> {
  const first = findFirstMpegAudioFrame(bytes, id3v2Length(bytes), bytes.length)
  if (first < 0) throw new UnsupportedAudioError('corrupt', 'no MPEG audio frames found')
  const { frames, firstFrame } = summarizeMpegAudioStream(bytes, first) // throws when the stream is cut short
  collector.reserveSeconds((frames * firstFrame.samplesPerFrame) / firstFrame.sampleRate)
  expectAudio(await runDecoder('mp3', slices(bytes.subarray(first)), collector, signal), 'MPEG audio')
}

async function decodeProgramStream(bytes: Uint8Array, collector: Mono16kCollector, signal?: AbortSignal): Promise<void> {
  const contents = readProgramStreamContents(bytes) // also throws when a packet is cut short
  if (contents.mpegAudioStreamIds.length === 0) {
    if (contents.hasPrivateStream1) {
      throw new UnsupportedAudioError('unsupported_codec', 'the MPEG program stream carries AC-3/DTS/LPCM audio, not MPEG audio')
    }
    throw new UnsupportedAudioError('no_audio', 'the MPEG program stream has no audio stream')
  }
  expectAudio(await runDecoder('mp3', mpegAudioPayloads(bytes), collector, signal), 'MPEG program stream')
}

async function decodeOgg(
  bytes: Uint8Array,
  codec: Extract<SniffedAudioFormat, { container: 'ogg' }>['codec'],
  collector: Mono16kCollector,
  signal?: AbortSignal,
): Promise<void> {
  assertOggPagesComplete(bytes)
  if (codec === 'none') throw new UnsupportedAudioError('no_audio', 'the Ogg file has no audio stream')
  if (codec !== 'vorbis' && codec !== 'opus') throw new UnsupportedAudioError('unsupported_codec', `Ogg ${codec} is not supported`)
  expectAudio(await runDecoder(codec, oggPageSlices(bytes), collector, signal), `Ogg ${codec}`)
}

/**
 * Feeds chunks to one of the packaged decoders and pushes whatever it returns straight into
 * the collector. Returns the number of sample frames decoded (at the source rate).
 */
async function runDecoder(name: DecoderName, chunks: Iterable<Uint8Array>, collector: Mono16kCollector, signal?: AbortSignal): Promise<number> {
  const module: DecoderModule = await DECODERS[name]()
  const decoder = await module.decoder()
  let frames = 0
  const take = (block: DecodedBlock): void => {
    const length = Math.min(block.samplesDecoded ?? Infinity, block.channelData[0]?.length ?? 0)
    if (length === 0) return
    collector.push(
      block.channelData.map((channel) => channel.subarray(0, length)),
      block.sampleRate,
    )
    frames += length
  }
  try {
    for (const chunk of chunks) {
      signal?.throwIfAborted()
      take(await decoder.decode(chunk))
    }
    if (decoder.flush) take(await decoder.flush())
    return frames
  } catch (error) {
    if (error instanceof UnsupportedAudioError || error instanceof AudioTooLongError || signal?.aborted) throw error
    throw new UnsupportedAudioError('corrupt', `the ${name} decoder failed: ${messageOf(error)}`, { cause: error })
  } finally {
    decoder.free()
  }
}

function expectAudio(frames: number, what: string): void {
  if (frames === 0) throw new UnsupportedAudioError('corrupt', `no audio could be decoded from the ${what} data`)
}

function* slices(bytes: Uint8Array, size = FEED_BYTES): Generator<Uint8Array> {
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size)
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
