/**
 * Any supported upload -> 16 kHz mono float32 samples for whisper.cpp.
 *
 * The JavaScript/WebAssembly path handles WAV, FLAC, MP3/MP2, MPEG program streams, MP4/M4A (AAC),
 * Ogg Vorbis/Opus and WebM/Matroska (Opus, Vorbis, ...). A system ffmpeg is tried only when that
 * path does not recognise the container or codec, never to rescue a truncated or corrupt file.
 *
 * `decodeAudio` runs on the calling thread; servers should call `decodeAudioInWorker`.
 */
import { closeSync, openSync, rmSync, writeSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { decodeInJavaScript } from './decode-in-javascript.ts'
import { decodeWithFfmpeg, findFfmpegOnPath } from './ffmpeg-fallback.ts'
import { Mono16kCollector, WHISPER_SAMPLE_RATE } from './mono-16k-collector.ts'
import type { DecodeAudioOptions, DecodedAudio, DecodedAudioFile } from './decoded-audio.ts'
import { sniffAudioFormat } from './sniff-audio-format.ts'
import { UnsupportedAudioError, type UnsupportedAudioReason } from './unsupported-audio-error.ts'

export { closeAudioDecodeWorkers, decodeAudioInWorker, decodeAudioToFileInWorker } from './decode-audio-in-worker.ts'
export { UnsupportedAudioError } from './unsupported-audio-error.ts'
export { AudioTooLongError } from './mono-16k-collector.ts'
export type { SniffedAudioFormat } from './sniff-audio-format.ts'
export type { DecodeAudioOptions, DecodedAudio, DecodedAudioFile } from './decoded-audio.ts'

/** Only these failures mean "we lack a decoder" rather than "the file is bad". */
const FFMPEG_MAY_HELP: ReadonlySet<UnsupportedAudioReason> = new Set(['unrecognized', 'unsupported_codec'])

/** Decodes bytes, or the file at a path, on the calling thread, into memory. */
export async function decodeAudio(input: Uint8Array | string, options: DecodeAudioOptions = {}): Promise<DecodedAudio> {
  const collector = new Mono16kCollector({ maxSeconds: options.maxSeconds })
  const { format, decodedBy } = await decodeInto(input, collector, options)
  const samples = collector.finish()
  return { samples, sampleRate: WHISPER_SAMPLE_RATE, durationSeconds: samples.length / WHISPER_SAMPLE_RATE, format, decodedBy }
}

/**
 * Decodes into a file of raw float32 samples, a few seconds at a time: memory stays flat however
 * long the audio. The file is removed again when decoding fails.
 */
export async function decodeAudioToFile(input: Uint8Array | string, path: string, options: DecodeAudioOptions = {}): Promise<DecodedAudioFile> {
  const fd = openSync(path, 'w')
  let closed = false
  try {
    const sink = (block: Float32Array) => {
      writeSync(fd, new Uint8Array(block.buffer, block.byteOffset, block.byteLength))
    }
    const collector = new Mono16kCollector({ sink, maxSeconds: options.maxSeconds })
    const { format, decodedBy } = await decodeInto(input, collector, options)
    collector.finish()
    closeSync(fd)
    closed = true
    return { path, sampleRate: WHISPER_SAMPLE_RATE, durationSeconds: collector.sampleCount / WHISPER_SAMPLE_RATE, format, decodedBy }
  } catch (error) {
    if (!closed) closeSync(fd)
    rmSync(path, { force: true })
    throw error
  }
}

async function decodeInto(
  input: Uint8Array | string,
  collector: Mono16kCollector,
  options: DecodeAudioOptions,
): Promise<Pick<DecodedAudio, 'format' | 'decodedBy'>> {
  const { signal } = options
  signal?.throwIfAborted()
  const bytes = typeof input === 'string' ? new Uint8Array(await readFile(input, { signal })) : input
  if (bytes.length === 0) throw new UnsupportedAudioError('empty', 'the file is empty')

  const format = sniffAudioFormat(bytes)
  try {
    if (!format) throw new UnsupportedAudioError('unrecognized', 'the bytes are not a known audio or video format')
    await decodeInJavaScript(bytes, format, collector, signal)
    return { format, decodedBy: 'javascript' }
  } catch (error) {
    if (!(error instanceof UnsupportedAudioError) || !FFMPEG_MAY_HELP.has(error.reason)) throw error
    const ffmpegPath = options.ffmpegPath === undefined ? findFfmpegOnPath() : options.ffmpegPath
    if (!ffmpegPath) throw error
    // The JavaScript path failed before taking any audio, so the collector is still empty.
    await decodeWithFfmpeg(ffmpegPath, typeof input === 'string' ? input : bytes, collector, { signal })
    return { format, decodedBy: 'ffmpeg' }
  }
}
