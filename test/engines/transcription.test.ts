/**
 * Transcription end to end, and what it shares with translation: the real server process, a tiny
 * random whisper made by our own writer (greedy decoding of any short clip gives " hello world."
 * from 0 to 2 s), the official openai client, the Vercel AI SDK and raw HTTP. The numbers in
 * verbose_json, the words and the logprobs come from the engine; the checks hold them to the audio.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createOpenAI } from '@ai-sdk/openai'
import { experimental_transcribe as transcribe } from 'ai'
import OpenAI, { toFile } from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { oggOpusSilence } from '../audio/synthesize-audio-files.ts'
import { residentBytes } from '../support/process-stats.ts'
import { PROJECT_ROOT, readResponse, startTestServer, type TestServer } from '../support/server-process.ts'
import { writeTinyLlama, writeTinyWhisper } from '../support/tiny-models.ts'

const WHISPER = 'whisper-tiny'
const EXPECTED_TEXT = 'hello world.'
const SPEECH_SECONDS = 2.37
/** The server under test takes at most a minute of audio. */
const MAX_AUDIO_MINUTES = 1
const speech = () => readFileSync(join(PROJECT_ROOT, 'test/fixtures/audio/speech.flac'))

let server: TestServer
let client: OpenAI

beforeAll(async () => {
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-transcription-'))
  writeTinyWhisper(join(modelsDir, 'ggml-tiny-whisper.bin'))
  writeTinyLlama(join(modelsDir, 'tiny-chat.gguf'), { contextLength: 512 })
  writeFileSync(
    join(modelsDir, 'models.json'),
    JSON.stringify({
      models: [
        { id: WHISPER, file: 'ggml-tiny-whisper.bin' },
        { id: 'chat-tiny', file: 'tiny-chat.gguf' },
      ],
    }),
  )
  server = await startTestServer({ modelsDir, args: ['--max-audio-minutes', String(MAX_AUDIO_MINUTES)] })
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey, maxRetries: 0 })
})

afterAll(async () => {
  await server?.stop()
})

/** A form upload as raw HTTP; `file: null` sends none. */
async function postForm(path: string, fields: Record<string, string | string[]>, file: Uint8Array | null = speech()) {
  const body = new FormData()
  for (const [name, value] of Object.entries(fields)) for (const v of [value].flat()) body.append(name, v)
  if (file) body.append('file', new Blob([new Uint8Array(file)]), 'upload.bin')
  const res = await fetch(`${server.url}/v1${path}`, { method: 'POST', headers: { authorization: `Bearer ${server.apiKey}` }, body })
  return readResponse(res)
}

/** Timings in order and inside the audio, each ending no sooner than it starts. */
function expectTimed(items: Array<{ start: number; end: number }>, duration: number) {
  let previousStart = 0
  for (const item of items) {
    expect(item.start).toBeGreaterThanOrEqual(previousStart)
    expect(item.end).toBeGreaterThanOrEqual(item.start)
    expect(item.end).toBeLessThanOrEqual(duration + 0.001)
    previousStart = item.start
  }
}

describe('through the official openai client', () => {
  it('transcribes to json with the audio length as usage, and to text, srt and vtt', async () => {
    const json = await client.audio.transcriptions.create({ model: WHISPER, file: await toFile(speech(), 'speech.flac') })
    expect(json.text).toBe(EXPECTED_TEXT)
    expect(json.usage).toEqual({ type: 'duration', seconds: expect.closeTo(SPEECH_SECONDS, 2) })

    const file = () => toFile(speech(), 'speech.flac')
    expect(await client.audio.transcriptions.create({ model: WHISPER, file: await file(), response_format: 'text' })).toBe(`${EXPECTED_TEXT}\n`)
    expect(await client.audio.transcriptions.create({ model: WHISPER, file: await file(), response_format: 'srt' })).toBe(
      `1\n00:00:00,000 --> 00:00:02,000\n${EXPECTED_TEXT}\n\n`,
    )
    expect(await client.audio.transcriptions.create({ model: WHISPER, file: await file(), response_format: 'vtt' })).toBe(
      `WEBVTT\n\n00:00:00.000 --> 00:00:02.000\n${EXPECTED_TEXT}\n\n`,
    )
  })

  it("verbose_json: segments with the engine's tokens and probabilities, and word timings when asked", async () => {
    const verbose = await client.audio.transcriptions.create({
      model: WHISPER,
      file: await toFile(speech(), 'speech.flac'),
      response_format: 'verbose_json',
      timestamp_granularities: ['word', 'segment'],
    })
    expect(verbose).toMatchObject({ task: 'transcribe', language: 'english', text: EXPECTED_TEXT })
    expect(verbose.duration).toBeCloseTo(SPEECH_SECONDS, 2)
    expect(verbose.usage).toEqual({ type: 'duration', seconds: expect.closeTo(SPEECH_SECONDS, 2) })
    const [segment] = verbose.segments!
    expect(segment).toMatchObject({ id: 0, seek: 0, start: 0, end: 2, text: ` ${EXPECTED_TEXT}`, temperature: 0 })
    expect(segment!.tokens).toHaveLength(3)
    expect(segment!.avg_logprob).toBeLessThan(0)
    expect(segment!.no_speech_prob).toBeGreaterThanOrEqual(0)
    expect(segment!.no_speech_prob).toBeLessThanOrEqual(1)
    expect(verbose.words!.map((w) => w.word)).toEqual(['hello', 'world'])
    expectTimed(verbose.words!, verbose.duration)
    expectTimed(verbose.segments!, verbose.duration)

    // Words alone: OpenAI leaves the segments out.
    const words = await client.audio.transcriptions.create({
      model: WHISPER,
      file: await toFile(speech(), 'speech.flac'),
      response_format: 'verbose_json',
      timestamp_granularities: ['word'],
    })
    expect(words.segments).toBeUndefined()
    expect(words.words).toEqual(verbose.words)
  })

  it('include logprobs: every token with its log probability, adding up to the text', async () => {
    const json = await client.audio.transcriptions.create({ model: WHISPER, file: await toFile(speech(), 'speech.flac'), include: ['logprobs'] })
    expect(json.text).toBe(EXPECTED_TEXT)
    expect(
      json
        .logprobs!.map((l) => l.token)
        .join('')
        .trim(),
    ).toBe(EXPECTED_TEXT)
    for (const entry of json.logprobs!) {
      expect(entry.logprob).toBeLessThanOrEqual(0)
      expect(entry.bytes).toEqual([...Buffer.from(entry.token!, 'utf8')])
    }
  })

  it('streams deltas and a done event with the text, usage and logprobs', async () => {
    const stream = await client.audio.transcriptions.create({
      model: WHISPER,
      file: await toFile(speech(), 'speech.flac'),
      stream: true,
      include: ['logprobs'],
      // @ts-expect-error stream_options is not in the SDK's types for transcriptions
      stream_options: { include_usage: true },
    })
    const events = []
    for await (const event of stream) events.push(event)
    expect(events.map((e) => e.type)).toEqual(['transcript.text.delta', 'transcript.text.done'])
    const [delta, done] = events as [OpenAI.Audio.TranscriptionTextDeltaEvent, OpenAI.Audio.TranscriptionTextDoneEvent]
    expect(delta.delta).toBe(EXPECTED_TEXT)
    expect(done.text).toBe(EXPECTED_TEXT)
    expect(done.logprobs).toEqual(delta.logprobs)
    expect((done as unknown as { usage: unknown }).usage).toEqual({ type: 'duration', seconds: expect.closeTo(SPEECH_SECONDS, 2) })
  })

  it('translations take the same fields: word timings on the translation route too', async () => {
    const res = await postForm('/audio/translations', { model: WHISPER, response_format: 'verbose_json', 'timestamp_granularities[]': ['word', 'segment'] })
    expect(res.status).toBe(200)
    expect(res.json).toMatchObject({ task: 'translate', text: EXPECTED_TEXT })
    expect(res.json.words.map((w: { word: string }) => w.word)).toEqual(['hello', 'world'])
    expect(res.json).not.toHaveProperty('usage')
  })
})

describe('through the Vercel AI SDK', () => {
  it('transcribe() gets the text, the segments, the language and the duration', async () => {
    const openai = createOpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey })
    const result = await transcribe({
      model: openai.transcription(WHISPER),
      audio: speech(),
      providerOptions: { openai: { responseFormat: 'verbose_json', timestampGranularities: ['segment'] } },
    })
    expect(result.text).toBe(EXPECTED_TEXT)
    expect(result.language).toBe('en')
    expect(result.durationInSeconds).toBeCloseTo(SPEECH_SECONDS, 2)
    expect(result.segments).toEqual([{ text: ` ${EXPECTED_TEXT}`, startSecond: 0, endSecond: 2 }])
  })
})

describe('requests refused with the field named', () => {
  it.each([
    ['a field whisper cannot honour', { 'known_speaker_names[]': 'Ann' }, 'unsupported_parameter', 'known_speaker_names[]'],
    ['keywords', { keywords: 'Hearth' }, 'unsupported_parameter', 'keywords'],
    ['word timings without verbose_json', { 'timestamp_granularities[]': 'word' }, 'invalid_value', 'timestamp_granularities'],
    ['an unknown granularity', { response_format: 'verbose_json', 'timestamp_granularities[]': 'sentence' }, 'invalid_value', 'timestamp_granularities[0]'],
    ['logprobs in subtitles', { response_format: 'srt', 'include[]': 'logprobs' }, 'invalid_value', 'include'],
    ['an unknown include', { 'include[]': 'everything' }, 'invalid_value', 'include[0]'],
    ['a chunking strategy that is not auto or server_vad', { chunking_strategy: 'semantic' }, 'invalid_value', 'chunking_strategy'],
    ['a server_vad threshold out of range', { chunking_strategy: '{"type":"server_vad","threshold":1.5}' }, 'invalid_value', 'chunking_strategy.threshold'],
    ['voice activity detection with no detector in the folder', { chunking_strategy: 'auto' }, 'model_not_compatible', 'chunking_strategy'],
    ['a chat model', { model: 'chat-tiny' }, 'model_not_compatible', 'model'],
    ['an unknown language', { language: 'xx' }, 'invalid_language', 'language'],
  ])('%s', async (_what, fields, code, param) => {
    const res = await postForm('/audio/transcriptions', { model: WHISPER, ...fields })
    expect(res.status).toBe(400)
    expect(res.json.error).toMatchObject({ type: 'invalid_request_error', code, param })
  })

  it('a missing file, and bytes that are not audio', async () => {
    const missing = await postForm('/audio/transcriptions', { model: WHISPER }, null)
    expect(missing.status).toBe(400)
    expect(missing.json.error).toMatchObject({ code: 'missing_required_parameter', param: 'file' })
    const notAudio = await postForm('/audio/transcriptions', { model: WHISPER }, Buffer.from('not audio at all'))
    expect(notAudio.status).toBe(400)
    expect(notAudio.json.error).toMatchObject({ code: 'unsupported_audio_format', param: 'file' })
  })
})

describe('bounded memory', () => {
  it('25 MB of the densest Opus (about 280 hours) is refused at the length limit, without the server growing', async () => {
    const densest = oggOpusSilence(1_000_000)
    expect(densest.length).toBeGreaterThan(24 * 1024 * 1024)
    const pid = server.process.pid!
    const rss = () => residentBytes(pid) ?? 0
    const before = rss()
    let peak = before
    const sampler = setInterval(() => (peak = Math.max(peak, rss())), 50)
    const started = performance.now()
    let res
    try {
      res = await postForm('/audio/transcriptions', { model: WHISPER }, densest)
    } finally {
      clearInterval(sampler)
    }
    const seconds = (performance.now() - started) / 1000
    console.log(`25 MB of silent Opus: refused after ${seconds.toFixed(1)} s; server RSS peak +${((peak - before) / 1048576).toFixed(0)} MiB`)
    expect(res.status).toBe(400)
    expect(res.json.error).toMatchObject({ code: 'audio_too_long', param: 'file' })
    expect(res.json.error.message).toContain('at most 1 minute')
    // The whole file is 60 GB as 16 kHz floats: the decoder stops at the limit, writes samples out
    // a few seconds at a time, and decodes a page of Opus per call.
    expect(peak - before).toBeLessThan(160 * 1024 * 1024)
    expect((await client.audio.transcriptions.create({ model: WHISPER, file: await toFile(speech(), 'speech.flac') })).text).toBe(EXPECTED_TEXT)
  }, 60_000)
})
