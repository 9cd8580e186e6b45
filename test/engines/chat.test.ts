/**
 * Text chat end to end: the real server process, a tiny generated llama, the official openai client
 * and raw HTTP.
 */
import { engineProcessIds as engineProcessIdsOf } from '../support/process-stats.ts'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createParser } from 'eventsource-parser'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { itIf } from '../support/skips.ts'
import { postJson, startTestServer, type TestServer } from '../support/server-process.ts'
import { writeTinyLlama } from '../support/tiny-models.ts'
import { llamaBuild, startUpstreamLlamaServer } from '../support/upstream-servers.ts'

let modelsDir: string
let server: TestServer
let client: OpenAI

const hello = [{ role: 'user' as const, content: 'Once upon a time' }]

beforeAll(async () => {
  modelsDir = mkdtempSync(join(tmpdir(), 'hearth-chat-'))
  writeTinyLlama(join(modelsDir, 'tiny-chat.gguf'), { contextLength: 512 })
  // A long context makes generations long enough to interrupt.
  writeTinyLlama(join(modelsDir, 'long.gguf'), { contextLength: 32768 })
  writeFileSync(
    join(modelsDir, 'models.json'),
    JSON.stringify({
      models: [
        { id: 'org/tiny:q8', file: 'tiny-chat.gguf', max_completion_tokens: 100, pricing: { prompt: '0.00000150', completion: '0.00000300' } },
        { id: 'long', file: 'long.gguf' },
      ],
    }),
  )
  server = await startTestServer({ modelsDir })
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey, maxRetries: 0 })
})

afterAll(async () => {
  await server?.stop()
})

/** Raw SSE: every `data:` payload, in order. */
async function streamEvents(body: object, init: { abortAfter?: number; onEvent?: () => void } = {}): Promise<{ status: number; events: string[] }> {
  const controller = new AbortController()
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${server.apiKey}` },
    body: JSON.stringify({ ...body, stream: true }),
    signal: controller.signal,
  })
  const events: string[] = []
  const parser = createParser({
    onEvent: (e) => {
      events.push(e.data)
      init.onEvent?.()
    },
  })
  const decoder = new TextDecoder()
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      parser.feed(decoder.decode(chunk, { stream: true }))
      if (init.abortAfter !== undefined && events.length >= init.abortAfter) {
        controller.abort()
        break
      }
    }
  } catch (e) {
    if ((e as Error).name !== 'AbortError') throw e
  }
  return { status: res.status, events }
}

/** The engine processes of a test server. */
function engineProcessIds(of: TestServer = server): number[] {
  return engineProcessIdsOf(of.process.pid)
}

describe('GET /v1/models', () => {
  it('lists every model with the contract fields without loading any', async () => {
    const list = await client.models.list()
    const models = list.data as any[]
    expect(models.map((m) => m.id).sort()).toEqual(['long', 'org/tiny:q8'])
    const tiny = models.find((m) => m.id === 'org/tiny:q8')
    expect(tiny).toMatchObject({
      object: 'model',
      owned_by: 'local',
      context_length: 512,
      max_completion_tokens: 100,
      pricing: { prompt: '0.00000150', completion: '0.00000300' },
      capabilities: ['chat'],
      state: 'available',
    })
    expect(Number.isInteger(tiny.created)).toBe(true)
    const long = models.find((m) => m.id === 'long')
    expect(long.pricing).toEqual({ prompt: '0.00000000', completion: '0.00000000' })
    expect(engineProcessIds()).toEqual([])
  })

  it('gets one model by an id holding / and :, and 404s an unknown id', async () => {
    const model = (await client.models.retrieve('org/tiny:q8')) as any
    expect(model.id).toBe('org/tiny:q8')
    const res = await fetch(`${server.url}/v1/models/no/such:model`, { headers: { authorization: `Bearer ${server.apiKey}` } })
    expect(res.status).toBe(404)
    expect(await res.json()).toEqual({
      error: { message: expect.stringContaining('no/such:model'), type: 'invalid_request_error', param: 'model', code: 'model_not_found' },
    })
  })
})

describe('POST /v1/chat/completions', () => {
  it('answers through the official client, with usage and timings, and shows the model loaded', async () => {
    const completion = await client.chat.completions.create({ model: 'org/tiny:q8', messages: hello, max_tokens: 12 })
    expect(completion.id).toMatch(/^chatcmpl-/)
    expect(completion.object).toBe('chat.completion')
    expect(completion.model).toBe('org/tiny:q8')
    expect(completion.choices[0]!.message.role).toBe('assistant')
    expect(completion.choices[0]!.message.content!.length).toBeGreaterThan(0)
    expect(completion.choices[0]!.finish_reason).toBe('length')
    expect(completion.usage!.completion_tokens).toBe(12)
    expect(completion.usage!.total_tokens).toBe(completion.usage!.prompt_tokens + 12)
    const timings = (completion as any).timings
    expect(timings.predicted_per_second).toBeGreaterThan(0)
    // Speculative decoding is on by default: what it drafted and kept is counted beside the rates.
    expect(Object.keys(timings).sort()).toEqual([
      'draft_acceptance_rate',
      'draft_n',
      'draft_n_accepted',
      'draft_paused_n',
      'draft_steps',
      'predicted_ms',
      'predicted_per_second',
      'prompt_ms',
      'prompt_per_second',
    ])
    expect(timings.draft_n_accepted).toBeLessThanOrEqual(timings.draft_n)
    const model = (await client.models.retrieve('org/tiny:q8')) as any
    expect(model.state).toBe('loaded')
    expect(engineProcessIds()).toHaveLength(1)
  })

  itIf(llamaBuild, 'needs llama.cpp built here (npm run build:engines)')('counts prompt tokens exactly as upstream llama-server does', async () => {
    const messages = [
      { role: 'system' as const, content: 'You tell short stories.' },
      { role: 'user' as const, content: 'Tell me about a little girl and her dog.' },
    ]
    const completion = await client.chat.completions.create({ model: 'org/tiny:q8', messages, max_tokens: 1 })
    const upstream = await startUpstreamLlamaServer(['--model', join(modelsDir, 'tiny-chat.gguf'), '--ctx-size', '512', '--threads', '1', '--parallel', '1'])
    try {
      const res = await fetch(`${upstream.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages, max_tokens: 1, temperature: 0 }),
      })
      const direct = await res.json()
      expect(direct.timings.prompt_n).toBe(direct.usage.prompt_tokens)
      expect(completion.usage!.prompt_tokens).toBe(direct.usage.prompt_tokens)
    } finally {
      await upstream.stop()
    }
  })

  it('is greedy and deterministic at temperature 0 (the default), streamed or not', async () => {
    const a = await client.chat.completions.create({ model: 'org/tiny:q8', messages: hello, max_tokens: 40, temperature: 0 })
    const b = await client.chat.completions.create({ model: 'org/tiny:q8', messages: hello, max_tokens: 40 })
    const stream = await client.chat.completions.create({ model: 'org/tiny:q8', messages: hello, max_tokens: 40, stream: true })
    let streamed = ''
    for await (const chunk of stream) streamed += chunk.choices[0]?.delta.content ?? ''
    expect(b.choices[0]!.message.content).toBe(a.choices[0]!.message.content)
    expect(streamed).toBe(a.choices[0]!.message.content)
  })

  it('streams exactly as the contract says: role first, content, finish, usage chunk, [DONE]', async () => {
    const { status, events } = await streamEvents({ model: 'org/tiny:q8', messages: hello, max_tokens: 8, stream_options: { include_usage: true } })
    expect(status).toBe(200)
    expect(events.at(-1)).toBe('[DONE]')
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e))
    const ids = new Set(chunks.map((c) => c.id))
    expect(ids.size).toBe(1)
    expect(chunks.every((c) => c.object === 'chat.completion.chunk')).toBe(true)
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' })
    expect(chunks.slice(1).every((c) => c.choices.length === 0 || c.choices[0].delta.role === undefined)).toBe(true)
    const usageChunk = chunks.at(-1)
    expect(usageChunk.choices).toEqual([])
    expect(usageChunk.usage.completion_tokens).toBe(8)
    const finish = chunks.at(-2)
    expect(finish.choices[0]).toMatchObject({ delta: {}, finish_reason: 'length' })
    expect(finish.timings.predicted_ms).toBeGreaterThanOrEqual(0)
    // With include_usage, every chunk but the last carries usage: null.
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true)
    expect(chunks.slice(1, -2).every((c) => typeof c.choices[0].delta.content === 'string' && c.choices[0].finish_reason === null)).toBe(true)
  })

  it('ends at a stop sequence without any of it in the text, streamed or not', async () => {
    const free = await client.chat.completions.create({ model: 'org/tiny:q8', messages: hello, max_tokens: 60 })
    const text = free.choices[0]!.message.content!
    // A stop made of two fragments from the middle of the real output, so it spans tokens.
    const stop = text.slice(20, 26)
    const expected = text.slice(0, text.indexOf(stop))
    const stopped = await client.chat.completions.create({ model: 'org/tiny:q8', messages: hello, max_tokens: 60, stop: [stop, 'zzzz'] })
    expect(stopped.choices[0]!.message.content).toBe(expected)
    expect(stopped.choices[0]!.finish_reason).toBe('stop')

    const { events } = await streamEvents({ model: 'org/tiny:q8', messages: hello, max_tokens: 60, stop })
    const deltas = events.slice(0, -1).map((e) => JSON.parse(e).choices[0])
    const streamed = deltas.map((c) => c.delta.content ?? '').join('')
    expect(streamed).toBe(expected)
    expect(deltas.at(-1).finish_reason).toBe('stop')
    // No piece of the stop ever went out, not even a prefix later taken back.
    expect(streamed + stop).toBe(text.slice(0, expected.length + stop.length))
  })

  it('runs to the model limit without max_tokens and reports length', async () => {
    const completion = await client.chat.completions.create({ model: 'org/tiny:q8', messages: hello })
    expect(completion.choices[0]!.finish_reason).toBe('length')
    expect(completion.usage!.completion_tokens).toBe(100)
  })

  it('accepts max_completion_tokens, developer messages and text parts', async () => {
    const completion = await client.chat.completions.create({
      // top_k is ours (the contract's), not in the client's types.
      ...({ top_k: 10 } as object),
      model: 'org/tiny:q8',
      messages: [
        { role: 'developer', content: 'Be brief.' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'Once upon' },
            { type: 'text', text: 'a time' },
          ],
        },
      ],
      max_completion_tokens: 3,
      top_p: 0.5,
      seed: 7,
      temperature: 0.7,
    })
    expect(completion.usage!.completion_tokens).toBe(3)
  })
})

describe('bad requests get a 4xx OpenAI error body', () => {
  const cases: Array<[string, unknown, number, string, string | null]> = [
    ['missing model', { messages: hello }, 400, 'missing_required_parameter', 'model'],
    ['missing messages', { model: 'org/tiny:q8' }, 400, 'missing_required_parameter', 'messages'],
    ['empty messages', { model: 'org/tiny:q8', messages: [] }, 400, 'invalid_value', 'messages'],
    ['unknown role', { model: 'org/tiny:q8', messages: [{ role: 'robot', content: 'x' }] }, 400, 'invalid_value', 'messages[0].role'],
    ['content of a wrong type', { model: 'org/tiny:q8', messages: [{ role: 'user', content: 5 }] }, 400, 'invalid_value', 'messages[0].content'],
    [
      'part without text',
      { model: 'org/tiny:q8', messages: [{ role: 'user', content: [{ type: 'text' }] }] },
      400,
      'missing_required_parameter',
      'messages[0].content[0].text',
    ],
    ['temperature above 1', { model: 'org/tiny:q8', messages: hello, temperature: 1.5 }, 400, 'invalid_value', 'temperature'],
    ['negative top_p', { model: 'org/tiny:q8', messages: hello, top_p: -0.1 }, 400, 'invalid_value', 'top_p'],
    ['top_k 0', { model: 'org/tiny:q8', messages: hello, top_k: 0 }, 400, 'invalid_value', 'top_k'],
    ['top_k 101', { model: 'org/tiny:q8', messages: hello, top_k: 101 }, 400, 'invalid_value', 'top_k'],
    ['fractional top_k', { model: 'org/tiny:q8', messages: hello, top_k: 2.5 }, 400, 'invalid_value', 'top_k'],
    ['five stops', { model: 'org/tiny:q8', messages: hello, stop: ['a', 'b', 'c', 'd', 'e'] }, 400, 'invalid_value', 'stop'],
    ['empty stop', { model: 'org/tiny:q8', messages: hello, stop: [''] }, 400, 'invalid_value', 'stop[0]'],
    ['stream as a string', { model: 'org/tiny:q8', messages: hello, stream: 'yes' }, 400, 'invalid_value', 'stream'],
    [
      'stream_options without stream',
      { model: 'org/tiny:q8', messages: hello, stream_options: { include_usage: true } },
      400,
      'invalid_value',
      'stream_options',
    ],
    ['max_tokens 0', { model: 'org/tiny:q8', messages: hello, max_tokens: 0 }, 400, 'invalid_value', 'max_tokens'],
    ['n = 2', { model: 'org/tiny:q8', messages: hello, n: 2 }, 400, 'unsupported_parameter', 'n'],
    ['unknown model', { model: 'nope', messages: hello }, 404, 'model_not_found', 'model'],
    ['body that is an array', [1, 2], 400, 'invalid_json', null],
  ]
  it.each(cases)('%s', async (_name, body, status, code, param) => {
    const res = await postJson(server, '/v1/chat/completions', body)
    expect(res.status).toBe(status)
    expect(Object.keys(res.json)).toEqual(['error'])
    expect(res.json.error).toMatchObject({ code, param, type: expect.any(String), message: expect.any(String) })
    expect(res.headers.get('x-request-id')).toBeTruthy()
  })

  it("serves a max_tokens past the model's limit, capped there (agents send 32000 to every model)", async () => {
    for (const limit of [{ max_tokens: 32000 }, { max_completion_tokens: 1000 }]) {
      const res = await postJson(server, '/v1/chat/completions', { model: 'org/tiny:q8', messages: hello, ...limit })
      expect(res.status).toBe(200)
      expect(res.json.usage.completion_tokens).toBeLessThanOrEqual(100)
    }
  })

  it('serves a prompt whose max_tokens does not fit beside it, stopping where the context is full', async () => {
    const longText = 'the dog and the cat went to the park '.repeat(40)
    const res = await postJson(server, '/v1/chat/completions', { model: 'org/tiny:q8', messages: [{ role: 'user', content: longText }], max_tokens: 100 })
    expect(res.status).toBe(200)
    expect(res.json.choices[0].finish_reason).toBe('length')
    expect(res.json.usage.prompt_tokens + res.json.usage.completion_tokens).toBeLessThanOrEqual(512)
  })

  it("refuses a prompt that does not fit by itself, with the engine's numbers", async () => {
    const longText = 'the dog and the cat went to the park '.repeat(80)
    const res = await postJson(server, '/v1/chat/completions', { model: 'org/tiny:q8', messages: [{ role: 'user', content: longText }], max_tokens: 5 })
    expect(res.status).toBe(400)
    expect(res.json.error).toMatchObject({ code: 'context_length_exceeded', param: 'messages' })
    expect(res.json.error.message).toMatch(/maximum context length is 512 tokens, and your messages take \d{3,} tokens?/)
  })

  it('ignores unknown fields', async () => {
    const res = await postJson(server, '/v1/chat/completions', {
      model: 'org/tiny:q8',
      messages: hello,
      max_tokens: 2,
      user: 'x',
      logit_bias: {},
      frobnicate: true,
    })
    expect(res.status).toBe(200)
  })

  it('answers malformed JSON, a wrong content type and an oversized body clearly', async () => {
    const malformed = await postJson(server, '/v1/chat/completions', '{"model": "org/tiny:q8", "messages": [')
    expect(malformed.status).toBe(400)
    expect(malformed.json.error.code).toBe('invalid_json')

    const wrongType = await postJson(server, '/v1/chat/completions', 'model=x', {
      headers: { 'content-type': 'text/plain', authorization: `Bearer ${server.apiKey}` },
    })
    expect(wrongType.status).toBe(400)
    expect(wrongType.json.error.code).toBe('invalid_content_type')

    const huge = await postJson(server, '/v1/chat/completions', { model: 'org/tiny:q8', messages: [{ role: 'user', content: 'x'.repeat(31 * 1024 * 1024) }] })
    expect(huge.status).toBe(413)
    expect(huge.json.error.code).toBe('body_too_large')
  })

  it('needs a key: none or a wrong one gets 401; /health does not', async () => {
    for (const authorization of [undefined, 'Bearer wrong-key-123', 'Basic abc', `Bearer ${server.apiKey}x`]) {
      const res = await fetch(`${server.url}/v1/models`, { headers: authorization ? { authorization } : {} })
      expect(res.status).toBe(401)
      expect((await res.json()).error).toMatchObject({ type: 'invalid_authentication', code: 'invalid_api_key' })
    }
    const health = await fetch(`${server.url}/health`)
    expect(health.status).toBe(200)
    expect(await health.json()).toMatchObject({ status: 'ok', loaded_models: expect.any(Array), auth_required: true })
  })

  it('answers unknown routes and methods with a JSON 404', async () => {
    for (const [method, path] of [
      ['GET', '/v2/models'],
      ['GET', '/v1/nothing'],
      ['DELETE', '/v1/chat/completions'],
    ] as const) {
      const res = await fetch(`${server.url}${path}`, { method, headers: { authorization: `Bearer ${server.apiKey}` } })
      expect(res.status).toBe(404)
      const { error } = await res.json()
      expect(error.code).toBe('unknown_url')
      // The message names the path as the client sent it, /v1 and all.
      expect(error.message).toBe(`Unknown request URL: ${method} ${path}`)
    }
  })

  it('keeps serving after all that', async () => {
    const completion = await client.chat.completions.create({ model: 'org/tiny:q8', messages: hello, max_tokens: 2 })
    expect(completion.usage!.completion_tokens).toBe(2)
  })
})

describe('cancellation and crashes', () => {
  it('stops generating at once when a streaming client disconnects', async () => {
    const { events } = await streamEvents({ model: 'long', messages: hello, max_tokens: 30000 }, { abortAfter: 3 })
    expect(events.length).toBeGreaterThanOrEqual(3)
    // Had the 30000-token generation gone on, this request would wait behind it for minutes.
    const started = Date.now()
    const next = await client.chat.completions.create({ model: 'long', messages: hello, max_tokens: 2 })
    expect(next.usage!.completion_tokens).toBe(2)
    expect(Date.now() - started).toBeLessThan(15_000)
    expect(server.output()).toMatch(/POST \/v1\/chat\/completions 200 \(client closed\).*model=long/)
  })

  it('turns a killed engine into engine_crashed, then reloads the model on the next request', async () => {
    // Streamed: the crash arrives as an error event.
    let firstChunk!: () => void
    const started = new Promise<void>((r) => (firstChunk = r))
    const streaming = streamEvents({ model: 'long', messages: hello, max_tokens: 30000 }, { onEvent: () => firstChunk() })
    await started
    const before = engineProcessIds()
    for (const pid of before) process.kill(pid, 'SIGKILL')
    const { events } = await streaming
    const last = JSON.parse(events.at(-1)!)
    expect(last.error).toMatchObject({ code: 'engine_crashed', type: 'server_error' })

    // Not streamed: a 500 with the error body.
    const pending = postJson(server, '/v1/chat/completions', { model: 'long', messages: hello, max_tokens: 30000 })
    await waitForAsync(async () => (await (await fetch(`${server.url}/health`)).json()).loaded_models.includes('long'))
    await new Promise((r) => setTimeout(r, 300))
    for (const pid of engineProcessIds()) process.kill(pid, 'SIGKILL')
    const crashed = await pending
    expect(crashed.status).toBe(500)
    expect(crashed.json.error).toMatchObject({ code: 'engine_crashed', type: 'server_error' })

    const again = await client.chat.completions.create({ model: 'long', messages: hello, max_tokens: 3 })
    expect(again.usage!.completion_tokens).toBe(3)
    expect((await fetch(`${server.url}/health`)).status).toBe(200)
  })
})

describe('parallel slots', () => {
  let parallel: TestServer

  beforeAll(async () => {
    parallel = await startTestServer({ modelsDir, args: ['--parallel', '4', '--max-queue', '2'] })
  })
  afterAll(async () => {
    await parallel?.stop()
  })

  const prompts = ['Once upon a time', 'The little dog', 'Tom and Sue went to the park', 'A big red ball']
  const streamText = async (content: string, extra: object = {}) => {
    const res = await fetch(`${parallel.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${parallel.apiKey}` },
      body: JSON.stringify({ model: 'org/tiny:q8', messages: [{ role: 'user', content }], max_tokens: 40, stream: true, ...extra }),
    })
    let text = ''
    const parser = createParser({
      onEvent: (e) => {
        if (e.data !== '[DONE]') text += JSON.parse(e.data).choices[0]?.delta.content ?? ''
      },
    })
    const decoder = new TextDecoder()
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) parser.feed(decoder.decode(chunk, { stream: true }))
    return text
  }

  it('runs four streamed requests at once, each with the same text as when run alone', async () => {
    const alone: string[] = []
    for (const p of prompts) alone.push(await streamText(p))
    const together = await Promise.all(prompts.map((p) => streamText(p)))
    expect(together).toEqual(alone)
    expect(new Set(alone).size).toBe(4)
  })

  it("keeps each request's own stop sequences and sampling while they share the context", async () => {
    const [free, other] = await Promise.all([streamText(prompts[0]!), streamText(prompts[1]!)])
    const stop = free.slice(10, 14)
    const [stopped, untouched] = await Promise.all([streamText(prompts[0]!, { stop }), streamText(prompts[1]!)])
    expect(stopped).toBe(free.slice(0, free.indexOf(stop)))
    expect(untouched).toBe(other)
  })

  it('queues past the slots and refuses past the queue', async () => {
    const body = { model: 'long', messages: hello, max_tokens: 30000 }
    const controllers = Array.from({ length: 6 }, () => new AbortController())
    const pending = controllers.slice(0, 6).map((c) =>
      fetch(`${parallel.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${parallel.apiKey}` },
        body: JSON.stringify(body),
        signal: c.signal,
      }).catch(() => undefined),
    )
    await new Promise((r) => setTimeout(r, 500))
    // 4 run, 2 wait: the 7th has no place.
    const refused = await postJson(parallel, '/v1/chat/completions', body)
    expect(refused.status).toBe(503)
    for (const c of controllers) c.abort()
    await Promise.all(pending)
    const after = await postJson(parallel, '/v1/chat/completions', { model: 'long', messages: hello, max_tokens: 3 })
    expect(after.status).toBe(200)
  })
})

describe('start and stop', () => {
  it('generates a key at first start, keeps it in the data folder and reuses it', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'hearth-key-'))
    const first = await startTestServer({ modelsDir, dataDir, noKeyFlag: true })
    onTestFinished(() => first.stop().then(() => undefined))
    const keyFile = join(dataDir, 'api-key')
    expect(first.output()).toContain(`API key: stored in ${keyFile}`)
    const { readFileSync, statSync } = await import('node:fs')
    const key = readFileSync(keyFile, 'utf8').trim()
    expect(statSync(keyFile).mode & 0o777).toBe(0o600)
    expect(first.output()).not.toContain(key)
    expect((await fetch(`${first.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200)
    await first.stop()
    const second = await startTestServer({ modelsDir, dataDir, noKeyFlag: true })
    onTestFinished(() => second.stop().then(() => undefined))
    expect((await fetch(`${second.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200)
    await second.stop()
  })

  it('binds 127.0.0.1 and shuts down cleanly on SIGTERM and SIGINT, leaving no engine behind', async () => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      const s = await startTestServer({ modelsDir })
      onTestFinished(() => s.stop().then(() => undefined))
      expect(s.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
      await postJson(s, '/v1/chat/completions', { model: 'org/tiny:q8', messages: hello, max_tokens: 1 })
      const engines = engineProcessIds(s)
      expect(engines).toHaveLength(1)
      expect(await s.stop(signal)).toBe(0)
      for (const pid of engines) expect(isRunning(pid)).toBe(false)
    }
  })

  it('accepts requests without a key only with --no-auth, and says so', async () => {
    const open = await startTestServer({ modelsDir, noKeyFlag: true, args: ['--no-auth'] })
    try {
      expect((await fetch(`${open.url}/v1/models`)).status).toBe(200)
      expect(open.output()).toMatch(/authentication is OFF/)
    } finally {
      await open.stop()
    }
  })
})

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

async function waitForAsync(check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const until = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > until) throw new Error('condition not met in time')
    await new Promise((r) => setTimeout(r, 50))
  }
}
