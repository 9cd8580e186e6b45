/**
 * The protocol × feature table (main/server/protocols/protocol-features.ts), run: for every cell
 * that says a protocol carries a feature, a request in that protocol's own shape asks for it and
 * the engine (scripted, in-process) is shown to have got it, or the answer to carry it; for the
 * cells that say no where the protocol has a field to try, the request is refused by name. The
 * pipeline's own features (cancel, deadline, quotas, warnings) are tried the same way on every
 * protocol. A cell without a probe here fails the suite: the table and the tests cannot drift.
 */
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ChatJob, ChatResult, CompleteJob, EngineJob, SpeechResult, TokenLogprob } from '../../engines/engine-jobs.ts'
import { FEATURES, PROTOCOL_FEATURES, PROTOCOLS, protocolFeaturesMarkdown, type Feature, type Protocol } from '../../main/server/protocols/protocol-features.ts'
import { minimalPdf } from '../support/document-files.ts'
import { plainScript, startInProcessServer, type InProcessServer, type Script } from '../support/in-process-server.ts'
import { writeMcpConfig } from '../support/mcp-config.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { cannotRun } from '../support/skips.ts'
import { makePng } from '../support/test-images.ts'
import { writeTinyBert, writeTinyLlama, writeTinyMmproj, writeTinyWhisper } from '../support/tiny-models.ts'

const audio = sharedFixture('audio/jfk.wav')
if (!audio) cannotRun('the shared fixtures (../shared/fixtures/audio/jfk.wav) are not there; the speech row of the protocol table cannot be tried')

/** While set, every job waits here until its request ends (a client gone, or the deadline). */
let hold = false
/** Jobs whose request ended while they waited (their signal fired). */
let stopped = 0
const logprob = (token: string): TokenLogprob => ({
  token,
  logprob: -0.5,
  bytes: [...Buffer.from(token)],
  top_logprobs: [{ token, logprob: -0.5, bytes: [...Buffer.from(token)] }],
})

const script: Script = async (job, context) => {
  if (hold) {
    await new Promise<void>((resolve) => context.signal?.addEventListener('abort', () => (stopped++, resolve()), { once: true }))
    throw Object.assign(new Error('aborted'), { name: 'AbortError' })
  }
  if (job.type === 'speech') {
    const tokens = [{ text: ' And', probability: 0.9, startMs: 0, endMs: 200 }]
    const segment = { startMs: 0, endMs: 1000, text: ' And', detail: { tokenIds: [1], tokens, temperature: 0, avgLogprob: -0.1, noSpeechProb: 0 } }
    context.emit({ type: 'segment', segment })
    return { type: 'speech', segments: [segment], language: 'en' } as SpeechResult
  }
  const result = await plainScript(job, context)
  if (job.type === 'chat' && job.topLogprobs !== undefined && result.type === 'chat')
    return { ...result, logprobs: result.text ? [logprob(result.text)] : [] } satisfies ChatResult
  if (job.type === 'complete' && job.logprobs !== undefined && result.type === 'complete') return { ...result, logprobs: [logprob(result.text)] }
  return result
}

let server: InProcessServer
let timed: InProcessServer
let png: string
let pdf: string
const jobs = (on: InProcessServer = server) => on.engines.flatMap((e) => e.jobs as EngineJob[])
const lastJob = <T extends EngineJob>(type: T['type'], on: InProcessServer = server): T =>
  jobs(on)
    .filter((j) => j.type === type)
    .at(-1) as T

beforeAll(async () => {
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-protocol-features-'))
  const chat = writeTinyLlama(join(modelsDir, 'tiny.gguf'), { chatTemplate: true, contextLength: 2048 })
  writeTinyMmproj(join(modelsDir, 'mmproj-tiny.gguf'), { textEmbd: chat.embd })
  writeTinyBert(join(modelsDir, 'bert.gguf'))
  writeTinyBert(join(modelsDir, 'ranker.gguf'), { reranker: true })
  writeTinyWhisper(join(modelsDir, 'ggml-whisper.bin'))
  const dataDir = mkdtempSync(join(tmpdir(), 'hearth-protocol-features-data-'))
  writeMcpConfig(dataDir, { calc: { timeout: 5 } })
  server = await startInProcessServer({ modelsDir, dataDir, script, args: ['--ollama-port', '0'] })
  timed = await startInProcessServer({ modelsDir, script, args: ['--request-timeout', '1'] })
  png = `data:image/png;base64,${(await makePng()).toString('base64')}`
  pdf = minimalPdf([['The answer is forty-two.']]).toString('base64')
})

afterAll(async () => {
  await Promise.all([server?.stop(), timed?.stop()])
})

interface Sent {
  status: number
  headers: Headers
  text: string
}

interface Call {
  path: string
  body: Record<string, unknown> | FormData
  /** Ollama's API, where a key is sent its own way; false: Hearth's port. */
  ollama?: boolean
}

/** A request in each protocol's own shape, with `extra` merged into its body. */
const REQUESTS: Record<Protocol, (extra?: Record<string, unknown>) => Call> = {
  'chat completions': (extra = {}) => ({ path: '/v1/chat/completions', body: { model: 'tiny', messages: [{ role: 'user', content: 'Hello' }], ...extra } }),
  completions: (extra = {}) => ({ path: '/v1/completions', body: { model: 'tiny', prompt: 'Once', ...extra } }),
  responses: (extra = {}) => ({ path: '/v1/responses', body: { model: 'tiny', input: 'Hello', store: false, ...extra } }),
  messages: (extra = {}) => ({ path: '/v1/messages', body: { model: 'tiny', max_tokens: 20, messages: [{ role: 'user', content: 'Hello' }], ...extra } }),
  count_tokens: (extra = {}) => ({ path: '/v1/messages/count_tokens', body: { model: 'tiny', messages: [{ role: 'user', content: 'Hello' }], ...extra } }),
  embeddings: (extra = {}) => ({ path: '/v1/embeddings', body: { model: 'bert', input: 'Hello', ...extra } }),
  rerank: (extra = {}) => ({ path: '/v1/rerank', body: { model: 'ranker', query: 'hello', documents: ['hello there', 'goodbye'], ...extra } }),
  speech: (extra = {}) => {
    const form = new FormData()
    form.append('model', 'ggml-whisper')
    form.append('file', new Blob([new Uint8Array(readFileSync(audio!))]), 'jfk.wav')
    for (const [key, value] of Object.entries(extra)) for (const v of [value].flat()) form.append(key, String(v))
    return { path: '/v1/audio/transcriptions', body: form }
  },
  'ollama chat': (extra = {}) => ({
    path: '/api/chat',
    body: { model: 'tiny', messages: [{ role: 'user', content: 'Hello' }], stream: false, ...extra },
    ollama: true,
  }),
  'ollama generate': (extra = {}) => ({ path: '/api/generate', body: { model: 'tiny', prompt: 'Hello', stream: false, ...extra }, ollama: true }),
  'ollama embed': (extra = {}) => ({ path: '/api/embed', body: { model: 'bert', input: 'Hello', ...extra }, ollama: true }),
}

async function send(call: Call, options: { on?: InProcessServer; key?: string; signal?: AbortSignal } = {}): Promise<Sent> {
  const on = options.on ?? server
  const headers: Record<string, string> = { authorization: `Bearer ${options.key ?? on.apiKey}` }
  if (!(call.body instanceof FormData)) headers['content-type'] = 'application/json'
  const body = call.body instanceof FormData ? call.body : JSON.stringify(call.body)
  const res = await fetch(`${on.url}${call.path}`, { method: 'POST', headers, body, ...(options.signal ? { signal: options.signal } : {}) })
  return { status: res.status, headers: res.headers, text: await res.text() }
}

const ok = async (protocol: Protocol, extra: Record<string, unknown>): Promise<Sent> => {
  const sent = await send(REQUESTS[protocol](extra))
  expect(sent.status, `${protocol}: ${sent.text.slice(0, 400)}`).toBe(200)
  return sent
}
const json = (sent: Sent) => JSON.parse(sent.text) as Record<string, any>
const chatJob = () => lastJob<ChatJob>('chat')
const userText = (job: ChatJob) =>
  job.messages.map((m) => (typeof m.content === 'string' ? m.content : (m.content ?? []).map((p) => (p.type === 'text' ? p.text : '')).join('\n'))).join('\n')
const hasImage = (job: ChatJob) => job.messages.some((m) => Array.isArray(m.content) && m.content.some((p) => p.type === 'image'))
const pdfBlock = { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: '' } }
const imageBlock = () => ({ type: 'image', source: { type: 'base64', media_type: 'image/png', data: png.split(',')[1] } })
const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }
const weather = { name: 'weather', description: 'The weather', parameters: schema }

/** For each cell that says yes: a request that asks for the feature, and what shows it was carried. */
const PROBES: Partial<Record<Protocol, Partial<Record<Feature, () => Promise<void>>>>> = {
  'chat completions': {
    documents: async () => {
      await ok('chat completions', {
        messages: [
          {
            role: 'user',
            content: [
              { type: 'file', file: { file_data: `data:application/pdf;base64,${pdf}`, filename: 'a.pdf' } },
              { type: 'text', text: 'What is it?' },
            ],
          },
        ],
      })
      expect(userText(chatJob())).toContain('The answer is forty-two.')
    },
    images: async () => {
      await ok('chat completions', {
        messages: [
          {
            role: 'user',
            content: [
              { type: 'image_url', image_url: { url: png } },
              { type: 'text', text: 'What is it?' },
            ],
          },
        ],
      })
      expect(hasImage(chatJob())).toBe(true)
    },
    tools: async () => {
      await ok('chat completions', { tools: [{ type: 'function', function: weather }] })
      expect(chatJob().tools.map((t) => t.function.name)).toEqual(['weather'])
    },
    'structured output': async () => {
      await ok('chat completions', { response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } })
      expect(chatJob().jsonSchema).toEqual(schema)
    },
    reasoning: async () => {
      await ok('chat completions', { reasoning_effort: 'low' })
      expect(chatJob().reasoningEffort).toBe('low')
    },
    logprobs: async () => {
      const sent = await ok('chat completions', { logprobs: true, top_logprobs: 1 })
      expect(json(sent).choices[0].logprobs.content.length).toBeGreaterThan(0)
    },
  },
  completions: {
    logprobs: async () => {
      const sent = await ok('completions', { logprobs: 1 })
      expect(lastJob<CompleteJob>('complete').logprobs).toBe(1)
      expect(json(sent).choices[0].logprobs).not.toBeNull()
    },
  },
  responses: {
    documents: async () => {
      await ok('responses', {
        input: [
          {
            role: 'user',
            content: [
              { type: 'input_file', file_data: `data:application/pdf;base64,${pdf}`, filename: 'a.pdf' },
              { type: 'input_text', text: 'What is it?' },
            ],
          },
        ],
      })
      expect(userText(chatJob())).toContain('The answer is forty-two.')
    },
    images: async () => {
      await ok('responses', {
        input: [
          {
            role: 'user',
            content: [
              { type: 'input_image', image_url: png },
              { type: 'input_text', text: 'What is it?' },
            ],
          },
        ],
      })
      expect(hasImage(chatJob())).toBe(true)
    },
    tools: async () => {
      await ok('responses', { tools: [{ type: 'function', ...weather }] })
      expect(chatJob().tools.map((t) => t.function.name)).toEqual(['weather'])
    },
    mcp: async () => {
      const sent = await ok('responses', { tools: [{ type: 'mcp', server_label: 'calc', require_approval: 'never' }] })
      expect(json(sent).output[0]).toMatchObject({ type: 'mcp_list_tools', server_label: 'calc' })
      expect(chatJob().tools.map((t) => t.function.name)).toContain('add')
    },
    'structured output': async () => {
      await ok('responses', { text: { format: { type: 'json_schema', name: 'x', schema } } })
      expect(chatJob().jsonSchema).toEqual(schema)
    },
    reasoning: async () => {
      await ok('responses', { reasoning: { effort: 'low' } })
      expect(chatJob().reasoningEffort).toBe('low')
    },
    logprobs: async () => {
      const sent = await ok('responses', { include: ['message.output_text.logprobs'], top_logprobs: 1 })
      expect(json(sent).output.at(-1).content[0].logprobs.length).toBeGreaterThan(0)
    },
  },
  messages: {
    documents: async () => {
      await ok('messages', {
        messages: [
          {
            role: 'user',
            content: [
              { ...pdfBlock, source: { ...pdfBlock.source, data: pdf } },
              { type: 'text', text: 'What is it?' },
            ],
          },
        ],
      })
      expect(userText(chatJob())).toContain('The answer is forty-two.')
    },
    images: async () => {
      await ok('messages', { messages: [{ role: 'user', content: [imageBlock(), { type: 'text', text: 'What is it?' }] }] })
      expect(hasImage(chatJob())).toBe(true)
    },
    tools: async () => {
      await ok('messages', { tools: [{ name: 'weather', description: 'The weather', input_schema: schema }] })
      expect(chatJob().tools.map((t) => t.function.name)).toEqual(['weather'])
    },
    mcp: async () => {
      await ok('messages', { mcp_servers: [{ type: 'url', url: 'stdio://calc', name: 'calc' }] })
      expect(chatJob().tools.map((t) => t.function.name)).toContain('add')
    },
    'structured output': async () => {
      await ok('messages', { output_config: { format: { type: 'json_schema', schema } } })
      expect(chatJob().jsonSchema).toEqual(schema)
    },
    reasoning: async () => {
      await ok('messages', { thinking: { type: 'enabled', budget_tokens: 64 } })
      expect(chatJob().thinkingBudgetTokens).toBe(64)
    },
  },
  count_tokens: {
    documents: async () => {
      await ok('count_tokens', {
        messages: [
          {
            role: 'user',
            content: [
              { ...pdfBlock, source: { ...pdfBlock.source, data: pdf } },
              { type: 'text', text: 'What is it?' },
            ],
          },
        ],
      })
      expect(userText(chatJob())).toContain('The answer is forty-two.')
    },
    images: async () => {
      await ok('count_tokens', { messages: [{ role: 'user', content: [imageBlock(), { type: 'text', text: 'What is it?' }] }] })
      expect(hasImage(chatJob())).toBe(true)
    },
    tools: async () => {
      await ok('count_tokens', { tools: [{ name: 'weather', description: 'The weather', input_schema: schema }] })
      expect(chatJob().tools.map((t) => t.function.name)).toEqual(['weather'])
    },
    mcp: async () => {
      await ok('count_tokens', { mcp_servers: [{ type: 'url', url: 'stdio://calc', name: 'calc' }] })
      expect(chatJob().tools.map((t) => t.function.name)).toContain('add')
    },
  },
  speech: {
    logprobs: async () => {
      const sent = await ok('speech', { 'include[]': 'logprobs' })
      expect(json(sent).logprobs.length).toBeGreaterThan(0)
    },
  },
  'ollama chat': {
    images: async () => {
      await ok('ollama chat', { messages: [{ role: 'user', content: 'What is it?', images: [png.split(',')[1]] }] })
      expect(hasImage(chatJob())).toBe(true)
    },
    tools: async () => {
      await ok('ollama chat', { tools: [{ type: 'function', function: weather }] })
      expect(chatJob().tools.map((t) => t.function.name)).toEqual(['weather'])
    },
    'structured output': async () => {
      await ok('ollama chat', { format: schema })
      expect(chatJob().jsonSchema).toEqual(schema)
    },
    reasoning: async () => {
      await ok('ollama chat', { think: false })
      expect(chatJob().reasoningEffort).toBe('none')
    },
    logprobs: async () => {
      const sent = await ok('ollama chat', { logprobs: true, top_logprobs: 1 })
      expect(json(sent).logprobs.length).toBeGreaterThan(0)
    },
  },
  'ollama generate': {
    images: async () => {
      await ok('ollama generate', { images: [png.split(',')[1]] })
      expect(hasImage(chatJob())).toBe(true)
    },
    'structured output': async () => {
      await ok('ollama generate', { format: 'json' })
      expect(chatJob().jsonSchema).toEqual({})
    },
    reasoning: async () => {
      await ok('ollama generate', { think: false })
      expect(chatJob().reasoningEffort).toBe('none')
    },
    logprobs: async () => {
      const sent = await ok('ollama generate', { logprobs: true })
      expect(json(sent).logprobs.length).toBeGreaterThan(0)
    },
  },
}

/** The cells that say no but where the protocol has a field to try it: refused by name. */
const REFUSALS: Partial<Record<Protocol, Partial<Record<Feature, { extra: Record<string, unknown>; names: string }>>>> = {
  'chat completions': { mcp: { extra: { tools: [{ type: 'mcp', server_label: 'calc' }] }, names: 'tools' } },
  'ollama generate': { tools: { extra: { tools: [{ type: 'function', function: weather }] }, names: 'tools' } },
}

/** A set-aside field of each protocol that has one: the answer's Warning header names it. */
const SET_ASIDE: Partial<Record<Protocol, Record<string, unknown>>> = {
  'chat completions': { verbosity: 'low' },
  responses: { text: { verbosity: 'low' } },
  messages: { tools: [{ type: 'web_search_20250305', name: 'web_search' }] },
  count_tokens: { tools: [{ type: 'web_search_20250305', name: 'web_search' }] },
  'ollama chat': { truncate: true },
  'ollama generate': { truncate: true },
  'ollama embed': { options: { num_gpu: 1 } },
}

describe('the protocol × feature table', () => {
  it('has a cell for every protocol and feature, and docs/api.md shows it as it is', () => {
    for (const p of PROTOCOLS) expect(Object.keys(PROTOCOL_FEATURES[p]).sort(), p).toEqual([...FEATURES].sort())
    const page = readFileSync(join(import.meta.dirname, '../..', 'docs', 'api.md'), 'utf8')
    const shown = /<!-- protocol-features:start[^>]*-->\n([\s\S]*?)\n?<!-- protocol-features:end -->/.exec(page)?.[1]
    expect(shown, 'docs/api.md lacks the protocol-features section').toBeDefined()
    expect(shown!.trim()).toBe(protocolFeaturesMarkdown())
  })

  it('has a probe for every cell that says yes (the pipeline features are tried on every protocol below)', () => {
    const pipeline: Feature[] = ['cancel', 'deadline', 'quotas', 'warnings']
    const missing = PROTOCOLS.flatMap((p) =>
      FEATURES.filter((f) => !pipeline.includes(f) && PROTOCOL_FEATURES[p][f].carried && !PROBES[p]?.[f]).map((f) => `${p} × ${f}`),
    )
    expect(missing).toEqual([])
    const withoutWarning = PROTOCOLS.filter((p) => PROTOCOL_FEATURES[p].warnings.carried && !SET_ASIDE[p])
    expect(withoutWarning).toEqual([])
  })

  for (const protocol of PROTOCOLS) {
    describe(protocol, () => {
      for (const feature of FEATURES) {
        const cell = PROTOCOL_FEATURES[protocol][feature]
        const probe = PROBES[protocol]?.[feature]
        if (cell.carried && probe) it(`carries ${feature}: ${cell.how}`, probe)
        const refusal = REFUSALS[protocol]?.[feature]
        if (!cell.carried && refusal) {
          it(`refuses ${feature} by name: ${cell.why}`, async () => {
            const sent = await send(REQUESTS[protocol](refusal.extra))
            expect(sent.status).toBe(400)
            expect(sent.text).toContain(refusal.names)
          })
        }
      }

      it('warnings: a field set aside is said in the Warning header', async () => {
        const extra = SET_ASIDE[protocol]
        if (!extra) return void expect(PROTOCOL_FEATURES[protocol].warnings.carried).toBe(false)
        const sent = await ok(protocol, extra)
        expect(sent.headers.get('warning')).toMatch(/^299 hearth "/)
      })

      it('cancel: a client that goes stops the engine', async () => {
        hold = true
        try {
          const controller = new AbortController()
          const [before, stoppedBefore] = [jobs().length, stopped]
          const sending = send(REQUESTS[protocol](), { signal: controller.signal }).catch((e: unknown) => e)
          await waitFor(() => jobs().length > before)
          controller.abort()
          await sending
          await waitFor(() => stopped > stoppedBefore)
          await waitFor(() =>
            /\(client closed\)/.test(
              server
                .output()
                .split('\n')
                .filter((l) => l.includes(REQUESTS[protocol]().path))
                .at(-1) ?? '',
            ),
          )
        } finally {
          hold = false
        }
      })

      it('deadline: past the request timeout, the protocol’s own 408', async () => {
        hold = true
        try {
          const sent = await send(REQUESTS[protocol](), { on: timed })
          expect(sent.status, sent.text).toBe(408)
          if (REQUESTS[protocol]().ollama) expect(JSON.parse(sent.text)).toEqual({ error: expect.stringContaining('longer than the limit') })
          else if (protocol === 'messages' || protocol === 'count_tokens')
            expect(JSON.parse(sent.text)).toMatchObject({ type: 'error', error: { message: expect.stringContaining('longer than the limit') } })
          else expect(JSON.parse(sent.text)).toMatchObject({ error: { code: 'request_timeout' } })
        } finally {
          hold = false
        }
      })

      it('quotas: a key past its tokens for the day gets the protocol’s own 429', async () => {
        const made = await send({ path: '/api/keys', body: { label: `${protocol} quota`, tokens_per_day: 1 } })
        const key = (JSON.parse(made.text) as { key: string }).key
        await send(REQUESTS[protocol](), { key })
        await waitFor(async () => (await send(REQUESTS[protocol](), { key })).status === 429)
        const refused = await send(REQUESTS[protocol](), { key })
        expect(refused.status).toBe(429)
        if (REQUESTS[protocol]().ollama) expect(JSON.parse(refused.text)).toEqual({ error: expect.any(String) })
        else if (protocol === 'messages' || protocol === 'count_tokens')
          expect(JSON.parse(refused.text)).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } })
        else expect(JSON.parse(refused.text)).toMatchObject({ error: { code: 'insufficient_quota' } })
      })
    })
  }
})

async function waitFor(condition: () => boolean | Promise<boolean>, ms = 5_000): Promise<void> {
  const until = Date.now() + ms
  while (!(await condition())) {
    if (Date.now() > until) throw new Error('timed out waiting')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
