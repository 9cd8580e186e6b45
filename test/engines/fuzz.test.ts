/**
 * Bad input never gets a 500 or crashes anything. Seeded generators send a few thousand bad
 * requests to every route (wrong types, huge and tiny numbers, deep nesting, broken JSON, invalid
 * UTF-8, broken multipart, truncated bodies, slow-loris uploads, invalid base64, image and audio
 * bytes mutated at random, odd paths and headers). Every answer must be a 2xx (a mutation that is
 * still valid) or a 4xx with exactly the OpenAI error body, and the mutations still valid must reach
 * the engine; after each batch the server answers a good request, and the engine processes are the
 * ones it started with.
 *
 * HEARTH_FUZZ_SEED=<n> replays a run; HEARTH_FUZZ_SCALE=<x> sends x times as many requests.
 */
import { gzipSync } from 'node:zlib'
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Fuzz, WEIRD_STRINGS } from '../support/fuzz-values.ts'
import { engineProcessIds } from '../support/process-stats.ts'
import { httpRequest, rawRequest, type RawResponse } from '../support/raw-http.ts'
import { startTestServer, type TestServer } from '../support/server-process.ts'
import { makeJpeg, makePixelBombPng, makePng } from '../support/test-images.ts'
import { generateTestModels, writeTinyBert } from '../support/tiny-models.ts'

const SEED = Number(process.env.HEARTH_FUZZ_SEED ?? 20_260_301)
const SCALE = Number(process.env.HEARTH_FUZZ_SCALE ?? 1)
const n = (count: number) => Math.max(1, Math.round(count * SCALE))
const AUDIO = readFileSync(new URL('../fixtures/audio/speech.opus.ogg', import.meta.url))
const AUDIO_WAV = readFileSync(new URL('../fixtures/audio/speech-8k.wav', import.meta.url))
const REAL_IDS = ['chat', 'plain', 'bert', 'reranker', 'whisper']

let server: TestServer
let modelsDir: string
let dataDir: string
let host: string
let enginesAtStart: number[]
let png: Buffer
let jpeg: Buffer
let managedKeyId: string
const totals = { requests: 0, ok: 0, clientErrors: 0, closed: 0, started: 0 }

beforeAll(async () => {
  totals.started = performance.now()
  modelsDir = mkdtempSync(join(tmpdir(), 'hearth-fuzz-'))
  generateTestModels(modelsDir)
  writeTinyBert(join(modelsDir, 'tiny-reranker.gguf'), { reranker: true })
  writeFileSync(
    join(modelsDir, 'models.json'),
    JSON.stringify({
      models: [
        { id: 'chat', file: 'tiny-llama-chat.gguf', mmproj: 'mmproj-tiny-llama-chat.gguf', context_length: 256 },
        { id: 'plain', file: 'tiny-llama-plain.gguf', context_length: 256 },
        { id: 'bert', file: 'tiny-bert.gguf' },
        { id: 'reranker', file: 'tiny-reranker.gguf' },
        { id: 'whisper', file: 'ggml-tiny-whisper.bin' },
      ],
    }),
  )
  dataDir = mkdtempSync(join(tmpdir(), 'hearth-fuzz-data-'))
  server = await startTestServer({
    modelsDir,
    dataDir,
    args: ['--request-timeout', '20', '--max-queue', '64'],
    // Pulls go nowhere: a closed port on this machine.
    env: { HEARTH_HF_ENDPOINT: 'http://127.0.0.1:9' },
  })
  host = new URL(server.url).host
  for (const id of REAL_IDS) expect((await call('POST', `/api/models/${id}/load`)).status).toBe(200)
  enginesAtStart = engineProcessIds(server.process.pid)
  expect(enginesAtStart).toHaveLength(REAL_IDS.length)
  png = await makePng(24, 20)
  jpeg = await makeJpeg(24, 20)
  managedKeyId = (await call('POST', '/api/keys', { label: 'fuzz' })).json.id
}, 180_000)

afterAll(async () => {
  const seconds = (performance.now() - totals.started) / 1000
  console.log(
    `fuzz: ${totals.requests} requests in ${seconds.toFixed(1)} s (seed ${SEED}): ${totals.ok} 2xx, ` +
      `${totals.clientErrors} 4xx, ${totals.closed} closed without an answer where allowed`,
  )
  if (server && (server.process.exitCode !== null || server.process.signalCode !== null)) {
    console.log(`the server died; the end of its output:\n${server.output().slice(-6000)}`)
  }
  await server?.stop()
})

// ---------------------------------------------------------------------------
// Sending and judging

interface Answer {
  status: number | undefined
  contentType: string
  body: string
}

interface Case {
  name: string
  /** The connection may close without an answer (the client cut its own request short). */
  mayClose?: boolean
  /** A HEAD request: its answers have no body to judge. */
  head?: boolean
  /** Anthropic's route: errors in its shape, `{"type": "error", "error": {type, message}}`. */
  anthropic?: boolean
  send(): Promise<Answer>
}

async function call(method: string, path: string, body?: unknown) {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${server.apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  return { status: res.status, json: text.startsWith('{') ? JSON.parse(text) : undefined }
}

function fetchCase(name: string, method: string, path: string, init: { headers?: Record<string, string>; body?: string | Buffer | FormData } = {}): Case {
  return {
    name,
    async send() {
      const res = await fetch(`${server.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${server.apiKey}`, ...init.headers },
        body: init.body as BodyInit | undefined,
        signal: AbortSignal.timeout(60_000),
      })
      return { status: res.status, contentType: res.headers.get('content-type') ?? '', body: await res.text() }
    },
  }
}

function rawCase(name: string, requestBytes: Buffer | string, options: { mayClose?: boolean; endAfterSend?: boolean } = {}): Case {
  const request = typeof requestBytes === 'string' ? Buffer.from(requestBytes, 'latin1') : requestBytes
  return {
    name,
    mayClose: options.mayClose,
    head: request.subarray(0, 5).toString('latin1') === 'HEAD ',
    async send() {
      const res: RawResponse = await rawRequest(server.url, request, { timeoutMs: 30_000, endAfterSend: options.endAfterSend })
      if (res.timedOut) return { status: -1, contentType: '', body: 'no answer within 30 s' }
      return { status: res.status, contentType: res.headers['content-type'] ?? '', body: res.body }
    },
  }
}

const jsonCase = (name: string, method: string, path: string, text: string, headers: Record<string, string> = {}) =>
  fetchCase(name, method, path, { headers: { 'content-type': 'application/json', ...headers }, body: text })

/** What is wrong with an answer, or undefined when it is fine. */
function problemWith(c: Case, a: Answer): string | undefined {
  if (a.status === undefined) return c.mayClose ? undefined : 'the connection closed without an answer'
  if (a.status === -1) return a.body
  if (a.status >= 500) return `status ${a.status}: ${a.body.slice(0, 300)}`
  if (c.head) return undefined
  if (a.status >= 200 && a.status < 300) {
    if (!a.contentType.startsWith('text/event-stream')) return undefined
    for (const line of a.body.split('\n')) {
      if (!line.startsWith('data: {')) continue
      const event = JSON.parse(line.slice(6)) as { type?: string; error?: { type?: string } }
      if (event.error?.type === 'server_error' || (event.type === 'error' && event.error?.type === 'api_error')) {
        return `stream ended with a server error: ${line.slice(0, 300)}`
      }
    }
    return undefined
  }
  if (a.status < 400) return `unexpected status ${a.status}`
  if (!a.contentType.startsWith('application/json')) return `status ${a.status} with content type '${a.contentType}': ${a.body.slice(0, 200)}`
  let parsed: unknown
  try {
    parsed = JSON.parse(a.body)
  } catch {
    return `status ${a.status} with a body that is not JSON: ${a.body.slice(0, 200)}`
  }
  if (c.anthropic) {
    const body = parsed as { type?: unknown; error?: { type?: unknown; message?: unknown } }
    const ok =
      Object.keys(body ?? {})
        .sort()
        .join() === 'error,type' &&
      body.type === 'error' &&
      Object.keys(body.error ?? {})
        .sort()
        .join() === 'message,type' &&
      typeof body.error?.type === 'string' &&
      typeof body.error?.message === 'string'
    return ok ? undefined : `status ${a.status} with a body not in Anthropic's error shape: ${a.body.slice(0, 300)}`
  }
  const top = parsed as { error?: Record<string, unknown> }
  const keys = Object.keys(top ?? {})
  const error = top?.error
  const ok =
    keys.length === 1 &&
    keys[0] === 'error' &&
    error !== null &&
    typeof error === 'object' &&
    Object.keys(error).sort().join() === 'code,message,param,type' &&
    typeof error.message === 'string' &&
    typeof error.type === 'string' &&
    (error.param === null || typeof error.param === 'string') &&
    (error.code === null || typeof error.code === 'string')
  return ok ? undefined : `status ${a.status} with a body not in the error shape: ${a.body.slice(0, 300)}`
}

/** Sends the cases a few at a time; returns every failure with the case that caused it, and how many got a 2xx. */
async function runBatch(cases: Case[], concurrency = 4): Promise<{ failures: string[]; ok: number }> {
  const failures: string[] = []
  let ok = 0
  const statuses = new Map<string, number>()
  let next = 0
  const worker = async () => {
    while (next < cases.length) {
      const c = cases[next++]!
      let answer: Answer
      const started = performance.now()
      try {
        answer = await c.send()
      } catch (e) {
        answer = { status: -1, contentType: '', body: `client error: ${(e as Error).message}` }
      }
      const ms = performance.now() - started
      if (ms > 5_000) console.log(`  slow: ${c.name} took ${(ms / 1000).toFixed(1)} s (${answer.status})`)
      totals.requests++
      if (answer.status === undefined) totals.closed++
      else if (answer.status >= 200 && answer.status < 300) ok++
      else if (answer.status >= 400 && answer.status < 500) totals.clientErrors++
      statuses.set(String(answer.status ?? 'closed'), (statuses.get(String(answer.status ?? 'closed')) ?? 0) + 1)
      const problem = problemWith(c, answer)
      if (problem) failures.push(`${c.name}: ${problem}`)
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker))
  console.log(`  ${cases.length} cases: ${[...statuses].map(([s, k]) => `${s}×${k}`).join(' ')}`)
  totals.ok += ok
  return { failures, ok }
}

/** The server answers a good request of each kind, and no engine process died or was replaced. */
async function expectHealthy(): Promise<void> {
  const models = await call('GET', '/v1/models')
  expect(models.status).toBe(200)
  expect(models.json.data.map((m: { id: string }) => m.id).sort()).toEqual([...REAL_IDS].sort())
  const chat = await call('POST', '/v1/chat/completions', { model: 'chat', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 })
  expect(chat.status).toBe(200)
  const embedded = await call('POST', '/v1/embeddings', { model: 'bert', input: 'hello' })
  expect(embedded.status).toBe(200)
  expect(engineProcessIds(server.process.pid)).toEqual(enginesAtStart)
}

/**
 * Some mutations leave a request valid, and those must reach the engine: a route that refused
 * everything before it would answer only 4xx and pass. The default seed gets a 2xx for 3–14 % of
 * each engine route's cases (8 % of them all); 1 % leaves room for other seeds.
 */
const MIN_ENGINE_SHARE = 0.01

async function expectBatch(cases: Case[], options: { reachesEngine?: boolean } = {}): Promise<void> {
  const { failures, ok } = await runBatch(cases)
  expect(failures.slice(0, 20), `${failures.length} bad answers (seed ${SEED})`).toEqual([])
  if (options.reachesEngine) {
    expect(ok, `only ${ok} of ${cases.length} cases got a 2xx: too few reached the engine (seed ${SEED})`).toBeGreaterThanOrEqual(
      Math.floor(cases.length * MIN_ENGINE_SHARE),
    )
  }
  await expectHealthy()
}

// ---------------------------------------------------------------------------
// The bodies that mutations start from: valid requests

const dataUrl = (bytes: Buffer, type: string) => `data:image/${type};base64,${bytes.toString('base64')}`

function chatBases() {
  return [
    {
      model: 'chat',
      messages: [
        { role: 'system', content: 'Be brief' },
        { role: 'user', content: 'Hi' },
      ],
      max_tokens: 3,
      temperature: 0.5,
      top_p: 0.9,
      top_k: 40,
      stop: ['\n'],
      seed: 1,
      thinking_budget_tokens: 4,
    },
    {
      model: 'plain',
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Hi' }] },
        { role: 'assistant', content: 'Hello' },
        { role: 'user', content: 'More' },
      ],
      max_completion_tokens: 2,
      stream: true,
      stream_options: { include_usage: true },
    },
    {
      model: 'chat',
      messages: [
        { role: 'developer', content: 'x' },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is it?' },
            { type: 'image_url', image_url: { url: dataUrl(png, 'png'), detail: 'low' } },
          ],
        },
      ],
      max_tokens: 2,
    },
    {
      model: 'chat',
      messages: [
        { role: 'user', content: 'Weather?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
        },
        { role: 'tool', tool_call_id: 'call_1', content: 'Sunny' },
      ],
      tools: [
        {
          type: 'function',
          function: {
            name: 'get_weather',
            description: 'd',
            parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] } }, required: ['city'] },
          },
        },
      ],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      parallel_tool_calls: false,
      reasoning_effort: 'low',
      max_tokens: 8,
    },
    {
      model: 'chat',
      messages: [{ role: 'user', content: 'JSON please' }],
      response_format: {
        type: 'json_schema',
        json_schema: { name: 'w', strict: true, schema: { type: 'object', properties: { a: { type: 'string', maxLength: 3 } }, required: ['a'] } },
      },
      logprobs: true,
      top_logprobs: 2,
      presence_penalty: 0.5,
      frequency_penalty: 0.1,
      logit_bias: { '5': -100 },
      max_tokens: 6,
    },
  ]
}

function messagesBases() {
  const image = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png.toString('base64') } }
  return [
    {
      model: 'chat',
      max_tokens: 3,
      system: 'Be brief',
      messages: [{ role: 'user', content: 'Hi' }],
      temperature: 0.5,
      top_p: 0.9,
      top_k: 40,
      stop_sequences: ['\n'],
    },
    {
      model: 'chat',
      max_tokens: 2,
      stream: true,
      thinking: { type: 'enabled', budget_tokens: 4 },
      messages: [{ role: 'user', content: [image, { type: 'text', text: 'What is it?' }] }],
    },
    {
      model: 'chat',
      max_tokens: 4,
      tools: [
        {
          name: 'get_weather',
          description: 'd',
          input_schema: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] } }, required: ['city'] },
        },
      ],
      tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true },
      messages: [
        { role: 'user', content: 'Weather?' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'hm', signature: '' },
            { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } },
          ],
        },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'Sunny' }] }] },
      ],
      thinking: { type: 'disabled' },
    },
  ]
}

const embeddingBases = [
  { model: 'bert', input: ['one two', 'three'], encoding_format: 'float', dimensions: 8 },
  {
    model: 'bert',
    input: [
      [5, 6, 7],
      [8, 9],
    ],
  },
  { model: 'bert', input: 'hello there', encoding_format: 'base64' },
]

const apiBases: Array<{ method: string; path: () => string; body: unknown }> = [
  { method: 'POST', path: () => '/api/models/pull', body: { source: 'hf://org/repo/file.gguf', mmproj: 'hf://org/repo/mmproj-file.gguf', id: 'pulled' } },
  { method: 'POST', path: () => '/api/models/import', body: { path: '/nonexistent/dir/model.gguf', mode: 'copy', id: 'imported' } },
  { method: 'POST', path: () => '/api/keys', body: { label: 'fuzzed', requests_per_minute: 1000, tokens_per_day: 1_000_000 } },
  { method: 'PATCH', path: () => `/api/keys/${managedKeyId}`, body: { label: 'fuzzed', tokens_per_day: 5 } },
]

/** encodeURIComponent, which throws on lone surrogates: those go in as U+FFFD. */
function uriComponent(s: string): string {
  return encodeURIComponent(s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd'))
}

/** Ids for paths: never a real model's, so deleting or unloading through them cannot touch one. */
function oddId(f: Fuzz): string {
  const raw = [
    '..%2F..%2Fetc%2Fpasswd',
    '..',
    '.',
    '%2e%2e',
    '..%5c..%5cwindows',
    '%00',
    '%ff%fe',
    '%',
    '%%41',
    'a%2Fb%2F..%2F..%2F..%2Fc',
    '....//....//etc',
    'models.json',
    '.partial',
    'tiny-bert.gguf',
    '%2Fetc%2Fpasswd',
    'x'.repeat(3000),
    'org/name:q4_k_m',
    '__proto__',
    'constructor/prototype',
  ]
  if (f.chance(0.5)) return f.pick(raw)
  return uriComponent(f.string()).slice(0, 5000) || '%20'
}

// ---------------------------------------------------------------------------

describe('fuzz', () => {
  it('JSON bodies of the chat route', async () => {
    const f = new Fuzz(SEED)
    const bases = chatBases()
    const cases = Array.from({ length: n(700) }, (_, i) => {
      const { text, note } = f.mutateJson(bases[i % bases.length])
      return jsonCase(`chat #${i} ${note}`, 'POST', '/v1/chat/completions', text)
    })
    await expectBatch(cases, { reachesEngine: true })
  }, 300_000)

  it("JSON bodies of Anthropic's messages route", async () => {
    const f = new Fuzz(SEED + 7)
    const bases = messagesBases()
    const cases = Array.from({ length: n(350) }, (_, i) => {
      const { text, note } = f.mutateJson(bases[i % bases.length])
      return { ...jsonCase(`messages #${i} ${note}`, 'POST', i % 5 === 4 ? '/v1/messages/count_tokens' : '/v1/messages', text), anthropic: true }
    })
    await expectBatch(cases, { reachesEngine: true })
  })

  it('JSON bodies of the completions route', async () => {
    const f = new Fuzz(SEED + 11)
    const bases = [
      { model: 'plain', prompt: 'Once upon a time', max_tokens: 3, temperature: 0.5, top_p: 0.9, stop: ['\n'], logprobs: 2, seed: 3 },
      { model: 'chat', prompt: ['a', 'b'], max_tokens: 2, echo: true, presence_penalty: 0.2, logit_bias: { '7': -100 } },
      { model: 'chat', prompt: 'def f(', suffix: ')\n', max_tokens: 2, stream: true, stream_options: { include_usage: true } },
    ]
    const cases = Array.from({ length: n(200) }, (_, i) => {
      const { text, note } = f.mutateJson(bases[i % bases.length])
      return jsonCase(`completions #${i} ${note}`, 'POST', '/v1/completions', text)
    })
    await expectBatch(cases, { reachesEngine: true })
  })

  it('JSON bodies of the responses route', async () => {
    const f = new Fuzz(SEED + 17)
    const bases = [
      { model: 'chat', input: 'Hi', instructions: 'Be brief', max_output_tokens: 3, temperature: 0.5, store: false },
      {
        model: 'chat',
        input: [
          { role: 'user', content: [{ type: 'input_text', text: 'Weather?' }] },
          { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
          { type: 'function_call_output', call_id: 'call_1', output: 'Sunny' },
        ],
        tools: [
          {
            type: 'function',
            name: 'get_weather',
            parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] } }, required: ['city'] },
          },
        ],
        tool_choice: { type: 'function', name: 'get_weather' },
        parallel_tool_calls: false,
        max_output_tokens: 6,
        stream: true,
        store: false,
      },
      {
        model: 'chat',
        input: [{ role: 'user', content: [{ type: 'input_image', image_url: dataUrl(png, 'png') }] }],
        max_output_tokens: 2,
        text: { format: { type: 'json_object' } },
        store: false,
      },
    ]
    const cases = Array.from({ length: n(200) }, (_, i) => {
      const { text, note } = f.mutateJson(bases[i % bases.length])
      return jsonCase(`responses #${i} ${note}`, 'POST', '/v1/responses', text)
    })
    await expectBatch(cases, { reachesEngine: true })
  })

  it('JSON bodies of the rerank route', async () => {
    const f = new Fuzz(SEED + 13)
    const bases = [
      { model: 'reranker', query: 'where is the sea', documents: ['the river', 'the sea is deep', 'a tree'], top_n: 2, return_documents: true },
      { model: 'reranker', query: 'music', documents: [{ text: 'a song' }, { text: 'the night' }] },
    ]
    const cases = Array.from({ length: n(150) }, (_, i) => {
      const { text, note } = f.mutateJson(bases[i % bases.length])
      return jsonCase(`rerank #${i} ${note}`, 'POST', '/v1/rerank', text)
    })
    await expectBatch(cases, { reachesEngine: true })
  })

  it('JSON bodies of the embeddings route', async () => {
    const f = new Fuzz(SEED + 1)
    const cases = Array.from({ length: n(350) }, (_, i) => {
      const { text, note } = f.mutateJson(embeddingBases[i % embeddingBases.length])
      return jsonCase(`embeddings #${i} ${note}`, 'POST', '/v1/embeddings', text)
    })
    await expectBatch(cases, { reachesEngine: true })
  }, 300_000)

  it('JSON bodies of the /api routes', async () => {
    const f = new Fuzz(SEED + 2)
    const cases = Array.from({ length: n(300) }, (_, i) => {
      const base = apiBases[i % apiBases.length]!
      const { text, note } = f.mutateJson(base.body)
      return jsonCase(`${base.method} ${base.path()} #${i} ${note}`, base.method, base.path(), text)
    })
    await expectBatch(cases)
    const files = readdirSync(modelsDir)
    expect(files.filter((name) => /passwd|win\.ini|hostname/.test(name))).toEqual([])
  }, 300_000)

  it('odd paths, ids and methods on every route', async () => {
    const f = new Fuzz(SEED + 3)
    const templates: Array<[string, (id: string) => string]> = [
      ['GET', (id) => `/v1/models/${id}`],
      ['GET', (id) => `/api/downloads/${id}`],
      ['GET', (id) => `/api/downloads/${id}/events`],
      ['DELETE', (id) => `/api/downloads/${id}`],
      ['POST', (id) => `/api/models/${id}/load`],
      ['POST', (id) => `/api/models/${id}/unload`],
      ['DELETE', (id) => `/api/models/${id}`],
      ['GET', (id) => `/api/keys/${id}`],
      ['DELETE', (id) => `/api/keys/${id}`],
      ['GET', (id) => `/v1/${id}`],
      ['GET', (id) => `/api/${id}`],
      ['GET', (id) => `/v1/models?limit=${id}&after=${id}`],
    ]
    const listings = [
      '/v1/models',
      '/api/models',
      '/api/system',
      '/api/downloads',
      '/api/recommended',
      '/api/server',
      '/api/requests',
      '/api/keys',
      '/health',
      '/metrics',
    ]
    const methods = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD', 'TRACE', 'PROPFIND']
    const auth = `Bearer ${server.apiKey}`
    const cases: Case[] = []
    for (let i = 0; i < n(300); i++) {
      const kind = f.int(10)
      if (kind < 6) {
        const [method, template] = f.pick(templates)
        const path = template(oddId(f))
        cases.push(rawCase(`${method} ${path.slice(0, 100)} #${i}`, httpRequest(method, path, host, { authorization: auth })))
      } else if (kind < 8) {
        const path = f.pick([
          ...listings,
          '/v1/chat/completions',
          '/v1/embeddings',
          '/v1/audio/translations',
          '/v1/audio/transcriptions',
          '/api/models/pull',
          '/api/keys/regenerate',
        ])
        const method = f.pick(methods)
        cases.push(rawCase(`${method} ${path} #${i}`, httpRequest(method, path, host, { authorization: auth })))
      } else {
        const path = f.pick(listings)
        cases.push(rawCase(`GET ${path} #${i}`, httpRequest('GET', `${path}?${uriComponent(f.string()).slice(0, 2000)}`, host, { authorization: auth })))
      }
    }
    await expectBatch(cases)
    for (const file of ['tiny-llama-chat.gguf', 'tiny-llama-plain.gguf', 'tiny-bert.gguf', 'ggml-tiny-whisper.bin', 'mmproj-tiny-llama-chat.gguf']) {
      expect(existsSync(join(modelsDir, file)), file).toBe(true)
    }
  }, 300_000)

  it('odd headers: keys, content types, encodings, hosts, framing', async () => {
    const f = new Fuzz(SEED + 4)
    const bomb = gzipSync(Buffer.alloc(60 * 1024 * 1024, 32)) // 60 MB of spaces, inflated past the body limit
    const good = JSON.stringify({ model: 'plain', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 })
    const key = server.apiKey
    const authorizations = [
      'Bearer',
      'Bearer ',
      `bearer ${key}`,
      `Basic ${Buffer.from(`x:${key}`).toString('base64')}`,
      `Bearer ${key} extra`,
      key,
      `Bearer ${'x'.repeat(8000)}`,
      `Bearer ${key}\u00ff`,
      'Bearer \u0000',
      `Bearer  ${key}  `,
    ]
    const contentTypes = [
      'application/json; charset=latin1',
      'application/json; charset=utf-16',
      'application/json; charset=nonsense',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data',
      'multipart/form-data; boundary=x',
      'application/vnd.api+json',
      'application/json;;;',
      '',
      'application/json; charset="utf-8"',
    ]
    const cases: Case[] = []
    for (let i = 0; i < n(160); i++) {
      const kind = f.int(8)
      const path = f.pick(['/v1/chat/completions', '/v1/embeddings', '/api/keys'])
      if (kind === 0) {
        cases.push(
          rawCase(`authorization #${i}`, httpRequest('POST', path, host, { authorization: f.pick(authorizations), 'content-type': 'application/json' }, good)),
        )
      } else if (kind === 1) {
        cases.push(
          rawCase(`content-type #${i}`, httpRequest('POST', path, host, { authorization: `Bearer ${key}`, 'content-type': f.pick(contentTypes) }, good)),
        )
      } else if (kind === 2) {
        const encoding = f.pick(['gzip', 'deflate', 'br', 'identity', 'xyz', 'gzip, gzip'])
        const body = f.chance(0.5) ? gzipSync(good) : Buffer.from(f.string())
        cases.push(
          rawCase(
            `content-encoding ${encoding} #${i}`,
            httpRequest('POST', path, host, { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-encoding': encoding }, body),
          ),
        )
      } else if (kind === 3) {
        cases.push(
          rawCase(
            `gzip bomb #${i}`,
            httpRequest('POST', path, host, { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-encoding': 'gzip' }, bomb),
          ),
        )
      } else if (kind === 4) {
        const hostHeader = f.pick(['evil.example', '', 'localhost:99999', '[::1', '127.0.0.1:1:2', 'LOCALHOST.', '127.0.0.1.nip.io', '0x7f.1'])
        cases.push(rawCase(`host '${hostHeader}' #${i}`, httpRequest('GET', '/v1/models', hostHeader, { authorization: `Bearer ${key}` })))
      } else if (kind === 5) {
        const expect = f.pick(['100-continue', 'something-else', '100-continue, x'])
        cases.push(
          rawCase(
            `expect ${expect} #${i}`,
            httpRequest('POST', path, host, { authorization: `Bearer ${key}`, 'content-type': 'application/json', expect }, good),
            { mayClose: true },
          ),
        )
      } else if (kind === 6) {
        const many: Record<string, string> = { authorization: `Bearer ${key}` }
        for (let h = 0; h < f.pick([10, 200, 2000]); h++) many[`x-h${h}`] = 'v'.repeat(f.pick([1, 100]))
        cases.push(rawCase(`many headers #${i}`, httpRequest('GET', '/v1/models', host, many)))
      } else {
        const origin = f.pick(['https://evil.example', 'null', 'chrome-extension://abc', 'http://localhost:1'])
        cases.push(
          rawCase(
            `origin ${origin} #${i}`,
            httpRequest(
              f.pick(['POST', 'OPTIONS', 'DELETE']),
              path,
              host,
              { authorization: `Bearer ${key}`, origin, 'access-control-request-method': 'POST', 'content-type': 'application/json' },
              good,
            ),
          ),
        )
      }
    }
    await expectBatch(cases)
  }, 300_000)

  it('raw bytes: invalid UTF-8, truncated bodies, broken framing', async () => {
    const f = new Fuzz(SEED + 5)
    const auth = { authorization: `Bearer ${server.apiKey}`, 'content-type': 'application/json' }
    const invalidUtf8 = [
      Buffer.from([0xff]),
      Buffer.from([0xfe, 0xff]),
      Buffer.from([0xc3]),
      Buffer.from([0xed, 0xa0, 0x80]),
      Buffer.from([0xf8, 0x88, 0x80, 0x80, 0x80]),
      Buffer.from([0xc0, 0xaf]),
      Buffer.from([0xe2, 0x82]),
    ]
    const cases: Case[] = []
    for (let i = 0; i < n(320); i++) {
      const kind = f.int(7)
      if (kind <= 1) {
        // Invalid UTF-8 inside strings, keys, the model id, or bare.
        const bad = f.pick(invalidUtf8)
        const template = f.pick([
          ['{"model":"plain","messages":[{"role":"user","content":"', '"}],"max_tokens":2}'],
          ['{"model":"', '","messages":[{"role":"user","content":"x"}]}'],
          ['{"model":"bert","input":["a', 'b"]}'],
          ['{"', '":1,"model":"bert","input":"x"}'],
          ['', ''],
        ])
        const body = Buffer.concat([Buffer.from(template[0]!), bad, Buffer.from(template[1]!)])
        const path = body.includes('bert') ? '/v1/embeddings' : '/v1/chat/completions'
        cases.push(rawCase(`invalid utf-8 #${i}`, httpRequest('POST', path, host, auth, body)))
      } else if (kind === 2) {
        // A body shorter than its Content-Length, then the client stops sending.
        const body = JSON.stringify(chatBases()[0])
        const cut = f.int(body.length)
        cases.push(
          rawCase(
            `truncated body at ${cut} #${i}`,
            httpRequest('POST', '/v1/chat/completions', host, { ...auth, 'content-length': String(body.length) }, body.slice(0, cut)),
            { mayClose: true, endAfterSend: true },
          ),
        )
      } else if (kind === 3) {
        const request = f.pick([
          'GET / HTTP/9.9\r\n\r\n',
          'XYZ\r\n\r\n',
          '\u0000\u0001\u0002\r\n\r\n',
          `GET /v1/models HTTP/1.1\r\nHost: ${host}\r\nContent-Length: -1\r\n\r\n`,
          `POST /v1/embeddings HTTP/1.1\r\nHost: ${host}\r\nContent-Length: abc\r\n\r\n`,
          `POST /v1/embeddings HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
          `POST /v1/embeddings HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello`,
          `GET /v1/models HTTP/1.1\r\nHost: ${host}\r\nno colon here\r\n\r\n`,
          `GET /v1/models HTTP/1.1\r\nHost: ${host}\r\nX-Folded: a\r\n b\r\n\r\n`,
          `GET /v1/models HTTP/1.1\r\nHost: ${host}\r\nX-Null: a\u0000b\r\n\r\n`,
          `GET /v1/${'a'.repeat(20_000)} HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
          `GET /v1/mod\u00e9ls HTTP/1.1\r\nHost: ${host}\r\n\r\n`,
          `GET /v1/models HTTP/1.1\r\nHost: ${host}\r\nHost: evil.example\r\n\r\n`,
          `POST /v1/embeddings HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${server.apiKey}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
          `POST /v1/embeddings HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${server.apiKey}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n`,
          `GET /v1/models HTTP/1.1\nHost: ${host}\n\n`,
        ])
        cases.push(rawCase(`framing #${i} ${JSON.stringify(request.slice(0, 60))}`, request, { mayClose: true, endAfterSend: true }))
      } else {
        // Random bytes as a JSON body.
        const body = Buffer.from(Array.from({ length: f.pick([1, 16, 1024, 65536]) }, () => f.int(256)))
        cases.push(
          rawCase(
            `random body #${i}`,
            httpRequest('POST', f.pick(['/v1/chat/completions', '/v1/embeddings', '/api/keys', '/api/models/pull']), host, auth, body),
          ),
        )
      }
    }
    await expectBatch(cases)
  }, 300_000)

  it('images: mutated bytes, bad base64, odd data URLs', async () => {
    const f = new Fuzz(SEED + 6)
    const bomb = makePixelBombPng()
    const cases: Case[] = []
    for (let i = 0; i < n(170); i++) {
      const kind = f.int(5)
      let url: string
      let note: string
      if (kind <= 1) {
        const m = f.mutateBytes(f.chance(0.5) ? png : jpeg)
        url = dataUrl(m.bytes, f.pick(['png', 'jpeg', 'webp', 'gif', 'bmp']))
        note = m.note
      } else if (kind === 2) {
        const b64 = png.toString('base64')
        const bad = f.pick([
          b64.slice(0, -1),
          b64.replace(/=+$/, ''),
          `${b64}$$$`,
          b64.replace(/\+/g, '-').replace(/\//g, '_'),
          b64.match(/.{1,76}/g)!.join('\n'),
          ` ${b64}`,
          '====',
          'A',
          b64.slice(0, 10),
          `${b64}AAAA`,
        ])
        url = `data:image/png;base64,${bad}`
        note = 'bad base64'
      } else if (kind === 3) {
        url = f.pick([
          `data:image/svg+xml;base64,${Buffer.from('<svg/>').toString('base64')}`,
          `data:text/plain;base64,${png.toString('base64')}`,
          `data:image/png,${png.toString('latin1')}`,
          `data:image/png;charset=utf-8;base64,${png.toString('base64')}`,
          `data:;base64,${png.toString('base64')}`,
          'data:image/png;base64,',
          'http://127.0.0.1:9/x.png',
          'file:///etc/passwd',
          dataUrl(bomb, 'png'),
          `data:image/png;base64,${Buffer.alloc(21 * 1024 * 1024).toString('base64')}`,
        ])
        note = `url ${url.slice(0, 40)}`
      } else {
        url = dataUrl(png, 'png')
        note = 'two images, or an image to a model without vision'
      }
      const parts: unknown[] = [
        { type: 'text', text: 'What is it?' },
        { type: 'image_url', image_url: { url } },
      ]
      if (kind === 4 && f.chance(0.5)) parts.push({ type: 'image_url', image_url: { url } })
      const model = kind === 4 && parts.length === 2 ? 'plain' : 'chat'
      const body = JSON.stringify({ model, messages: [{ role: 'user', content: parts }], max_tokens: 2, stream: f.chance(0.3) })
      cases.push(jsonCase(`image #${i} ${note}`, 'POST', '/v1/chat/completions', body))
    }
    await expectBatch(cases, { reachesEngine: true })
  }, 300_000)

  it('audio uploads: mutated bytes, odd fields, broken multipart', async () => {
    const f = new Fuzz(SEED + 7)
    const cases: Case[] = []
    const fieldValues: Record<string, string[]> = {
      model: ['whisper', 'chat', 'bert', '', '../../etc/passwd', 'x'.repeat(300)],
      response_format: ['json', 'text', 'srt', 'vtt', 'verbose_json', 'xml', '', 'JSON'],
      temperature: ['0', '1', '2', '-1', 'abc', 'NaN', '1e400', '0.5.5', ''],
      language: ['', 'en', 'fr', 'zz', 'EN', 'english', 'x'.repeat(100)],
      stream: ['true', 'false', 'maybe', '1', ''],
      stream_options: ['{"include_usage":true}', '{bad json', '{"include_usage":"yes"}', '[]'],
      'stream_options[include_usage]': ['true', 'nope'],
      prompt: ['names: Ana', '\u0000', 'word '.repeat(2000)],
      'timestamp_granularities[]': ['word', 'segment', 'sentence', '', 'WORD'],
      timestamp_granularities: ['word', '["word"]', 'x'],
      'include[]': ['logprobs', 'everything', ''],
      chunking_strategy: ['auto', 'manual', '{"type":"server_vad"}', '{"type":"server_vad","threshold":7}', '{', 'null', '[]'],
      'chunking_strategy[type]': ['server_vad', 'semantic', ''],
      'chunking_strategy[threshold]': ['0.5', '-1', 'x'],
      'known_speaker_names[]': ['Ann'],
      keywords: ['Hearth'],
    }
    for (let i = 0; i < n(160); i++) {
      const kind = f.int(6)
      if (kind <= 3) {
        // A well-formed form: fields changed, or the audio's bytes mutated.
        const fields: Record<string, string> = { model: 'whisper' }
        let audio: Buffer = f.chance(0.5) ? AUDIO : AUDIO_WAV
        let note: string
        if (kind <= 1) {
          const m = f.mutateBytes(audio)
          audio = m.bytes
          note = `audio ${m.note}`
        } else {
          const name = f.pick(Object.keys(fieldValues))
          fields[name] = f.pick(fieldValues[name]!)
          // Leave the audio decodable only now and then: whisper takes most of a second per file.
          if (f.chance(0.6)) audio = f.mutateBytes(audio).bytes
          note = `${name}=${JSON.stringify(fields[name]!.slice(0, 30))}`
        }
        const form = new FormData()
        for (const [k, v] of Object.entries(fields)) form.append(k, v)
        if (f.chance(0.95))
          form.append('file', new Blob([new Uint8Array(audio)]), f.pick(['a.ogg', '../../../etc/passwd', 'x.mp3', '', 'C:\\x.wav', '\u0000.wav']))
        const route = f.pick(['/v1/audio/translations', '/v1/audio/transcriptions'])
        cases.push(fetchCase(`audio #${i} ${route.slice(10)} ${note}`, 'POST', route, { body: form }))
      } else {
        const boundary = 'fuzzboundary'
        const part = (headers: string, body: Buffer | string) =>
          Buffer.concat([Buffer.from(`--${boundary}\r\n${headers}\r\n\r\n`), typeof body === 'string' ? Buffer.from(body) : body, Buffer.from('\r\n')])
        const file = part('Content-Disposition: form-data; name="file"; filename="a.ogg"\r\nContent-Type: application/octet-stream', AUDIO)
        const model = part('Content-Disposition: form-data; name="model"', 'whisper')
        const end = Buffer.from(`--${boundary}--\r\n`)
        const variants: Array<[string, string, Buffer]> = [
          ['no final boundary', `multipart/form-data; boundary=${boundary}`, Buffer.concat([model, file])],
          ['wrong boundary', 'multipart/form-data; boundary=other', Buffer.concat([model, file, end])],
          ['no boundary parameter', 'multipart/form-data', Buffer.concat([model, file, end])],
          ['empty body', `multipart/form-data; boundary=${boundary}`, Buffer.alloc(0)],
          ['part without disposition', `multipart/form-data; boundary=${boundary}`, Buffer.concat([part('Content-Type: text/plain', 'x'), model, file, end])],
          [
            'file as a text field',
            `multipart/form-data; boundary=${boundary}`,
            Buffer.concat([model, part('Content-Disposition: form-data; name="file"', 'not a file'), end]),
          ],
          ['two files', `multipart/form-data; boundary=${boundary}`, Buffer.concat([model, file, file, end])],
          [
            '200 parts',
            `multipart/form-data; boundary=${boundary}`,
            Buffer.concat([...Array.from({ length: 200 }, (_, k) => part(`Content-Disposition: form-data; name="f${k}"`, 'v')), model, file, end]),
          ],
          [
            'huge field',
            `multipart/form-data; boundary=${boundary}`,
            Buffer.concat([model, part('Content-Disposition: form-data; name="prompt"', 'p'.repeat(100_000)), file, end]),
          ],
          [
            'LF only',
            `multipart/form-data; boundary=${boundary}`,
            Buffer.from(`--${boundary}\nContent-Disposition: form-data; name="model"\n\nwhisper\n--${boundary}--\n`),
          ],
          ['random bytes', `multipart/form-data; boundary=${boundary}`, Buffer.from(Array.from({ length: 2048 }, () => f.int(256)))],
          [
            'nested multipart',
            `multipart/form-data; boundary=${boundary}`,
            Buffer.concat([
              model,
              part(
                'Content-Disposition: form-data; name="file"; filename="a"\r\nContent-Type: multipart/mixed; boundary=inner',
                '--inner\r\n\r\nx\r\n--inner--',
              ),
              end,
            ]),
          ],
          ['json to the upload route', 'application/json', Buffer.from('{"model":"whisper","file":"AAAA"}')],
          [
            'invalid utf-8 field',
            `multipart/form-data; boundary=${boundary}`,
            Buffer.concat([part('Content-Disposition: form-data; name="model"', Buffer.from([0xff, 0xfe])), file, end]),
          ],
        ]
        const [note, contentType, body] = f.pick(variants)
        cases.push(
          rawCase(
            `multipart ${note} #${i}`,
            httpRequest('POST', '/v1/audio/translations', host, { authorization: `Bearer ${server.apiKey}`, 'content-type': contentType }, body),
            { mayClose: true },
          ),
        )
      }
    }
    // A declared size over the limit is refused before the body arrives.
    cases.push(
      rawCase(
        'declared 30 MB upload',
        httpRequest('POST', '/v1/audio/translations', host, {
          authorization: `Bearer ${server.apiKey}`,
          'content-type': 'multipart/form-data; boundary=x',
          'content-length': String(30 * 1024 * 1024),
        }),
        { mayClose: true },
      ),
    )
    await expectBatch(cases, { reachesEngine: true })
    // Scratch files of the uploads are gone, the failed ones included.
    const scratch = join(dataDir, 'tmp')
    expect(existsSync(scratch) ? readdirSync(scratch) : []).toEqual([])
  }, 300_000)

  it('slow loris: trickled headers and bodies are cut off without holding the server', async () => {
    const auth = `Bearer ${server.apiKey}`
    const body = JSON.stringify(chatBases()[0])
    const trickle = { chunkBytes: 1, delayMs: 400 }
    const slow = [
      rawRequest(
        server.url,
        `POST /v1/chat/completions HTTP/1.1\r\nHost: ${host}\r\nAuthorization: ${auth}\r\nContent-Type: application/json\r\nX-Padding: ${'p'.repeat(200)}\r\n\r\n`,
        { trickle, timeoutMs: 40_000 },
      ),
      rawRequest(server.url, httpRequest('POST', '/v1/chat/completions', host, { authorization: auth, 'content-type': 'application/json' }, body), {
        trickle: { chunkBytes: 4, delayMs: 400 },
        timeoutMs: 40_000,
      }),
      rawRequest(
        server.url,
        httpRequest(
          'POST',
          '/v1/audio/translations',
          host,
          { authorization: auth, 'content-type': 'multipart/form-data; boundary=b' },
          Buffer.concat([Buffer.from('--b\r\nContent-Disposition: form-data; name="file"; filename="a.ogg"\r\n\r\n'), AUDIO]),
        ),
        { trickle: { chunkBytes: 16, delayMs: 400 }, timeoutMs: 40_000 },
      ),
    ]
    // Meanwhile everyone else is served as usual.
    const started = performance.now()
    for (let i = 0; i < 5; i++) await expectHealthy()
    expect(performance.now() - started).toBeLessThan(15_000)
    const cut = await Promise.all(slow)
    for (const res of cut) {
      expect(res.timedOut).toBe(false)
      // Headers must arrive within 10 s and the request within max(10 s, --request-timeout 20 s).
      expect(res.elapsedMs).toBeLessThan(25_000)
      expect(res.status).toBe(408)
      expect(JSON.parse(res.body).error).toMatchObject({ code: 'request_timeout', type: 'request_timeout' })
    }
    totals.requests += slow.length
    await expectHealthy()
  }, 120_000)

  it('ends where it started: the same engines, no stray files, the server serving', async () => {
    await expectHealthy()
    expect(
      readdirSync(modelsDir)
        .filter((name) => !name.startsWith('.'))
        .sort(),
    ).toEqual(
      [
        'ggml-tiny-whisper.bin',
        'mmproj-tiny-llama-chat.gguf',
        'models.json',
        'tiny-bert.gguf',
        'tiny-llama-chat.gguf',
        'tiny-llama-plain.gguf',
        'tiny-models.json',
        'tiny-reranker.gguf',
      ].sort(),
    )
    const scratch = join(dataDir, 'tmp')
    expect(existsSync(scratch) ? readdirSync(scratch) : []).toEqual([])
    expect(WEIRD_STRINGS.length).toBeGreaterThan(10)
  })
})
