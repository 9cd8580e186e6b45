/**
 * Audio input for /v1/audio/translations: sniffing, decoding every fixture format to 16 kHz mono
 * on the pure JavaScript path (ffmpeg is taken off PATH for the whole file), refusing bad input,
 * the optional ffmpeg fallback, and the worker thread with cancellation.
 */
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chmod, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { closeAudioDecodeWorkers } from '../../media/audio/decode-audio-in-worker.ts'
import {
  AudioTooLongError,
  decodeAudio,
  decodeAudioInWorker,
  decodeAudioToFileInWorker,
  UnsupportedAudioError,
  type DecodedAudio,
} from '../../media/audio/decode-audio.ts'
import { findFfmpegOnPath } from '../../media/audio/ffmpeg-fallback.ts'
import { SincResampler } from '../../media/audio/sinc-resampler.ts'
import { sniffAudioFormat, type SniffedAudioFormat } from '../../media/audio/sniff-audio-format.ts'
import { bestCorrelation, energyEnvelope, peak, rms } from '../audio/signal-measures.ts'
import { aiffFile, concat, mpeg2ProgramStream, oggOpusSilence, pngFile, wavFile } from '../audio/synthesize-audio-files.ts'
import { cannotRun, itIf } from '../support/skips.ts'

const FIXTURES = fileURLToPath(new URL('../fixtures/audio/', import.meta.url))
const fixture = (name: string): string => join(FIXTURES, name)
const readFixture = async (name: string): Promise<Uint8Array> => new Uint8Array(await readFile(fixture(name)))

/** espeak-ng's "Please translate this short sentence." is 2.37 s long. */
const SPEECH_SECONDS = 2.37
/** Quieter than this is silence; the speech fixtures sit around 0.07. */
const SILENCE_RMS = 0.01

const wav = (codec: 'pcm-int' | 'pcm-float', bitsPerSample: number, sampleRate: number, channels = 1, extensible = false) =>
  ({ container: 'wav', codec, bitsPerSample, channels, sampleRate, extensible }) as const

const EXPECTED_FORMATS: Record<string, SniffedAudioFormat> = {
  'speech.flac': { container: 'flac', codec: 'flac' },
  'speech.mp3': { container: 'mpeg-audio', codec: 'mp3', hasId3v2: true },
  'speech.mpga': { container: 'mpeg-audio', codec: 'mp3', hasId3v2: false },
  'speech.mp4': { container: 'mp4', codec: 'aac' },
  'speech.m4a': { container: 'mp4', codec: 'aac' },
  'speech-fragmented.m4a': { container: 'mp4', codec: 'aac' },
  'speech.mpeg': { container: 'mpeg-ps', codec: 'mpeg-audio' },
  'speech.ogg': { container: 'ogg', codec: 'vorbis' },
  'speech.opus.ogg': { container: 'ogg', codec: 'opus' },
  'speech.webm': { container: 'webm', codec: 'opus' },
  'speech-mediarecorder.webm': { container: 'webm', codec: 'opus' },
  'speech-u8.wav': wav('pcm-int', 8, 16_000),
  'speech-s16.wav': wav('pcm-int', 16, 16_000),
  'speech-s24.wav': wav('pcm-int', 24, 16_000),
  'speech-s32.wav': wav('pcm-int', 32, 16_000),
  'speech-f32.wav': wav('pcm-float', 32, 16_000),
  'speech-extensible.wav': wav('pcm-int', 24, 8_000, 1, true),
  'speech-8k.wav': wav('pcm-int', 16, 8_000),
  'speech-44k-stereo.wav': wav('pcm-int', 16, 44_100, 2),
}
const FIXTURE_NAMES = Object.keys(EXPECTED_FORMATS)
/** Lossless at a rate of 16 kHz or more: after resampling these must match the reference sample for sample. */
const LOSSLESS_WIDEBAND = ['speech.flac', 'speech-u8.wav', 'speech-s24.wav', 'speech-s32.wav', 'speech-f32.wav', 'speech-44k-stereo.wav']

const originalPath = process.env.PATH
const realFfmpeg = findFfmpegOnPath(originalPath)
if (!realFfmpeg) cannotRun('decoding with the system ffmpeg: no ffmpeg on PATH (Debian: apt-get install -y ffmpeg; .ci/run installs it)')
let scratch = ''
const decodes = new Map<string, DecodedAudio>()

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'hearth-audio-test-'))
  // No ffmpeg for anything in this file unless a test passes one explicitly: the JavaScript path must carry every format.
  process.env.PATH = join(scratch, 'empty-path')
})

afterAll(async () => {
  await closeAudioDecodeWorkers()
  process.env.PATH = originalPath
  await rm(scratch, { recursive: true, force: true })
})

async function decodeFixture(name: string): Promise<DecodedAudio> {
  let audio = decodes.get(name)
  if (!audio) {
    audio = await decodeAudio(fixture(name))
    decodes.set(name, audio)
  }
  return audio
}

async function expectUnsupported(promise: Promise<unknown>, reason?: UnsupportedAudioError['reason']): Promise<UnsupportedAudioError> {
  const error = await promise.then(
    () => {
      throw new Error('expected an UnsupportedAudioError, but decoding succeeded')
    },
    (caught: unknown) => caught,
  )
  expect(error).toBeInstanceOf(UnsupportedAudioError)
  const unsupported = error as UnsupportedAudioError
  expect(unsupported.code).toBe('unsupported_audio_format')
  expect(unsupported.message).toMatch(/^Unsupported or invalid audio file: /)
  if (reason) expect(unsupported.reason).toBe(reason)
  return unsupported
}

/** A stand-in ffmpeg: a shell script (PATH is empty here, so it uses node, not coreutils). */
async function fakeFfmpeg(name: string, script: string): Promise<string> {
  const path = join(scratch, name)
  await writeFile(path, `#!/bin/sh\n${script}\n`)
  await chmod(path, 0o755)
  return path
}

/** Shell for "write one second of 16 kHz float32 silence to stdout". */
const ONE_SECOND_OF_SILENCE = `'${process.execPath}' -e 'process.stdout.write(Buffer.alloc(64000))'`

describe('fixtures', () => {
  it('has exactly the expected files, all small', async () => {
    const files = (await readdir(FIXTURES)).filter((name) => name.startsWith('speech'))
    expect(files.sort()).toEqual([...FIXTURE_NAMES].sort())
    let total = 0
    for (const name of files) total += (await readFixture(name)).length
    expect(total).toBeLessThan(1.5 * 1024 * 1024)
  })

  it('runs without ffmpeg on PATH', () => {
    expect(findFfmpegOnPath()).toBeNull()
  })
})

describe('sniffAudioFormat', () => {
  it.each(FIXTURE_NAMES)('%s', async (name) => {
    expect(sniffAudioFormat(await readFixture(name))).toEqual(EXPECTED_FORMATS[name])
  })

  it('ignores the file name: a PNG is not audio, whatever it is called', () => {
    expect(sniffAudioFormat(pngFile())).toBeNull()
  })

  it('returns null for nothing, noise and formats it does not know', () => {
    expect(sniffAudioFormat(new Uint8Array(0))).toBeNull()
    expect(sniffAudioFormat(Uint8Array.of(0x52, 0x49, 0x46))).toBeNull()
    expect(sniffAudioFormat(new TextEncoder().encode('{"text": "not audio"}'))).toBeNull()
    expect(sniffAudioFormat(aiffFile(new Float32Array(1000), 16_000))).toBeNull()
    for (let i = 0; i < 50; i++) expect(sniffAudioFormat(new Uint8Array(randomBytes(10)))).toBeNull()
  })

  it('reads 64-bit float WAV, FLAC behind an ID3v2 tag and MPEG-2 program streams', async () => {
    expect(sniffAudioFormat(wavFile(new Float32Array(100), { sampleRate: 22_050, encoding: 'float', bitsPerSample: 64 }))).toEqual(wav('pcm-float', 64, 22_050))
    expect(sniffAudioFormat(withId3v2Tag(await readFixture('speech.flac')))).toEqual({ container: 'flac', codec: 'flac' })
    expect(sniffAudioFormat(mpeg2ProgramStream(await readFixture('speech.mpga')))).toEqual({ container: 'mpeg-ps', codec: 'mpeg-audio' })
  })
})

describe('decodeAudio on the JavaScript path', () => {
  it.each(FIXTURE_NAMES)('%s -> 16 kHz mono speech', async (name) => {
    const audio = await decodeFixture(name)
    expect(audio.decodedBy).toBe('javascript')
    expect(audio.sampleRate).toBe(16_000)
    expect(audio.format).toEqual(EXPECTED_FORMATS[name])
    expect(audio.samples).toBeInstanceOf(Float32Array)
    expect(audio.durationSeconds).toBe(audio.samples.length / 16_000)
    expect(Math.abs(audio.durationSeconds - SPEECH_SECONDS)).toBeLessThanOrEqual(0.1)
    expect(rms(audio.samples)).toBeGreaterThan(SILENCE_RMS)
    expect(Number.isFinite(peak(audio.samples)) && peak(audio.samples) < 1.5).toBe(true)
  })

  it('gives the same speech whatever the format (energy envelopes correlate)', async () => {
    const reference = energyEnvelope((await decodeFixture('speech-s16.wav')).samples)
    for (const name of FIXTURE_NAMES) {
      const { correlation } = bestCorrelation(reference, energyEnvelope((await decodeFixture(name)).samples), 5)
      expect(correlation, name).toBeGreaterThan(0.9)
    }
  })

  it('resamples and downmixes lossless input to match the 16 kHz reference sample for sample', async () => {
    const reference = (await decodeFixture('speech-s16.wav')).samples
    for (const name of LOSSLESS_WIDEBAND) {
      const { correlation, lag } = bestCorrelation(reference, (await decodeFixture(name)).samples, 4)
      expect(lag, name).toBe(0)
      expect(correlation, name).toBeGreaterThan(0.99)
    }
  })

  it('averages stereo channels (left = speech, right = half of it)', async () => {
    const reference = rms((await decodeFixture('speech-s16.wav')).samples)
    expect(rms((await decodeFixture('speech-44k-stereo.wav')).samples) / reference).toBeCloseTo(0.75, 2)
  })

  it('reads 64-bit float WAV and WAV with an unknown (streamed) data size exactly', async () => {
    const reference = (await decodeFixture('speech-s16.wav')).samples
    for (const bytes of [
      wavFile(reference, { sampleRate: 16_000, encoding: 'float', bitsPerSample: 64 }),
      wavFile(reference, { sampleRate: 16_000, encoding: 'float', bitsPerSample: 32, unknownDataSize: true }),
    ]) {
      const audio = await decodeAudio(bytes)
      expect(audio.samples).toEqual(reference)
    }
  })

  it('decodes MPEG audio out of an MPEG-2 program stream', async () => {
    const direct = await decodeFixture('speech.mpga')
    const audio = await decodeAudio(mpeg2ProgramStream(await readFixture('speech.mpga')))
    expect(audio.format).toEqual({ container: 'mpeg-ps', codec: 'mpeg-audio' })
    expect(audio.samples).toEqual(direct.samples)
  })

  it('decodes FLAC behind an ID3v2 tag', async () => {
    const audio = await decodeAudio(withId3v2Tag(await readFixture('speech.flac')))
    expect(audio.samples).toEqual((await decodeFixture('speech.flac')).samples)
  })
})

describe('decodeAudio refuses bad input with UnsupportedAudioError', () => {
  it('an empty file', async () => {
    await expectUnsupported(decodeAudio(new Uint8Array(0)), 'empty')
    const path = join(scratch, 'empty.wav')
    await writeFile(path, '')
    await expectUnsupported(decodeAudio(path), 'empty')
  })

  it('10 random bytes', async () => {
    for (let i = 0; i < 20; i++) await expectUnsupported(decodeAudio(new Uint8Array(randomBytes(10))), 'unrecognized')
  })

  it('a PNG renamed .mp3', async () => {
    const path = join(scratch, 'picture.mp3')
    await writeFile(path, pngFile())
    await expectUnsupported(decodeAudio(path), 'unrecognized')
  })

  it.each(['speech.mp3', 'speech.mpga', 'speech-s16.wav', 'speech.flac'])('%s cut in half, near its end, or after its header', async (name) => {
    const bytes = await readFixture(name)
    for (const length of [bytes.length >> 1, bytes.length - 100, 60]) {
      const error = await expectUnsupported(decodeAudio(bytes.subarray(0, length)))
      expect(['truncated', 'unrecognized']).toContain(error.reason)
    }
  })

  it.each(FIXTURE_NAMES)('%s cut short at 0.7 of its length', async (name) => {
    const bytes = await readFixture(name)
    await expectUnsupported(decodeAudio(bytes.subarray(0, Math.floor(bytes.length * 0.7))), 'truncated')
  })

  it('FLAC whose frames are damaged', async () => {
    const bytes = (await readFixture('speech.flac')).slice()
    bytes.fill(0x5a, bytes.length >> 1, (bytes.length >> 1) + 400)
    await expectUnsupported(decodeAudio(bytes))
  })

  it('WebM whose block headers are damaged', async () => {
    for (const name of ['speech.webm', 'speech-mediarecorder.webm']) {
      const bytes = (await readFixture(name)).slice()
      bytes.fill(0x5a, bytes.length >> 1, (bytes.length >> 1) + 400)
      await expectUnsupported(decodeAudio(bytes), 'corrupt')
    }
  })

  it('containers whose contents are noise', async () => {
    const noise = new Uint8Array(randomBytes(4000))
    const riff = wavFile(new Float32Array(0), { sampleRate: 16_000, encoding: 'int', bitsPerSample: 16 })
    await expectUnsupported(decodeAudio(riff), 'no_audio')
    const ogg = (await readFixture('speech.opus.ogg')).slice(0, 200)
    await expectUnsupported(decodeAudio(concat([ogg.subarray(0, 4), noise])))
    await expectUnsupported(decodeAudio(concat([(await readFixture('speech.flac')).subarray(0, 42), noise])))
  })
})

describe('the ffmpeg fallback', () => {
  const aiff = async (): Promise<Uint8Array> => aiffFile((await decodeFixture('speech-s16.wav')).samples, 16_000)

  it('is not used when there is none: a format only ffmpeg reads is refused', async () => {
    await expectUnsupported(decodeAudio(await aiff()), 'unrecognized')
    await expectUnsupported(decodeAudio(await aiff(), { ffmpegPath: null }), 'unrecognized')
  })

  it('decodes what the JavaScript path does not recognise, with the ffmpeg it is given', async () => {
    const argsFile = join(scratch, 'ffmpeg-args')
    const ffmpeg = await fakeFfmpeg('recording-ffmpeg', `echo "$@" > '${argsFile}'\n${ONE_SECOND_OF_SILENCE}`)
    const audio = await decodeAudio(await aiff(), { ffmpegPath: ffmpeg })
    expect(audio.decodedBy).toBe('ffmpeg')
    expect(audio.format).toBeNull()
    expect(audio.durationSeconds).toBe(1)
    expect(await readFile(argsFile, 'utf8')).toMatch(/-ac 1 -ar 16000 -f f32le pipe:1/)
  })

  it('is never used to rescue truncated or corrupt files', async () => {
    const ffmpeg = await fakeFfmpeg('always-works-ffmpeg', ONE_SECOND_OF_SILENCE)
    const mp3 = await readFixture('speech.mp3')
    await expectUnsupported(decodeAudio(mp3.subarray(0, mp3.length >> 1), { ffmpegPath: ffmpeg }), 'truncated')
    await expectUnsupported(decodeAudio(new Uint8Array(0), { ffmpegPath: ffmpeg }), 'empty')
  })

  it('reports an ffmpeg failure as UnsupportedAudioError', async () => {
    const ffmpeg = await fakeFfmpeg('failing-ffmpeg', 'echo "Invalid data found when processing input" >&2\nexit 1')
    const error = await expectUnsupported(decodeAudio(pngFile(), { ffmpegPath: ffmpeg }), 'corrupt')
    expect(error.message).toContain('Invalid data found when processing input')
  })

  itIf(realFfmpeg, 'needs ffmpeg on PATH (Debian: apt-get install -y ffmpeg; .ci/run installs it)')('decodes AIFF with the system ffmpeg', async () => {
    const audio = await decodeAudio(await aiff(), { ffmpegPath: realFfmpeg })
    expect(audio.decodedBy).toBe('ffmpeg')
    expect(Math.abs(audio.durationSeconds - SPEECH_SECONDS)).toBeLessThanOrEqual(0.1)
    const reference = energyEnvelope((await decodeFixture('speech-s16.wav')).samples)
    expect(bestCorrelation(reference, energyEnvelope(audio.samples), 5).correlation).toBeGreaterThan(0.9)
  })
})

describe('decodeAudioInWorker', () => {
  it('decodes a path and bytes to the same samples as the calling thread', async () => {
    for (const name of ['speech.mp3', 'speech-mediarecorder.webm', 'speech-44k-stereo.wav']) {
      const expected = (await decodeFixture(name)).samples
      const fromPath = await decodeAudioInWorker(fixture(name))
      expect(fromPath.decodedBy).toBe('javascript')
      expect(fromPath.samples).toEqual(expected)

      const bytes = await readFixture(name)
      const fromBytes = await decodeAudioInWorker(bytes)
      expect(fromBytes.samples).toEqual(expected)
      expect(bytes.byteLength).toBeGreaterThan(0) // copied to the worker, not transferred away
    }
  })

  it('decodes into a file the same samples it would return, and removes the file when decoding fails', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'hearth-decode-file-'))
    try {
      for (const name of ['speech.flac', 'speech.opus.ogg', 'speech-44k-stereo.wav']) {
        const expected = (await decodeFixture(name)).samples
        const path = join(dir, `${name}.f32`)
        const audio = await decodeAudioToFileInWorker(await readFixture(name), path)
        expect(audio).toMatchObject({ path, sampleRate: 16_000, durationSeconds: expected.length / 16_000, decodedBy: 'javascript' })
        const written = await readFile(path)
        expect(new Float32Array(written.buffer, written.byteOffset, written.byteLength / 4)).toEqual(expected)
      }
      const bad = join(dir, 'bad.f32')
      await expectUnsupported(decodeAudioToFileInWorker(pngFile(), bad), 'unrecognized')
      expect(await readdir(dir)).not.toContain('bad.f32')
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('stops at the length limit, on either path, whatever the file claims', async () => {
    const minute = oggOpusSilence(60) // 1.6 KB for a minute of sound
    expect((await decodeAudio(minute, { maxSeconds: 61 })).durationSeconds).toBeCloseTo(60, 1)
    await expect(decodeAudio(minute, { maxSeconds: 59 })).rejects.toBeInstanceOf(AudioTooLongError)
    await expect(decodeAudioInWorker(minute, { maxSeconds: 59 })).rejects.toMatchObject({ name: 'AudioTooLongError', maxSeconds: 59 })
    // WAV and MP3 know their length up front: refused before anything is decoded.
    const wav = wavFile(new Float32Array(16_000 * 3), { sampleRate: 16_000, encoding: 'int', bitsPerSample: 16 })
    await expect(decodeAudio(wav, { maxSeconds: 2 })).rejects.toBeInstanceOf(AudioTooLongError)
  })

  it('rejects with UnsupportedAudioError from the worker', async () => {
    const error = await expectUnsupported(decodeAudioInWorker(pngFile()), 'unrecognized')
    expect(error.detail).toBe('the bytes are not a known audio or video format')
  })

  it('starts its worker when the parent process runs under the tsx CLI', async () => {
    const tsxCli = createRequire(import.meta.url).resolve('tsx/cli')
    const script = fileURLToPath(new URL('../audio/decode-in-worker-under-tsx.ts', import.meta.url))
    const { stdout } = await promisify(execFile)(process.execPath, [tsxCli, script, fixture('speech.opus.ogg')], {
      env: { ...process.env, PATH: originalPath },
      timeout: 30_000,
    })
    const result = JSON.parse(stdout.trim().split('\n').at(-1)!)
    expect(result.decodedBy).toBe('javascript')
    expect(result.sampleRate).toBe(16_000)
    expect(Math.abs(result.durationSeconds - SPEECH_SECONDS)).toBeLessThanOrEqual(0.1)
  })

  it('runs concurrent decodes side by side, and cancelling one leaves the others alone', async () => {
    const names = ['speech.flac', 'speech.ogg', 'speech.m4a', 'speech.mpeg']
    const controller = new AbortController()
    const cancelled = decodeAudioInWorker(fixture('speech.opus.ogg'), { signal: controller.signal })
    const others = names.map((name) => decodeAudioInWorker(fixture(name)))
    controller.abort()
    await expect(cancelled).rejects.toMatchObject({ name: 'AbortError' })
    const results = await Promise.all(others)
    for (const [i, name] of names.entries()) expect(results[i]!.samples, name).toEqual((await decodeFixture(name)).samples)
  })

  it('is cancelled by an AbortSignal', async () => {
    // About six minutes of MPEG audio: raw frames concatenate into a longer valid stream.
    const mpga = await readFixture('speech.mpga')
    const long = concat(Array.from({ length: 150 }, () => mpga))

    let started = performance.now()
    const full = await decodeAudioInWorker(long)
    const fullMs = performance.now() - started
    expect(full.durationSeconds).toBeGreaterThan(150 * SPEECH_SECONDS)

    const controller = new AbortController()
    started = performance.now()
    const pending = decodeAudioInWorker(long, { signal: controller.signal })
    setTimeout(() => controller.abort(), 20)
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' })
    expect(performance.now() - started).toBeLessThan(fullMs)

    await expect(decodeAudioInWorker(long, { signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' })
    // The pool replaces the terminated worker.
    expect((await decodeAudioInWorker(fixture('speech.webm'))).decodedBy).toBe('javascript')
  })
})

describe('SincResampler', () => {
  const tone = (sampleRate: number, frequency: number, seconds = 1): Float32Array =>
    Float32Array.from({ length: Math.round(sampleRate * seconds) }, (_, i) => Math.sin((2 * Math.PI * frequency * i) / sampleRate))
  const resample = (input: Float32Array, from: number, blockSize = input.length): Float32Array => {
    const resampler = new SincResampler(from, 16_000)
    const blocks: Float32Array[] = []
    for (let at = 0; at < input.length; at += blockSize) blocks.push(resampler.process(input.subarray(at, at + blockSize)))
    blocks.push(resampler.flush())
    return Float32Array.from(blocks.flatMap((block) => [...block]))
  }
  const middle = (samples: Float32Array): Float32Array => samples.subarray(samples.length / 8, (samples.length * 7) / 8)

  it.each([8_000, 22_050, 44_100, 48_000])('keeps a 1 kHz tone from %i Hz intact', (rate) => {
    const output = resample(tone(rate, 1000), rate)
    expect(output.length).toBe(16_000)
    const ideal = tone(16_000, 1000)
    const error = middle(output).map((sample, i) => sample - middle(ideal)[i]!)
    expect(rms(error) / rms(middle(ideal))).toBeLessThan(1e-3) // better than -60 dB
  })

  it.each([44_100, 48_000])('removes a 10 kHz tone (above the new Nyquist) from %i Hz', (rate) => {
    const output = resample(tone(rate, 10_000), rate)
    expect(rms(middle(output))).toBeLessThan(1e-3 * rms(tone(rate, 10_000)))
  })

  it('gives the same result whatever the block size', () => {
    const input = tone(44_100, 440, 0.5)
    expect(resample(input, 44_100, 1000)).toEqual(resample(input, 44_100))
    expect(resample(input, 44_100, 7)).toEqual(resample(input, 44_100))
  })
})

/** An ID3v2.3 tag with one TIT2 frame, as some taggers put in front of FLAC files. */
function withId3v2Tag(bytes: Uint8Array): Uint8Array {
  const title = new TextEncoder().encode('\u0000Hearth')
  const frame = concat([new TextEncoder().encode('TIT2'), Uint8Array.of(0, 0, 0, title.length, 0, 0), title])
  const header = Uint8Array.of(0x49, 0x44, 0x33, 3, 0, 0, 0, 0, 0, frame.length)
  return concat([header, frame, bytes])
}
