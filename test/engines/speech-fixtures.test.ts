/**
 * Speech with the shared fixtures: real speech (jfk.wav, jfk.mp3, fr-multipiece-16k.wav) through
 * ggml-tiny-random-multilingual.bin, and the trained Silero voice-activity model. The whisper
 * weights are random, so its words are too: the checks are on shapes, timings, determinism, that
 * the API gives exactly what whisper-server gives when driven directly, and that silence is
 * skipped when asked.
 */
import { copyFileSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createParser } from 'eventsource-parser'
import OpenAI, { toFile } from 'openai'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describeIf, itIf } from '../support/skips.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { decodeAudio } from '../../media/audio/decode-audio.ts'
import { startTestServer, type TestServer } from '../support/server-process.ts'
import { startUpstreamWhisperServer, whisperBuild } from '../support/upstream-servers.ts'
import { wavFile } from '../audio/synthesize-audio-files.ts'

const modelFile = sharedFixture('models/ggml-tiny-random-multilingual.bin')
const jfkWav = sharedFixture('audio/jfk.wav')
const jfkMp3 = sharedFixture('audio/jfk.mp3')
const french = sharedFixture('audio/fr-multipiece-16k.wav')
const silero = sharedFixture('models/for-tests-silero-v6.2.0-ggml.bin')
const MODEL = 'ggml-tiny-random-multilingual'

describeIf(modelFile && jfkWav && jfkMp3 && french, 'needs the shared fixtures (../shared/fixtures)')(
  'ggml-tiny-random-multilingual with real speech (shared fixtures)',
  () => {
    let server: TestServer
    let client: OpenAI

    beforeAll(async () => {
      const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-speech-fixtures-'))
      copyFileSync(modelFile!, join(modelsDir, `${MODEL}.bin`))
      server = await startTestServer({ modelsDir })
      client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey, maxRetries: 0 })
    })

    afterAll(async () => {
      await server?.stop()
    })

    const verbose = async (path: string, extra: object = {}) =>
      (await client.audio.translations.create({
        model: MODEL,
        file: await toFile(readFileSync(path), 'audio'),
        response_format: 'verbose_json',
        ...extra,
      })) as any

    /** Segments in order, inside the audio, start before end; the text is theirs joined. */
    function expectWellFormed(body: any, durationSeconds: number) {
      expect(body.task).toBe('translate')
      expect(body.duration).toBeCloseTo(durationSeconds, 1)
      expect(typeof body.language).toBe('string')
      expect(body.segments.length).toBeGreaterThan(0)
      let previousStart = 0
      body.segments.forEach((s: any, i: number) => {
        expect(s.id).toBe(i)
        expect(s.start).toBeGreaterThanOrEqual(previousStart)
        expect(s.end).toBeGreaterThanOrEqual(s.start)
        expect(s.end).toBeLessThanOrEqual(body.duration + 0.001)
        previousStart = s.start
      })
      expect(body.text).toBe(
        body.segments
          .map((s: any) => s.text)
          .join('')
          .trim(),
      )
    }

    it('jfk.wav: well-formed segments, the same every time', async () => {
      const first = await verbose(jfkWav!)
      expectWellFormed(first, 11)
      expect(await verbose(jfkWav!)).toEqual(first)
    })

    it('jfk.mp3 decodes to the same length as the WAV and gives a well-formed answer', async () => {
      expectWellFormed(await verbose(jfkMp3!), 11)
    })

    it('fr-multipiece-16k.wav, detected or told it is French', async () => {
      const duration = (await decodeAudio(new Uint8Array(readFileSync(french!)))).durationSeconds
      expectWellFormed(await verbose(french!), duration)
      const told = await verbose(french!, { language: 'fr' })
      expectWellFormed(told, duration)
      expect(told.language).toBe('french')
    })

    itIf(whisperBuild, 'needs whisper.cpp built here (npm run build:engines)')(
      'gives exactly what whisper-server gives when driven directly (same file, options, threads)',
      async () => {
        const api = await verbose(jfkWav!)
        const upstream = await startUpstreamWhisperServer(['--model', modelFile!, '--threads', '1', '--no-language-probabilities'])
        try {
          const body = new FormData()
          body.append('file', new Blob([readFileSync(jfkWav!)]), 'jfk.wav')
          for (const [k, v] of Object.entries({
            translate: 'true',
            response_format: 'verbose_json',
            language: 'auto',
            temperature: '0',
            temperature_inc: '0',
            best_of: '1',
            beam_size: '-1',
          })) {
            body.append(k, v)
          }
          const direct = await (await fetch(`${upstream.url}/inference`, { method: 'POST', body })).json()
          expect(api.segments.map((s: any) => s.text)).toEqual(direct.segments.map((s: any) => s.text))
          expect(api.segments.map((s: any) => s.start)).toEqual(direct.segments.map((s: any) => s.start))
          // The API clips the last end to the audio; whisper may place it past the end.
          expect(api.segments.map((s: any) => s.end)).toEqual(direct.segments.map((s: any) => Math.min(s.end, 11)))
          expect(api.language).toBe(direct.language)
        } finally {
          await upstream.stop()
        }
      },
    )

    itIf(whisperBuild, 'needs whisper.cpp built here (npm run build:engines)')(
      'transcribes with the same tokens and probabilities whisper-server reports',
      async () => {
        const api = (await client.audio.transcriptions.create({
          model: MODEL,
          file: await toFile(readFileSync(jfkWav!), 'jfk.wav'),
          response_format: 'verbose_json',
        })) as any
        const upstream = await startUpstreamWhisperServer(['--model', modelFile!, '--threads', '1', '--no-language-probabilities'])
        try {
          const body = new FormData()
          body.append('file', new Blob([readFileSync(jfkWav!)]), 'jfk.wav')
          const options = {
            translate: 'false',
            response_format: 'verbose_json',
            token_timestamps: 'true',
            language: 'auto',
            temperature: '0',
            temperature_inc: '0',
            best_of: '1',
            beam_size: '-1',
          }
          for (const [k, v] of Object.entries(options)) body.append(k, v)
          const direct = await (await fetch(`${upstream.url}/inference`, { method: 'POST', body })).json()
          expect(api.task).toBe('transcribe')
          expect(api.segments.map((s: any) => s.text)).toEqual(direct.segments.map((s: any) => s.text))
          expect(api.segments.map((s: any) => s.tokens)).toEqual(direct.segments.map((s: any) => s.tokens))
          for (const [i, s] of api.segments.entries()) {
            expect(s.avg_logprob).toBeCloseTo(direct.segments[i].avg_logprob, 5)
            expect(s.no_speech_prob).toBeCloseTo(direct.segments[i].no_speech_prob, 5)
          }
        } finally {
          await upstream.stop()
        }
      },
    )

    it('transcribes jfk.wav with word and segment timings in order and inside the audio', async () => {
      const body = (await client.audio.transcriptions.create({
        model: MODEL,
        file: await toFile(readFileSync(jfkWav!), 'jfk.wav'),
        response_format: 'verbose_json',
        timestamp_granularities: ['word', 'segment'],
      })) as any
      expect(body.task).toBe('transcribe')
      expect(body.duration).toBeCloseTo(11, 1)
      expect(body.words.length).toBeGreaterThan(0)
      for (const items of [body.segments, body.words]) {
        let previousStart = 0
        for (const item of items) {
          expect(item.start).toBeGreaterThanOrEqual(previousStart)
          expect(item.end).toBeGreaterThanOrEqual(item.start)
          expect(item.end).toBeLessThanOrEqual(body.duration + 0.001)
          previousStart = item.start
        }
      }
      // Every word lies inside the segment it came from.
      expect(body.words.every((w: any) => body.segments.some((s: any) => w.start >= s.start && w.end <= s.end))).toBe(true)
    })

    it('streams deltas that add up to the done text, and subtitles with a cue per segment', async () => {
      const body = new FormData()
      body.append('model', MODEL)
      body.append('stream', 'true')
      body.append('stream_options[include_usage]', 'true')
      body.append('file', new Blob([readFileSync(jfkMp3!)]), 'jfk.mp3')
      const res = await fetch(`${server.url}/v1/audio/translations`, { method: 'POST', headers: { authorization: `Bearer ${server.apiKey}` }, body })
      const events: string[] = []
      const parser = createParser({ onEvent: (e) => events.push(e.data) })
      parser.feed(await res.text())
      expect(events.at(-1)).toBe('[DONE]')
      const parsed = events.slice(0, -1).map((e) => JSON.parse(e))
      const done = parsed.at(-1)
      expect(done).toMatchObject({ type: 'transcript.text.done', usage: { type: 'duration', seconds: 11 } })
      const deltas = parsed.slice(0, -1)
      expect(deltas.every((d) => d.type === 'transcript.text.delta' && d.delta.length > 0)).toBe(true)
      expect(deltas.map((d) => d.delta).join('')).toBe(done.text)

      const segments = (await verbose(jfkMp3!)).segments.filter((s: any) => s.text.trim())
      const srt = (await client.audio.translations.create({
        model: MODEL,
        file: await toFile(readFileSync(jfkMp3!), 'a'),
        response_format: 'srt',
      })) as unknown as string
      expect(srt.match(/^\d+$/gm)).toHaveLength(segments.length)
      const vtt = (await client.audio.translations.create({
        model: MODEL,
        file: await toFile(readFileSync(jfkMp3!), 'a'),
        response_format: 'vtt',
      })) as unknown as string
      expect(vtt.startsWith('WEBVTT\n\n')).toBe(true)
      expect(vtt.match(/^\d\d:\d\d:\d\d\.\d{3} --> \d\d:\d\d:\d\d\.\d{3}$/gm)).toHaveLength(segments.length)
    })
  },
)

describeIf(modelFile && jfkWav && silero, 'needs the shared fixtures (../shared/fixtures)')(
  'voice activity detection with the Silero model (shared fixtures)',
  () => {
    let server: TestServer

    beforeAll(async () => {
      const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-vad-'))
      copyFileSync(modelFile!, join(modelsDir, `${MODEL}.bin`))
      // Beside the whisper model, not in models.json: every speech model finds it.
      copyFileSync(silero!, join(modelsDir, 'ggml-silero-v6.2.0.bin'))
      server = await startTestServer({ modelsDir })
    })

    afterAll(async () => {
      await server?.stop()
    })

    /** jfk.wav (11 s of speech) with five seconds of silence before and after it. */
    async function paddedJfk(): Promise<Uint8Array> {
      const speech = (await decodeAudio(new Uint8Array(readFileSync(jfkWav!)))).samples
      const padded = new Float32Array(speech.length + 2 * 5 * 16_000)
      padded.set(speech, 5 * 16_000)
      return wavFile(padded, { sampleRate: 16_000, encoding: 'int', bitsPerSample: 16 })
    }

    async function transcribeSegments(fields: Record<string, string>) {
      const body = new FormData()
      for (const [k, v] of Object.entries({ model: MODEL, response_format: 'verbose_json', ...fields })) body.append(k, v)
      body.append('file', new Blob([new Uint8Array(await paddedJfk())]), 'padded.wav')
      const res = await fetch(`${server.url}/v1/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${server.apiKey}` }, body })
      expect(res.status).toBe(200)
      return (await res.json()) as { duration: number; segments: Array<{ start: number; end: number }> }
    }

    it('the silence around the speech gets no text with chunking_strategy auto, and times stay in the whole audio', async () => {
      const plain = await transcribeSegments({})
      expect(plain.duration).toBeCloseTo(21, 1)
      // Without the detector, the random model writes text over the silence too.
      expect(plain.segments.some((s) => s.start < 4.5 || s.end > 16.5)).toBe(true)

      for (const strategy of ['auto', '{"type":"server_vad","threshold":0.5,"silence_duration_ms":300,"prefix_padding_ms":100}']) {
        const skipped = await transcribeSegments({ chunking_strategy: strategy })
        expect(skipped.duration).toBeCloseTo(21, 1)
        expect(skipped.segments.length).toBeGreaterThan(0)
        for (const s of skipped.segments) {
          expect(s.start).toBeGreaterThanOrEqual(4.5)
          expect(s.end).toBeLessThanOrEqual(16.5)
        }
      }
    })
  },
)
