/**
 * Embeddings end to end: the real server process, a tiny generated BERT (mean pooling, our own
 * WordPiece vocabulary), the official openai client and raw HTTP; then the shared random BERT with
 * the real bge vocabulary where ../shared/fixtures is present.
 */
import { engineProcessIds as engineProcessIdsOf } from '../support/process-stats.ts'
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gguf } from '@huggingface/gguf'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { describeIf } from '../support/skips.ts'
import { postJson, startTestServer, type TestServer } from '../support/server-process.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { writeTinyBert, writeTinyLlama, writeTinyWhisper } from '../support/tiny-models.ts'

const BERT = 'tiny-bert'
const CONTEXT = 512

let server: TestServer
let client: OpenAI
let bertPath: string

beforeAll(async () => {
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-embeddings-'))
  bertPath = join(modelsDir, 'tiny-bert.gguf')
  writeTinyBert(bertPath, { contextLength: CONTEXT })
  writeTinyLlama(join(modelsDir, 'tiny-chat.gguf'), { contextLength: 512 })
  writeTinyWhisper(join(modelsDir, 'ggml-tiny-whisper.bin'))
  writeFileSync(
    join(modelsDir, 'models.json'),
    JSON.stringify({
      models: [
        { id: BERT, file: 'tiny-bert.gguf' },
        { id: 'tiny-chat', file: 'tiny-chat.gguf' },
        { id: 'tiny-whisper', file: 'ggml-tiny-whisper.bin', kind: 'speech' },
      ],
    }),
  )
  server = await startTestServer({ modelsDir })
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey, maxRetries: 0 })
})

afterAll(async () => {
  await server?.stop()
})

const embed = (body: object) => postJson(server, '/v1/embeddings', { model: BERT, ...body })

/** Engine processes of the test server, to see that one survived. */
function engineProcessIds(): number[] {
  return engineProcessIdsOf(server.process.pid)
}

function norm(v: number[]): number {
  return Math.sqrt(v.reduce((s, x) => s + x * x, 0))
}

function maxDiff(a: number[], b: number[]): number {
  expect(a).toHaveLength(b.length)
  return Math.max(...a.map((x, i) => Math.abs(x - b[i]!)))
}

/** Little-endian float32 bytes in base64, decoded by hand (not by the client under test). */
function decodeBase64(s: string): number[] {
  const bytes = Buffer.from(s, 'base64')
  return Array.from({ length: bytes.length / 4 }, (_, i) => bytes.readFloatLE(i * 4))
}

function expectError(res: { status: number; json: any }, status: number, code: string, param: string | null) {
  expect({ status: res.status, code: res.json?.error?.code, param: res.json?.error?.param }).toEqual({ status, code, param })
  expect(Object.keys(res.json)).toEqual(['error'])
  expect(res.json.error.type).toBe('invalid_request_error')
}

const SENTENCES = [
  'hello world',
  'the cat sat on the mat',
  'quick brown foxes jumped',
  'hello world',
  'a much longer sentence about rivers, mountains and the sea, with numbers 1 2 3 and punctuation!',
  'x',
]

describe('POST /v1/embeddings (tiny generated BERT)', () => {
  it('embeds a string through the official client: one L2-normalised vector, real token counts', async () => {
    const res = await client.embeddings.create({ model: BERT, input: 'hello world', encoding_format: 'float' })
    expect(res.object).toBe('list')
    expect(res.model).toBe(BERT)
    expect(res.data).toHaveLength(1)
    expect(res.data[0]).toMatchObject({ object: 'embedding', index: 0 })
    const vector = res.data[0]!.embedding
    expect(vector).toHaveLength(32)
    expect(norm(vector)).toBeCloseTo(1, 5)
    // [CLS] hello world [SEP]: both words are whole pieces of the vocabulary.
    expect(res.usage).toEqual({ prompt_tokens: 4, total_tokens: 4 })
  })

  it('counts word pieces and special tokens as the model processes them', async () => {
    // "zyx" is not a word of the vocabulary: ▁z + ##y + ##x, between [CLS] and [SEP].
    const res = await embed({ input: ['zyx', 'hello'] })
    expect(res.status).toBe(200)
    expect(res.json.usage).toEqual({ prompt_tokens: 5 + 3, total_tokens: 8 })
  })

  it('gives the same numbers on the client default (base64) path as with "float"', async () => {
    const asFloat = await client.embeddings.create({ model: BERT, input: SENTENCES, encoding_format: 'float' })
    const asDefault = await client.embeddings.create({ model: BERT, input: SENTENCES })
    expect(asDefault.data.map((d) => d.embedding)).toEqual(asFloat.data.map((d) => d.embedding))
    expect(asDefault.usage).toEqual(asFloat.usage)
  })

  it('answers float by default over raw HTTP, and base64 as little-endian float32 when asked', async () => {
    const plain = await embed({ input: 'hello world' })
    expect(plain.status).toBe(200)
    expect(Array.isArray(plain.json.data[0].embedding)).toBe(true)
    const b64 = await embed({ input: 'hello world', encoding_format: 'base64' })
    expect(typeof b64.json.data[0].embedding).toBe('string')
    expect(decodeBase64(b64.json.data[0].embedding)).toEqual(plain.json.data[0].embedding)
  })

  it('returns data in input order with index, each vector the one the text gets alone, usage summed', async () => {
    const alone: any[] = []
    for (const text of SENTENCES) alone.push((await embed({ input: text })).json)
    const batch = await embed({ input: SENTENCES })
    expect(batch.status).toBe(200)
    expect(batch.json.data.map((d: any) => d.index)).toEqual(SENTENCES.map((_, i) => i))
    SENTENCES.forEach((_, i) => {
      expect(maxDiff(batch.json.data[i].embedding, alone[i].data[0].embedding)).toBeLessThanOrEqual(1e-5)
      expect(norm(batch.json.data[i].embedding)).toBeCloseTo(1, 5)
    })
    const sum = alone.reduce((s, r) => s + r.usage.prompt_tokens, 0)
    expect(batch.json.usage).toEqual({ prompt_tokens: sum, total_tokens: sum })
    // Different texts, different vectors; the same text twice, the same vector.
    expect(maxDiff(batch.json.data[0].embedding, batch.json.data[1].embedding)).toBeGreaterThan(1e-3)
    expect(batch.json.data[3].embedding).toEqual(batch.json.data[0].embedding)
  })

  it('gives the same vector every time, inside batches of any size and neighbours', async () => {
    const target = 'the cat sat on the mat'
    const first = (await embed({ input: target })).json.data[0].embedding
    for (const size of [2, 7, 40]) {
      const input = Array.from({ length: size }, (_, i) => `filler number ${i} of ${size}, words and more words`)
      input[Math.floor(size / 2)] = target
      const res = await embed({ input })
      expect(maxDiff(res.json.data[Math.floor(size / 2)].embedding, first)).toBeLessThanOrEqual(1e-5)
    }
    expect((await embed({ input: target })).json.data[0].embedding).toEqual(first)
  })

  it('truncates to `dimensions` and normalises again; refuses more than the model has', async () => {
    const full = (await embed({ input: 'hello world' })).json.data[0].embedding as number[]
    const short = await client.embeddings.create({ model: BERT, input: 'hello world', dimensions: 8, encoding_format: 'float' })
    const vector = short.data[0]!.embedding
    expect(vector).toHaveLength(8)
    expect(norm(vector)).toBeCloseTo(1, 5)
    const head = full.slice(0, 8)
    expect(
      maxDiff(
        vector,
        head.map((x) => x / norm(head)),
      ),
    ).toBeLessThanOrEqual(1e-6)
    expect((await embed({ input: 'hello world', dimensions: 32 })).json.data[0].embedding).toEqual(full)

    const tooMany = await embed({ input: 'hello world', dimensions: 33 })
    expectError(tooMany, 400, 'invalid_value', 'dimensions')
    expect(tooMany.json.error.message).toContain('32')
    expectError(await embed({ input: 'hello world', dimensions: 0 }), 400, 'invalid_value', 'dimensions')
    expectError(await embed({ input: 'hello world', dimensions: 2.5 }), 400, 'invalid_value', 'dimensions')
  })

  it('embeds token id arrays like the text they spell; ids outside the vocabulary are refused', async () => {
    const tokens = ((await gguf(bertPath, { allowLocalFile: true })).metadata as Record<string, unknown>)['tokenizer.ggml.tokens'] as string[]
    const id = (piece: string) => tokens.indexOf(piece)
    const hello = [id('\u2581hello'), id('\u2581world')]
    const dog = [id('\u2581the'), id('\u2581dog')]
    expect([...hello, ...dog].every((i) => i > 4)).toBe(true)

    const text = await embed({ input: ['hello world', 'the dog'] })
    const nested = await embed({ input: [hello, dog] })
    expect(nested.status).toBe(200)
    expect(nested.json.data.map((d: any) => d.embedding)).toEqual(text.json.data.map((d: any) => d.embedding))
    expect(nested.json.usage).toEqual(text.json.usage)
    const flat = await embed({ input: hello })
    expect(flat.json.data).toHaveLength(1)
    expect(flat.json.data[0].embedding).toEqual(text.json.data[0].embedding)

    const outside = await embed({ input: [hello, [5, tokens.length]] })
    expectError(outside, 400, 'invalid_value', 'input[1][1]')
    expect(outside.json.error.message).toContain(String(tokens.length))
    expectError(await embed({ input: [5, 100000] }), 400, 'invalid_value', 'input[1]')
    expectError(await embed({ input: [5, -1] }), 400, 'invalid_value', 'input[1]')
    expectError(await embed({ input: [[5], [1.5]] }), 400, 'invalid_value', 'input[1][0]')
    expectError(await embed({ input: [[5], []] }), 400, 'invalid_value', 'input[1]')
    expectError(await embed({ input: [[5], 'text'] }), 400, 'invalid_value', 'input[1]')
  })

  it('refuses an input longer than the model allows, naming it, and never truncates', async () => {
    const words = (n: number) => Array.from({ length: n }, () => 'the').join(' ')
    // Every "the" is one token; [CLS] and [SEP] make up the rest.
    const fits = await embed({ input: words(CONTEXT - 2) })
    expect(fits.status).toBe(200)
    expect(fits.json.usage.prompt_tokens).toBe(CONTEXT)

    const over = await embed({ input: ['hello', words(CONTEXT - 1)] })
    expectError(over, 400, 'context_length_exceeded', 'input[1]')
    expect(over.json.error.message).toContain(String(CONTEXT))
    expect(over.json.error.message).toContain(String(CONTEXT + 1))
    expectError(await embed({ input: words(5000) }), 400, 'context_length_exceeded', 'input')
    // Named by its place in the whole request, however the work is split.
    const late = Array.from({ length: 300 }, (_, i) => (i === 290 ? words(CONTEXT) : `text ${i}`))
    expectError(await embed({ input: late }), 400, 'context_length_exceeded', 'input[290]')
    expectError(await embed({ input: [Array.from({ length: CONTEXT }, () => 5)] }), 400, 'context_length_exceeded', 'input[0]')

    // The engine is still there and still right.
    expect((await embed({ input: 'hello world' })).json.usage.prompt_tokens).toBe(4)
  })

  it('refuses chat-only and speech models with model_not_compatible, unknown ones with 404', async () => {
    for (const model of ['tiny-chat', 'tiny-whisper']) {
      const res = await postJson(server, '/v1/embeddings', { model, input: 'hello' })
      expectError(res, 400, 'model_not_compatible', 'model')
      expect(res.json.error.message).toContain(model)
    }
    expectError(await postJson(server, '/v1/embeddings', { model: 'nope', input: 'hello' }), 404, 'model_not_found', 'model')
  })

  it('refuses bad fields with a 400 naming them', async () => {
    const cases: Array<[object, string, string]> = [
      [{ input: '' }, 'input', 'invalid_value'],
      [{ input: [] }, 'input', 'invalid_value'],
      [{ input: ['ok', ''] }, 'input[1]', 'invalid_value'],
      [{ input: Array.from({ length: 2049 }, () => 'a') }, 'input', 'invalid_value'],
      [{ input: 42 }, 'input', 'invalid_value'],
      [{ input: null }, 'input', 'invalid_value'],
      [{ input: { text: 'hi' } }, 'input', 'invalid_value'],
      [{ input: ['ok', 7] }, 'input[1]', 'invalid_value'],
      [{ input: [true] }, 'input[0]', 'invalid_value'],
      [{}, 'input', 'missing_required_parameter'],
      [{ input: 'hi', encoding_format: 'hex' }, 'encoding_format', 'invalid_value'],
      [{ input: 'hi', dimensions: '8' }, 'dimensions', 'invalid_value'],
    ]
    for (const [body, param, code] of cases) {
      expectError(await embed(body), 400, code, param)
    }
    expectError(await postJson(server, '/v1/embeddings', { input: 'hi' }), 400, 'missing_required_parameter', 'model')
    // Fields we do not use are ignored, as the contract says.
    expect((await embed({ input: 'hi', user: 'someone', extra: true })).status).toBe(200)
  })

  it('keeps embedding models out of chat', async () => {
    const res = await postJson(server, '/v1/chat/completions', { model: BERT, messages: [{ role: 'user', content: 'hi' }] })
    expectError(res, 400, 'model_not_compatible', 'model')
  })

  it('finishes 2048 inputs in one request while another model keeps answering', async () => {
    await postJson(server, '/v1/chat/completions', { model: 'tiny-chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 })
    const input = Array.from({ length: 2048 }, (_, i) => `sentence ${i} about the small river near the old town, where people walk and talk every day`)
    const started = performance.now()
    let embeddedAt = 0
    const big = embed({ input }).then((res) => {
      embeddedAt = performance.now()
      return res
    })
    await new Promise((r) => setTimeout(r, 150))
    const chat = await postJson(server, '/v1/chat/completions', { model: 'tiny-chat', messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 })
    const chattedAt = performance.now()
    const res = await big
    expect(chat.status).toBe(200)
    expect(res.status).toBe(200)
    expect(res.json.data).toHaveLength(2048)
    expect(res.json.data[2047].index).toBe(2047)
    expect(chattedAt).toBeLessThan(embeddedAt)
    console.log(
      `2048 inputs: ${Math.round(embeddedAt - started)} ms (${res.json.usage.prompt_tokens} tokens); ` +
        `chat on another model answered ${Math.round(chattedAt - started)} ms after the request started`,
    )
  })

  it('drops the rest of a big request when its client goes away', async () => {
    // About twice the tokens of the request above: well over a second of work on one thread.
    const sentence = 'a long sentence about the small river near the old town where people walk and talk every day'
    const input = Array.from({ length: 2048 }, (_, i) => `${i} ${sentence} ${sentence}`)
    const engines = engineProcessIds()
    expect(engines.length).toBeGreaterThan(0)
    const controller = new AbortController()
    const big = fetch(`${server.url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${server.apiKey}` },
      body: JSON.stringify({ model: BERT, input }),
      signal: controller.signal,
    }).catch(() => undefined)
    await new Promise((r) => setTimeout(r, 400))
    controller.abort()
    const abortedAt = performance.now()
    const next = await embed({ input: 'hello world' })
    const waited = performance.now() - abortedAt
    await big
    expect(next.status).toBe(200)
    console.log(`after the abort the next request answered in ${Math.round(waited)} ms`)
    // The engine stops after the part of 256 inputs it is on (about 0.1 s), not at the end.
    expect(waited).toBeLessThan(700)
    // Cancelled by no longer sending parts, not by a crash and a reload.
    expect(engineProcessIds()).toEqual(engines)
  })
})

const fixture = sharedFixture('models/bert-tiny-random-bge-vocab.gguf')

describeIf(fixture, 'needs the shared fixtures (../shared/fixtures)')('bert-tiny-random-bge-vocab (shared fixture)', () => {
  let fixtureServer: TestServer
  let fixtureClient: OpenAI
  const model = 'bert-tiny-random-bge-vocab'

  beforeAll(async () => {
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-bge-'))
    copyFileSync(fixture!, join(modelsDir, `${model}.gguf`))
    fixtureServer = await startTestServer({ modelsDir })
    fixtureClient = new OpenAI({ baseURL: `${fixtureServer.url}/v1`, apiKey: fixtureServer.apiKey, maxRetries: 0 })
  })
  afterAll(async () => {
    await fixtureServer?.stop()
  })

  it('is listed as an embedding model with its trained context', async () => {
    const listed = (await fixtureClient.models.retrieve(model)) as any
    expect(listed).toMatchObject({ context_length: 512, capabilities: ['embeddings'] })
  })

  it('gives the same numbers through the client default (base64) and "float"', async () => {
    const input = ['The quick brown fox jumps over the lazy dog.', 'hello world', 'Embeddings in a local server.']
    const viaDefault = await fixtureClient.embeddings.create({ model, input })
    const viaFloat = await fixtureClient.embeddings.create({ model, input, encoding_format: 'float' })
    expect(viaDefault.data.map((d) => d.embedding)).toEqual(viaFloat.data.map((d) => d.embedding))
    for (const d of viaFloat.data) {
      expect(d.embedding).toHaveLength(32)
      expect(norm(d.embedding)).toBeCloseTo(1, 5)
    }
    expect(viaFloat.data.map((d) => d.index)).toEqual([0, 1, 2])
    // bge's WordPiece: [CLS] hello world [SEP].
    const single = await fixtureClient.embeddings.create({ model, input: 'hello world' })
    expect(single.usage).toEqual({ prompt_tokens: 4, total_tokens: 4 })
    expect(single.data[0]!.embedding).toEqual(viaFloat.data[1]!.embedding)
  })
})
