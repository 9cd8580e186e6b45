/**
 * Audio translation end to end: the real server process, a tiny random multilingual whisper made by
 * our own writer (greedy decoding of any short clip gives " hello world." from 0 to 2 s), the
 * official openai client and raw HTTP, with the audio fixtures in every accepted format.
 */
import { createReadStream, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createParser } from 'eventsource-parser'
import OpenAI, { toFile } from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MAX_AUDIO_FILE_BYTES } from '../../main/server/protocols/openai/speech-request.ts'
import { pngFile } from '../audio/synthesize-audio-files.ts'
import { engineProcessIds as engineProcessIdsOf } from '../support/process-stats.ts'
import { postJson, PROJECT_ROOT, readResponse, startTestServer, type TestServer } from '../support/server-process.ts'
import { writeTinyBert, writeTinyLlama, writeTinyWhisper } from '../support/tiny-models.ts'

const FIXTURES = join(PROJECT_ROOT, 'test/fixtures/audio')
const FIXTURE_NAMES = readdirSync(FIXTURES)
  .filter((n) => n.startsWith('speech'))
  .sort()
const SPEECH_SECONDS = 2.37
const WHISPER = 'whisper-tiny'
const EXPECTED_TEXT = 'hello world.'
const fixture = (name: string) => readFileSync(join(FIXTURES, name))

let modelsDir: string
let server: TestServer
let client: OpenAI

beforeAll(async () => {
  modelsDir = mkdtempSync(join(tmpdir(), 'hearth-translation-'))
  writeTinyWhisper(join(modelsDir, 'ggml-tiny-whisper.bin'))
  writeTinyLlama(join(modelsDir, 'tiny-chat.gguf'), { contextLength: 512 })
  writeTinyBert(join(modelsDir, 'tiny-bert.gguf'))
  writeFileSync(
    join(modelsDir, 'models.json'),
    JSON.stringify({
      models: [
        { id: WHISPER, file: 'ggml-tiny-whisper.bin' },
        { id: 'chat-tiny', file: 'tiny-chat.gguf' },
        { id: 'bert-tiny', file: 'tiny-bert.gguf' },
      ],
    }),
  )
  server = await startTestServer({ modelsDir })
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey, maxRetries: 0 })
})

afterAll(async () => {
  await server?.stop()
})

interface Upload {
  file?: { bytes: Uint8Array; name?: string; type?: string }
  fields?: Record<string, string>
  signal?: AbortSignal
}

function form({ file, fields = {} }: Upload): FormData {
  const body = new FormData()
  for (const [k, v] of Object.entries(fields)) body.append(k, v)
  // As the official client uploads: a made-up name and no useful content type.
  if (file) body.append('file', new Blob([new Uint8Array(file.bytes)], { type: file.type ?? 'application/octet-stream' }), file.name ?? 'upload.bin')
  return body
}

async function translate(upload: Upload) {
  const res = await fetch(`${server.url}/v1/audio/translations`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.apiKey}` },
    body: form(upload),
    signal: upload.signal,
  })
  return readResponse(res)
}

/** Raw SSE: every `data:` payload in order; `stopAfter` disconnects once that many have arrived. */
async function streamTranslate(upload: Upload, stopAfter?: number): Promise<{ status: number; events: string[] }> {
  const controller = new AbortController()
  const res = await fetch(`${server.url}/v1/audio/translations`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.apiKey}` },
    body: form({ ...upload, fields: { stream: 'true', ...upload.fields } }),
    signal: controller.signal,
  })
  const events: string[] = []
  const parser = createParser({ onEvent: (e) => events.push(e.data) })
  const decoder = new TextDecoder()
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      parser.feed(decoder.decode(chunk, { stream: true }))
      if (stopAfter !== undefined && events.length >= stopAfter) {
        controller.abort()
        break
      }
    }
  } catch (e) {
    if ((e as Error).name !== 'AbortError') throw e
  }
  return { status: res.status, events }
}

function engineProcessIds(): number[] {
  return engineProcessIdsOf(server.process.pid)
}

async function loadedModels(): Promise<string[]> {
  return (await (await fetch(`${server.url}/health`)).json()).loaded_models
}

/** Resident memory of a process, from /proc (Linux). */
function rssBytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m)
  return Number(line![1]) * 1024
}

describe('requests refused before any audio reaches the engine', () => {
  const speech = { bytes: fixture('speech.mp3') }
  const cases: Array<[string, Upload, number, string, string | null]> = [
    ['no file', { fields: { model: WHISPER } }, 400, 'missing_required_parameter', 'file'],
    ['no model', { file: speech }, 400, 'missing_required_parameter', 'model'],
    ['an unknown model', { file: speech, fields: { model: 'nope' } }, 404, 'model_not_found', 'model'],
    ['a chat model', { file: speech, fields: { model: 'chat-tiny' } }, 400, 'model_not_compatible', 'model'],
    ['an embedding model', { file: speech, fields: { model: 'bert-tiny' } }, 400, 'model_not_compatible', 'model'],
    ['an unknown language', { file: speech, fields: { model: WHISPER, language: 'xx' } }, 400, 'invalid_language', 'language'],
    ['a language by name', { file: speech, fields: { model: WHISPER, language: 'German' } }, 400, 'invalid_language', 'language'],
    ['an unknown response_format', { file: speech, fields: { model: WHISPER, response_format: 'docx' } }, 400, 'invalid_value', 'response_format'],
    ['temperature above 1', { file: speech, fields: { model: WHISPER, temperature: '1.5' } }, 400, 'invalid_value', 'temperature'],
    ['temperature not a number', { file: speech, fields: { model: WHISPER, temperature: 'warm' } }, 400, 'invalid_value', 'temperature'],
    ['stream not a boolean', { file: speech, fields: { model: WHISPER, stream: 'sure' } }, 400, 'invalid_value', 'stream'],
    [
      'stream_options without stream',
      { file: speech, fields: { model: WHISPER, 'stream_options[include_usage]': 'true' } },
      400,
      'invalid_value',
      'stream_options',
    ],
    [
      'stream_options that is not JSON',
      { file: speech, fields: { model: WHISPER, stream: 'true', stream_options: 'usage' } },
      400,
      'invalid_value',
      'stream_options',
    ],
    ['an empty file', { file: { bytes: new Uint8Array(0) }, fields: { model: WHISPER } }, 400, 'unsupported_audio_format', 'file'],
    [
      'a truncated MP3',
      { file: { bytes: fixture('speech.mp3').subarray(0, 5000), name: 'speech.mp3', type: 'audio/mpeg' }, fields: { model: WHISPER } },
      400,
      'unsupported_audio_format',
      'file',
    ],
    [
      'a truncated WAV',
      { file: { bytes: fixture('speech-s16.wav').subarray(0, 30000), name: 'a.wav', type: 'audio/wav' }, fields: { model: WHISPER } },
      400,
      'unsupported_audio_format',
      'file',
    ],
    [
      'a PNG named .mp3',
      { file: { bytes: pngFile(), name: 'song.mp3', type: 'audio/mpeg' }, fields: { model: WHISPER } },
      400,
      'unsupported_audio_format',
      'file',
    ],
    [
      'text',
      { file: { bytes: Buffer.from('just some text, not audio at all'), name: 'a.wav' }, fields: { model: WHISPER } },
      400,
      'unsupported_audio_format',
      'file',
    ],
  ]
  it.each(cases)('%s', async (_name, upload, status, code, param) => {
    const res = await translate(upload)
    expect(res.status).toBe(status)
    expect(Object.keys(res.json)).toEqual(['error'])
    expect(res.json.error).toMatchObject({ code, param, type: 'invalid_request_error', message: expect.any(String) })
    expect(res.json.error.message).not.toMatch(/\/tmp\//) // no server paths in messages
    expect(res.headers.get('x-request-id')).toBeTruthy()
  })

  it('a JSON body, and a file sent as a text field', async () => {
    const json = await postJson(server, '/v1/audio/translations', { model: WHISPER, file: 'x' })
    expect(json.status).toBe(400)
    expect(json.json.error.code).toBe('invalid_content_type')
    const textField = new FormData()
    textField.append('model', WHISPER)
    textField.append('file', 'not a file')
    const res = await fetch(`${server.url}/v1/audio/translations`, { method: 'POST', headers: { authorization: `Bearer ${server.apiKey}` }, body: textField })
    expect(res.status).toBe(400)
    expect((await res.json()).error).toMatchObject({ param: 'file' })
  })

  it('none of that loaded the whisper model', async () => {
    expect(await loadedModels()).not.toContain(WHISPER)
    expect(engineProcessIds()).toEqual([])
  })

  it('a whisper model on the chat and embeddings routes is not compatible', async () => {
    const chat = await postJson(server, '/v1/chat/completions', { model: WHISPER, messages: [{ role: 'user', content: 'Hi' }] })
    expect(chat.status).toBe(400)
    expect(chat.json.error).toMatchObject({ code: 'model_not_compatible', param: 'model' })
    const embeddings = await postJson(server, '/v1/embeddings', { model: WHISPER, input: 'Hi' })
    expect(embeddings.status).toBe(400)
    expect(embeddings.json.error).toMatchObject({ code: 'model_not_compatible', param: 'model' })
    const model = (await client.models.retrieve(WHISPER)) as any
    expect(model.capabilities).toEqual(['transcription', 'translation'])
  })
})

describe('through the official openai client', () => {
  it('translates a file stream and a toFile buffer (named misleadingly) to JSON', async () => {
    const fromStream = await client.audio.translations.create({ model: WHISPER, file: createReadStream(join(FIXTURES, 'speech.mp3')) })
    expect(fromStream).toEqual({ text: EXPECTED_TEXT })
    // The name says WAV, the bytes are Ogg Opus: the bytes win.
    const fromBuffer = await client.audio.translations.create({ model: WHISPER, file: await toFile(fixture('speech.opus.ogg'), 'speech.wav') })
    expect(fromBuffer.text).toBe(EXPECTED_TEXT)
  })

  it('answers each response format', async () => {
    const file = () => toFile(fixture('speech.flac'), 'speech.flac')
    const json = await client.audio.translations.create({ model: WHISPER, file: await file(), response_format: 'json' })
    expect(json).toEqual({ text: EXPECTED_TEXT })

    const text = await client.audio.translations.create({ model: WHISPER, file: await file(), response_format: 'text' })
    expect(text).toBe(`${EXPECTED_TEXT}\n`)

    const srt = await client.audio.translations.create({ model: WHISPER, file: await file(), response_format: 'srt' })
    expect(srt).toBe(`1\n00:00:00,000 --> 00:00:02,000\n${EXPECTED_TEXT}\n\n`)

    const vtt = await client.audio.translations.create({ model: WHISPER, file: await file(), response_format: 'vtt' })
    expect(vtt).toBe(`WEBVTT\n\n00:00:00.000 --> 00:00:02.000\n${EXPECTED_TEXT}\n\n`)

    const verbose = (await client.audio.translations.create({ model: WHISPER, file: await file(), response_format: 'verbose_json' })) as any
    expect(verbose).toMatchObject({ task: 'translate', language: 'english', text: EXPECTED_TEXT })
    expect(verbose.duration).toBeCloseTo(SPEECH_SECONDS, 2)
    expect(verbose.segments).toEqual([
      {
        id: 0,
        seek: 0,
        start: 0,
        end: 2,
        text: ` ${EXPECTED_TEXT}`,
        tokens: expect.any(Array),
        temperature: 0,
        avg_logprob: expect.any(Number),
        compression_ratio: expect.any(Number),
        no_speech_prob: expect.any(Number),
      },
    ])
    // The engine's own numbers: one token id per piece of " hello world.", and real probabilities.
    const [segment] = verbose.segments
    expect(segment.tokens).toHaveLength(3)
    expect(segment.tokens.every((id: number) => Number.isInteger(id) && id >= 0)).toBe(true)
    expect(segment.avg_logprob).toBeLessThan(0)
    expect(segment.avg_logprob).toBeGreaterThan(-1)
    expect(segment.no_speech_prob).toBeGreaterThanOrEqual(0)
    expect(segment.no_speech_prob).toBeLessThanOrEqual(1)
  })

  it('sends the raw content types for text formats', async () => {
    for (const [format, type] of [
      ['text', 'text/plain'],
      ['srt', 'application/x-subrip'],
      ['vtt', 'text/vtt'],
      ['json', 'application/json'],
    ]) {
      const res = await translate({ file: { bytes: fixture('speech.webm') }, fields: { model: WHISPER, response_format: format! } })
      expect(res.status).toBe(200)
      expect(res.headers.get('content-type')).toBe(`${type}; charset=utf-8`)
    }
  })

  it('takes a language hint, a prompt, a temperature and timestamp_granularities[]', async () => {
    const german = (await client.audio.translations.create({
      model: WHISPER,
      file: await toFile(fixture('speech.m4a'), 'a.m4a'),
      response_format: 'verbose_json',
      ...({ language: 'de', timestamp_granularities: ['segment'] } as object),
    })) as any
    expect(german.language).toBe('german')
    expect(german.text).toBe(EXPECTED_TEXT)

    // The random model's answers shift with a prompt or sampling; the request must just succeed.
    const prompted = await client.audio.translations.create({ model: WHISPER, file: await toFile(fixture('speech.m4a'), 'a.m4a'), prompt: 'Zoë and Łukasz.' })
    expect(typeof prompted.text).toBe('string')
    const warm = await client.audio.translations.create({ model: WHISPER, file: await toFile(fixture('speech.m4a'), 'a.m4a'), temperature: 0.5 })
    expect(typeof warm.text).toBe('string')
  })

  it('is deterministic by default', async () => {
    const ask = () => translate({ file: { bytes: fixture('speech-44k-stereo.wav') }, fields: { model: WHISPER, response_format: 'verbose_json' } })
    const [a, b] = [await ask(), await ask()]
    expect(a.status).toBe(200)
    expect(b.text).toBe(a.text)
  })
})

describe('every accepted format, found from the bytes', () => {
  it.each(FIXTURE_NAMES)('%s', async (name) => {
    const res = await translate({ file: { bytes: fixture(name) }, fields: { model: WHISPER, response_format: 'verbose_json' } })
    expect(res.status).toBe(200)
    expect(res.json.text).toBe(EXPECTED_TEXT)
    // The model does not listen, so the decoded length is what shows the audio was read right.
    expect(res.json.duration).toBeGreaterThan(SPEECH_SECONDS - 0.1)
    expect(res.json.duration).toBeLessThan(SPEECH_SECONDS + 0.1)
  })
})

describe('streaming', () => {
  it('answers errors before the stream as plain JSON', async () => {
    const res = await translate({ file: { bytes: new Uint8Array(10) }, fields: { model: WHISPER, stream: 'true' } })
    expect(res.status).toBe(400)
    expect(res.json.error.code).toBe('unsupported_audio_format')
  })
})

describe('upload size', () => {
  /** Sends a multipart body of `fileBytes` by raw HTTP (the whole of it, unless the server closes first). */
  function rawUpload(fileBytes: number, chunked: boolean): Promise<{ status: number; body: string }> {
    const boundary = 'hearth-test-boundary'
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\n${WHISPER}\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.mp3"\r\nContent-Type: audio/mpeg\r\n\r\n`,
    )
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`)
    const block = Buffer.alloc(1024 * 1024, 0x55)
    return new Promise((resolve, reject) => {
      const url = new URL(`${server.url}/v1/audio/translations`)
      const headers: Record<string, string | number> = {
        authorization: `Bearer ${server.apiKey}`,
        'content-type': `multipart/form-data; boundary=${boundary}`,
      }
      if (!chunked) headers['content-length'] = head.length + fileBytes + tail.length
      const req = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers }, (res) => {
        let body = ''
        res.on('data', (d: Buffer) => (body += d.toString()))
        res.on('end', () => resolve({ status: res.statusCode!, body }))
      })
      req.on('error', reject)
      req.write(head)
      let sent = 0
      const pump = () => {
        while (sent < fileBytes) {
          const piece = block.subarray(0, Math.min(block.length, fileBytes - sent))
          sent += piece.length
          if (!req.write(piece)) return void req.once('drain', pump)
        }
        req.end(tail)
      }
      pump()
    })
  }

  it('refuses 26 MB with 413 file_too_large without the server taking it into memory', async () => {
    const pid = server.process.pid!
    await rawUpload(1024, false) // warm the path up (a 400: the bytes are not audio)
    const before = rssBytes(pid)
    const res = await rawUpload(26 * 1024 * 1024, false)
    const after = rssBytes(pid)
    expect(res.status).toBe(413)
    expect(JSON.parse(res.body).error).toMatchObject({ code: 'file_too_large', type: 'invalid_request_error', param: 'file' })
    expect(after - before).toBeLessThan(8 * 1024 * 1024)
    console.log(`26 MB upload (Content-Length): server RSS ${((after - before) / 1048576).toFixed(1)} MiB`)
  })

  it('refuses it as it passes the limit when no length is announced (chunked)', async () => {
    const pid = server.process.pid!
    const before = rssBytes(pid)
    const res = await rawUpload(26 * 1024 * 1024, true)
    const after = rssBytes(pid)
    expect(res.status).toBe(413)
    expect(JSON.parse(res.body).error.code).toBe('file_too_large')
    // At most the limit itself is ever held, never the whole upload.
    expect(after - before).toBeLessThan(MAX_AUDIO_FILE_BYTES + 8 * 1024 * 1024)
    console.log(`26 MB upload (chunked): server RSS ${((after - before) / 1048576).toFixed(1)} MiB`)
  })

  it('the official client gets the 413 too, and a file just under the limit is read', async () => {
    const big = Buffer.alloc(26 * 1024 * 1024, 0x55)
    await expect(client.audio.translations.create({ model: WHISPER, file: await toFile(big, 'big.mp3') })).rejects.toMatchObject({
      status: 413,
      error: { code: 'file_too_large' },
    })
    // Just under: read in full, then refused for what it is (not audio), not for its size.
    const under = await translate({ file: { bytes: Buffer.alloc(MAX_AUDIO_FILE_BYTES, 0x55) }, fields: { model: WHISPER } })
    expect(under.status).toBe(400)
    expect(under.json.error.code).toBe('unsupported_audio_format')
  })

  it('keeps serving after all that', async () => {
    expect((await client.audio.translations.create({ model: WHISPER, file: await toFile(fixture('speech.mpga'), 'a') })).text).toBe(EXPECTED_TEXT)
  })
})

describe('long audio', () => {
  it('50 minutes of MP3: streams the first segment while working, with bounded memory; a client that leaves frees the model', async () => {
    // Concatenated MPEG audio frames are a valid MP3 stream: 1270 × 2.37 s ≈ 50 minutes, ≈ 12 MB.
    const long = Buffer.concat(Array.from({ length: 1270 }, () => fixture('speech.mpga')))
    // A decode worker retires after 30 s idle and a new one costs tens of MiB whatever the audio
    // (seen on a loaded CI machine): warm one now so the peak below is the audio's alone.
    expect((await client.audio.translations.create({ model: WHISPER, file: await toFile(fixture('speech.mpga'), 'warm.mp3') })).text).toBe(EXPECTED_TEXT)
    const serverPid = server.process.pid!
    const serverBefore = rssBytes(serverPid)
    let serverPeak = serverBefore
    let enginePeak = 0
    const enginesBefore = engineProcessIds()
    expect(enginesBefore).toHaveLength(1) // loaded and idle since the tests above
    const engineBefore = rssBytes(enginesBefore[0]!)
    const sampler = setInterval(() => {
      try {
        serverPeak = Math.max(serverPeak, rssBytes(serverPid))
        for (const pid of engineProcessIds()) enginePeak = Math.max(enginePeak, rssBytes(pid))
      } catch {
        // a process went away between listing and reading
      }
    }, 100)
    try {
      // The first piece is short (30 s), so its segment streams at once; the job is still on its
      // next piece when the client leaves, and the engine cannot stop inside a piece.
      const { status, events } = await streamTranslate({ file: { bytes: long, name: 'long.mp3' }, fields: { model: WHISPER } }, 1)
      expect(status).toBe(200)
      expect(JSON.parse(events[0]!)).toEqual({ type: 'transcript.text.delta', delta: EXPECTED_TEXT })
    } finally {
      clearInterval(sampler)
    }
    const decodedBytes = 50 * 60 * 16000 * 4
    console.log(
      `50-minute MP3: server RSS peak +${((serverPeak - serverBefore) / 1048576).toFixed(0)} MiB, ` +
        `engine RSS peak +${((enginePeak - engineBefore) / 1048576).toFixed(0)} MiB over its idle ${(engineBefore / 1048576).toFixed(0)} MiB ` +
        `(the decoded audio is ${(decodedBytes / 1048576).toFixed(0)} MiB)`,
    )
    // The server never holds the decoded samples: the decoder writes them to the scratch file a few
    // seconds at a time; the engine reads pieces. Measured +73–97 MiB: the 12 MB upload, its copy in
    // the decode worker, and decoded blocks the worker's collector has yet to reclaim (V8 lets about
    // 64 MiB of dead buffers pile up before collecting), so the bound leaves room for that slack.
    expect(serverPeak - serverBefore).toBeLessThan(decodedBytes * 0.75)
    expect(enginePeak - engineBefore).toBeLessThan(decodedBytes / 2)

    const started = Date.now()
    const next = await client.audio.translations.create({ model: WHISPER, file: await toFile(fixture('speech.mp3'), 'a.mp3') })
    expect(next.text).toBe(EXPECTED_TEXT)
    // The job the client left ended with its piece, or was killed after the grace period (5 s)
    // where the piece ran longer (the native engine often finishes a tiny model's piece sooner):
    // either way the next request is not kept waiting behind it.
    expect(Date.now() - started).toBeLessThan(30_000)
    expect(server.output()).toMatch(/POST \/v1\/audio\/translations 200 \(client closed\).*model=whisper-tiny/)
  }, 180_000)
})
