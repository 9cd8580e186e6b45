/**
 * The contract Hearth keeps in front of any engine, tested in-process with scripted engines: what
 * a request turns into, the shape and order of streams as the official client reads them, and
 * what a client sees when the engine fails, stalls or is too busy, and when the client leaves.
 */
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import type { ChatJob } from '../../engines/engine-jobs.ts'
import { ModelError } from '../../engines/errors.ts'
import { plainScript, SCRIPTED_WORDS, startInProcessServer, type InProcessServer, type Script } from '../support/in-process-server.ts'
import { postJson } from '../support/server-process.ts'
import { writeTinyBert, writeTinyLlama } from '../support/tiny-models.ts'

let modelsDir: string
const servers: InProcessServer[] = []
const hi = [{ role: 'user' as const, content: 'Hi' }]

beforeAll(() => {
  modelsDir = mkdtempSync(join(tmpdir(), 'hearth-contract-'))
  writeTinyLlama(join(modelsDir, 'tiny.gguf'), { contextLength: 512 })
  writeTinyBert(join(modelsDir, 'bert.gguf'))
  writeTinyBert(join(modelsDir, 'reranker.gguf'), { reranker: true })
  writeFileSync(
    join(modelsDir, 'models.json'),
    JSON.stringify({
      models: [
        { id: 'tiny', file: 'tiny.gguf', max_completion_tokens: 100 },
        { id: 'bert', file: 'bert.gguf' },
        { id: 'reranker', file: 'reranker.gguf' },
      ],
    }),
  )
})

afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()))
})

async function serve(script: Script = plainScript, args: string[] = []): Promise<{ server: InProcessServer; client: OpenAI }> {
  const server = await startInProcessServer({ modelsDir, script, args })
  servers.push(server)
  return { server, client: new OpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey, maxRetries: 0 }) }
}

/** A script whose chat jobs wait until the test lets them go (or the request is abandoned). */
function gatedScript() {
  const releases = new Set<() => void>()
  const aborted: string[] = []
  const script: Script = async (job, context) => {
    await new Promise<void>((resolve, reject) => {
      releases.add(resolve)
      context.signal?.addEventListener('abort', () => {
        releases.delete(resolve)
        aborted.push(job.type)
        reject(new ModelError('cancelled', 'the request was cancelled'))
      })
    })
    return plainScript(job, context)
  }
  const releaseAll = () => {
    for (const release of releases) release()
    releases.clear()
  }
  return { script, releaseAll, aborted, waiting: () => releases.size }
}

const until = async (check: () => boolean, ms = 5000) => {
  const end = Date.now() + ms
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out waiting')
    await new Promise((r) => setTimeout(r, 5))
  }
}

describe('what a request becomes', () => {
  it('hands the engine the sampling the client asked for, and the defaults where it asked for none', async () => {
    const { server, client } = await serve()
    await client.chat.completions.create({ model: 'tiny', messages: hi, temperature: 0.7, top_p: 0.5, seed: 42, stop: ['END'], max_completion_tokens: 3 })
    await client.chat.completions.create({ model: 'tiny', messages: hi })
    const [asked, plain] = server.engines[0]!.jobs as ChatJob[]
    expect(asked).toMatchObject({
      type: 'chat',
      temperature: 0.7,
      topP: 0.5,
      seed: 42,
      stop: ['END'],
      maxTokens: 3,
      messages: [{ role: 'user', content: 'Hi' }],
    })
    expect(plain).toMatchObject({ temperature: 0, topP: 0.9, topK: 50, maxTokens: undefined, maxCompletionTokens: 100, tools: [] })
  })

  it('sets aside hints it has no local equivalent for, and says so in a Warning header', async () => {
    const { server } = await serve()
    const res = await postJson(server, '/v1/chat/completions', { model: 'tiny', messages: hi, web_search_options: {}, verbosity: 'low' })
    expect(res.status).toBe(200)
    const warning = res.headers.get('warning')!
    expect(warning).toMatch(/^299 hearth "web search was left out: Hearth runs no hosted tools", 299 hearth "'verbosity' was set aside/)
    const quiet = await postJson(server, '/v1/chat/completions', { model: 'tiny', messages: hi, prompt_cache_key: 'conversation-7', safety_identifier: 'u1' })
    expect(quiet.headers.get('warning')).toBeNull()
    expect((server.engines[0]!.jobs.at(-1) as ChatJob).conversationKey).toBe('conversation-7')
  })

  it("serves a token limit past the model's own, capped at the model's (agents send 32000 to every model)", async () => {
    const { server } = await serve()
    const res = await postJson(server, '/v1/chat/completions', { model: 'tiny', messages: hi, max_completion_tokens: 32000 })
    expect(res.status).toBe(200)
    expect((server.engines[0]!.jobs[0] as ChatJob).maxTokens).toBe(100)
  })
})

describe('streams, as the official client reads them', () => {
  it('sends the role first, the text in pieces, the finish on its own and usage last', async () => {
    const { client } = await serve()
    const stream = await client.chat.completions.create({ model: 'tiny', messages: hi, stream: true, stream_options: { include_usage: true } })
    const chunks = []
    for await (const chunk of stream) chunks.push(chunk)
    expect(chunks[0]!.choices[0]!.delta.role).toBe('assistant')
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(SCRIPTED_WORDS.join(''))
    const finish = chunks.findIndex((c) => c.choices[0]?.finish_reason)
    expect(chunks[finish]!.choices[0]).toMatchObject({ finish_reason: 'stop', delta: {} })
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 7, completion_tokens: SCRIPTED_WORDS.length } })
    expect(finish).toBe(chunks.length - 2)
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1)
  })

  it('says length when the limit cut the answer', async () => {
    const { client } = await serve()
    const answer = await client.chat.completions.create({ model: 'tiny', messages: hi, max_tokens: 2 })
    expect(answer.choices[0]).toMatchObject({ finish_reason: 'length', message: { role: 'assistant', content: 'Once upon' } })
    expect(answer.usage).toMatchObject({ completion_tokens: 2, total_tokens: 9 })
  })
})

describe('when the engine fails', () => {
  const failing =
    (code: 'context_length_exceeded' | 'engine_crashed', after: number): Script =>
    (job, context) => {
      for (const text of SCRIPTED_WORDS.slice(0, after)) context.emit({ type: 'text', text })
      throw new ModelError(code, `scripted ${code}`, code === 'context_length_exceeded' ? 'messages' : null)
    }

  it('before the first token: the error body with its status, never a 500 for a known failure', async () => {
    const { server } = await serve(failing('context_length_exceeded', 0))
    const res = await postJson(server, '/v1/chat/completions', { model: 'tiny', messages: hi })
    expect(res.status).toBe(400)
    expect(res.json).toEqual({
      error: { message: expect.stringContaining('context_length_exceeded'), type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' },
    })
  })

  it('mid-stream: the pieces sent stay, the error is the last event, and there is no [DONE]', async () => {
    const { server, client } = await serve(failing('engine_crashed', 2))
    const res = await postJson(server, '/v1/chat/completions', { model: 'tiny', messages: hi, stream: true })
    expect(res.status).toBe(200)
    const events = res.text.split('\n\n').filter(Boolean)
    expect(events.at(-1)).toMatch(/^data: \{"error":\{.*"code":"engine_crashed"/)
    expect(res.text).not.toContain('[DONE]')
    expect(res.text).toContain('"content":"Once"')
    // The official client turns that event into a thrown APIError.
    const stream = await client.chat.completions.create({ model: 'tiny', messages: hi, stream: true })
    await expect(async () => {
      for await (const _ of stream);
    }).rejects.toThrow(/engine_crashed/)
  })
})

describe('busy, stalled and abandoned requests', () => {
  let gate: ReturnType<typeof gatedScript>
  afterEach(() => gate?.releaseAll())

  it("queues past the model's slot, then answers 503 overloaded with Retry-After once the queue is full", async () => {
    gate = gatedScript()
    const { server } = await serve(gate.script, ['--max-queue', '1'])
    const running = postJson(server, '/v1/chat/completions', { model: 'tiny', messages: hi })
    await until(() => gate.waiting() === 1)
    const queued = postJson(server, '/v1/chat/completions', { model: 'tiny', messages: hi })
    await new Promise((r) => setTimeout(r, 50))
    const refused = await postJson(server, '/v1/chat/completions', { model: 'tiny', messages: hi })
    expect(refused.status).toBe(503)
    expect(refused.json.error.code).toBe('overloaded')
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
    gate.releaseAll()
    expect((await running).status).toBe(200)
    await until(() => gate.waiting() === 1)
    gate.releaseAll()
    expect((await queued).status).toBe(200)
  })

  it('a request past --request-timeout gets 408 and its engine work is cancelled', async () => {
    gate = gatedScript()
    const { server } = await serve(gate.script, ['--request-timeout', '0.2'])
    const res = await postJson(server, '/v1/chat/completions', { model: 'tiny', messages: hi })
    expect(res.status).toBe(408)
    expect(res.json.error.code).toBe('request_timeout')
    expect(gate.aborted).toEqual(['chat'])
  })

  it('a stream cut by --request-timeout is logged, listed and counted as cut, with the limit named, not as a 200', async () => {
    // Words, then nothing until the limit: the 200 and part of the answer are out when the time runs out.
    const stalls: Script = async (job, context) => {
      context.emit({ type: 'text', text: 'Once' })
      await new Promise<void>((_, reject) => context.signal?.addEventListener('abort', () => reject(new ModelError('cancelled', 'cancelled'))))
      return plainScript(job, context)
    }
    const { server } = await serve(stalls, ['--request-timeout', '0.3'])
    const res = await postJson(server, '/v1/chat/completions', { model: 'tiny', messages: hi, stream: true })
    expect(res.status).toBe(200)
    expect(res.text).toMatch(/data: \{"error":\{.*"code":"request_timeout"/)
    await until(() => /POST \/v1\/chat\/completions 408/.test(server.output()))
    expect(server.output()).toMatch(/POST \/v1\/chat\/completions 408 \(cut mid-stream after 200: The request took longer than the limit of 0 s/)
    const history = (await (await fetch(`${server.url}/api/requests`, { headers: { authorization: `Bearer ${server.apiKey}` } })).json()) as {
      requests: Array<Record<string, unknown>>
    }
    expect(history.requests.find((r) => r.path === '/v1/chat/completions')).toMatchObject({ status: 408, cut: true, code: 'request_timeout' })
    const metrics = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${server.apiKey}` } })).text()
    expect(metrics).toMatch(/hearth_http_requests_total\{[^}]*status="408"[^}]*\} 1/)
    expect(metrics).not.toMatch(/hearth_http_requests_total\{[^}]*route="\/v1\/chat\/completions"[^}]*status="200"/)
  })

  it('a client that leaves mid-answer cancels the engine work, and the model serves the next one', async () => {
    gate = gatedScript()
    const { client } = await serve(gate.script)
    const controller = new AbortController()
    const leaving = client.chat.completions.create({ model: 'tiny', messages: hi, stream: true }, { signal: controller.signal })
    await until(() => gate.waiting() === 1)
    controller.abort()
    await expect(leaving).rejects.toThrow()
    await until(() => gate.aborted.length === 1)
    const next = client.chat.completions.create({ model: 'tiny', messages: hi })
    await until(() => gate.waiting() === 1)
    gate.releaseAll()
    expect((await next).choices[0]!.message.content).toBe(SCRIPTED_WORDS.join(''))
  })
})

describe('embeddings and rerank', () => {
  it('sends embeddings as floats or base64 that decode to the same numbers', async () => {
    const { client } = await serve()
    const floats = await client.embeddings.create({ model: 'bert', input: ['one', 'two'], encoding_format: 'float' })
    // The client asks for base64 by default and decodes it itself.
    const decoded = await client.embeddings.create({ model: 'bert', input: ['one', 'two'] })
    expect(floats.data.map((d) => d.embedding)).toEqual([
      [1, 0, 0, 0],
      [0, 1, 0, 0],
    ])
    expect(decoded.data.map((d) => d.embedding)).toEqual(floats.data.map((d) => d.embedding))
    expect(floats.usage).toEqual({ prompt_tokens: 6, total_tokens: 6 })
  })

  it("ranks documents by the engine's scores, most relevant first, with the indexes the client sent", async () => {
    const unusual: Script = (job, context) =>
      job.type === 'rerank' ? { type: 'rerank', scores: [0.1, 0.9, 0.5], promptTokens: 12 } : plainScript(job, context)
    const { server } = await serve(unusual)
    const res = await postJson(server, '/v1/rerank', { model: 'reranker', query: 'q', documents: ['a', 'b', 'c'], top_n: 2 })
    expect(res.status, res.text).toBe(200)
    expect(res.json.results.map((r: { index: number }) => r.index)).toEqual([1, 2])
  })
})
