/**
 * Translation with the shared fixtures: real speech (jfk.wav, jfk.mp3, fr-multipiece-16k.wav)
 * through ggml-tiny-random-multilingual.bin. Its weights are random, so its words are too: the
 * checks are on shapes, timings, determinism, and that the API gives exactly what the binding
 * gives when driven directly.
 */
import { copyFileSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createParser } from 'eventsource-parser'
import OpenAI, { toFile } from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sharedFixture } from './support/shared-fixtures.ts'
import { decodeAudio } from '../native-models/audio/decode-audio.ts'
import { startTestServer, type TestServer } from './support/server-process.ts'
import { startUpstreamWhisperServer, whisperBuild } from './support/upstream-servers.ts'

const modelFile = sharedFixture('models/ggml-tiny-random-multilingual.bin')
const jfkWav = sharedFixture('audio/jfk.wav')
const jfkMp3 = sharedFixture('audio/jfk.mp3')
const french = sharedFixture('audio/fr-multipiece-16k.wav')
const MODEL = 'ggml-tiny-random-multilingual'

describe.skipIf(!modelFile || !jfkWav || !jfkMp3 || !french)('ggml-tiny-random-multilingual with real speech (shared fixtures)', () => {
  let server: TestServer
  let client: OpenAI

  beforeAll(async () => {
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-translation-fixtures-'))
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
    expect(body.text).toBe(body.segments.map((s: any) => s.text).join('').trim())
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

  it.skipIf(!whisperBuild)('gives exactly what whisper-server gives when driven directly (same file, options, threads)', async () => {
    const api = await verbose(jfkWav!)
    const upstream = await startUpstreamWhisperServer(['--model', modelFile!, '--threads', '1', '--no-language-probabilities'])
    try {
      const body = new FormData()
      body.append('file', new Blob([readFileSync(jfkWav!)]), 'jfk.wav')
      for (const [k, v] of Object.entries({ translate: 'true', response_format: 'verbose_json', language: 'auto', temperature: '0', temperature_inc: '0', best_of: '1', beam_size: '-1' })) {
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
    const srt = (await client.audio.translations.create({ model: MODEL, file: await toFile(readFileSync(jfkMp3!), 'a'), response_format: 'srt' })) as unknown as string
    expect(srt.match(/^\d+$/gm)).toHaveLength(segments.length)
    const vtt = (await client.audio.translations.create({ model: MODEL, file: await toFile(readFileSync(jfkMp3!), 'a'), response_format: 'vtt' })) as unknown as string
    expect(vtt.startsWith('WEBVTT\n\n')).toBe(true)
    expect(vtt.match(/^\d\d:\d\d:\d\d\.\d{3} --> \d\d:\d\d:\d\d\.\d{3}$/gm)).toHaveLength(segments.length)
  })
})
