/**
 * Ollama's API on Hearth, through Ollama's own JavaScript client (`ollama` on npm), with the app in
 * this process and scripted engines: the shapes its clients parse, the options each request turns
 * into, the keyless loopback port, keep_alive, and bad input answered in Ollama's words.
 */
import { copyFileSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Ollama } from 'ollama'
import OpenAI, { toFile } from 'openai'
import type { ChatJob, CompleteJob, EngineJob } from '../../engines/engine-jobs.ts'
import { plainScript, startInProcessServer, type InProcessServer, type Script } from '../support/in-process-server.ts'
import { writeTinyBert, writeTinyLlama } from '../support/tiny-models.ts'
import { FakeHub } from '../support/fake-hub.ts'

/** Answers as plainScript does, but calls a tool where the request offers one. */
const script: Script = (job, context) => {
  if (job.type === 'chat' && job.tools.length > 0 && job.toolChoice !== 'none') {
    context.emit({ type: 'tool_call', index: 0, id: 'call_1', name: job.tools[0]!.function.name, arguments: '{"city":"Oslo"}' })
    return {
      type: 'chat',
      text: '',
      reasoning: '',
      toolCalls: [{ id: 'call_1', type: 'function', function: { name: job.tools[0]!.function.name, arguments: '{"city":"Oslo"}' } }],
      logprobs: undefined,
      finishReason: 'tool_calls',
      promptTokens: 9,
      completionTokens: 6,
      reasoningTokens: 0,
      timings: { promptMs: 2, promptPerSecond: 4500, predictedMs: 6, predictedPerSecond: 1000 },
    }
  }
  return plainScript(job, context)
}

let server: InProcessServer
let hub: FakeHub
let keyless: Ollama
let keyed: Ollama
const lastJob = <T extends EngineJob>(): T => server.engines.flatMap((e) => e.jobs).at(-1) as T

beforeAll(async () => {
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-ollama-api-'))
  const scratch = mkdtempSync(join(tmpdir(), 'hearth-ollama-api-files-'))
  writeTinyLlama(join(scratch, 'tiny.gguf'), { chatTemplate: true })
  copyFileSync(join(scratch, 'tiny.gguf'), join(modelsDir, 'tiny.gguf'))
  writeTinyBert(join(modelsDir, 'bert.gguf'))
  // A repository on a stand-in for the hub, as `hf.co/<owner>/<repo>:<quantization>` names it.
  hub = await FakeHub.start()
  hub.put('acme/tiny-GGUF/tiny-Q8_0.gguf', readFileSync(join(scratch, 'tiny.gguf')))
  hub.put('acme/tiny-GGUF/tiny-F16.gguf', readFileSync(join(scratch, 'tiny.gguf')))
  server = await startInProcessServer({ modelsDir, script, args: ['--ollama-port', '0'], env: { HEARTH_HF_ENDPOINT: hub.url } })
  keyless = new Ollama({ host: server.ollamaUrl! })
  keyed = new Ollama({ host: server.url, headers: { Authorization: `Bearer ${server.apiKey}` } })
})

afterAll(async () => {
  await server?.stop()
  await hub?.close()
})

describe("Ollama's API through its JavaScript client", () => {
  it('lists the models by their Ollama names, with details from the GGUF', async () => {
    const { models } = await keyless.list()
    const tiny = models.find((m) => m.name === 'tiny:latest')
    expect(tiny).toMatchObject({ model: 'tiny:latest', details: { format: 'gguf', family: 'llama' } })
    expect(tiny!.size).toBeGreaterThan(0)
    expect(tiny!.digest).toMatch(/^[0-9a-f]{64}$/)
    expect(models.map((m) => m.name)).toContain('bert:latest')
  })

  it('shows a model: its context length, capabilities and template', async () => {
    const shown = await keyless.show({ model: 'tiny' })
    // Typed as a Map by the client; on the wire (and at run time) a plain object.
    expect((shown.model_info as unknown as Record<string, number>)['llama.context_length']).toBeGreaterThan(0)
    expect(shown.capabilities).toContain('completion')
    expect(shown.template).toContain('im_start')
    expect(shown.details.family).toBe('llama')
  })

  it('chats whole, with Ollama’s counts and durations', async () => {
    const answer = await keyless.chat({ model: 'tiny', messages: [{ role: 'user', content: 'Hello' }] })
    expect(answer.message).toMatchObject({ role: 'assistant', content: 'Once upon a time.' })
    expect(answer).toMatchObject({ done: true, done_reason: 'stop', eval_count: 5, prompt_eval_count: 7 })
    expect(Number.isInteger(answer.total_duration) && answer.total_duration > 0).toBe(true)
    // Ollama's defaults, where the request says nothing.
    expect(lastJob<ChatJob>()).toMatchObject({ temperature: 0.8, topK: 40, topP: 0.9 })
  })

  it('streams a chat as lines, the last one done with its reason', async () => {
    const parts: string[] = []
    let last
    for await (const part of await keyless.chat({ model: 'tiny:latest', messages: [{ role: 'user', content: 'Hello' }], stream: true })) {
      parts.push(part.message.content)
      last = part
    }
    expect(parts.join('')).toBe('Once upon a time.')
    expect(last).toMatchObject({ done: true, done_reason: 'stop', eval_count: 5 })
  })

  it('honours options that change the answer: sampling, min_p, repeat penalty, num_predict, stop, seed', async () => {
    const answer = await keyless.chat({
      model: 'tiny',
      messages: [{ role: 'user', content: 'Hello' }],
      options: {
        temperature: 0.2,
        top_k: 5,
        top_p: 0.5,
        min_p: 0.1,
        repeat_penalty: 1.2,
        repeat_last_n: 32,
        num_predict: 2,
        stop: ['\n'],
        seed: 42,
        num_ctx: 4096,
      },
    })
    expect(answer.message.content).toBe('Once upon')
    expect(answer.done_reason).toBe('length')
    expect(lastJob<ChatJob>()).toMatchObject({
      temperature: 0.2,
      topK: 5,
      topP: 0.5,
      maxTokens: 2,
      stop: ['\n'],
      seed: 42,
      extraSamplers: { minP: 0.1, repeatPenalty: 1.2, repeatLastN: 32 },
    })
  })

  it('calls tools, arguments as an object, and takes the results back without ids', async () => {
    const tools = [
      { type: 'function', function: { name: 'weather', description: 'The weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
    ]
    const answer = await keyless.chat({ model: 'tiny', messages: [{ role: 'user', content: 'Weather in Oslo?' }], tools })
    expect(answer.message.tool_calls).toEqual([
      expect.objectContaining({ function: expect.objectContaining({ name: 'weather', arguments: { city: 'Oslo' } }) }),
    ])
    await keyless.chat({
      model: 'tiny',
      messages: [
        { role: 'user', content: 'Weather in Oslo?' },
        { role: 'assistant', content: '', tool_calls: [{ function: { name: 'weather', arguments: { city: 'Oslo' } } }] },
        { role: 'tool', content: 'Sunny', tool_name: 'weather' },
      ],
    })
    const job = lastJob<ChatJob>()
    const call = job.messages[1] as { tool_calls: Array<{ id: string; function: { arguments: string } }> }
    expect(call.tool_calls[0]!.function.arguments).toBe('{"city":"Oslo"}')
    expect(job.messages[2]).toMatchObject({ role: 'tool', content: 'Sunny', tool_call_id: call.tool_calls[0]!.id })
  })

  it('turns format into structured output and think: false into no thinking', async () => {
    const schema = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }
    await keyless.chat({ model: 'tiny', messages: [{ role: 'user', content: 'Name?' }], format: schema, think: false })
    expect(lastJob<ChatJob>()).toMatchObject({ jsonSchema: schema, reasoningEffort: 'none' })
    await keyless.generate({ model: 'tiny', prompt: 'Name?', format: 'json' })
    expect(lastJob<ChatJob>().jsonSchema).toEqual({})
  })

  it('generates from a prompt in the template, and raw or with a suffix as text', async () => {
    const answer = await keyless.generate({ model: 'tiny', prompt: 'Hello', system: 'Be brief' })
    expect(answer).toMatchObject({ response: 'Once upon a time.', done: true, done_reason: 'stop' })
    expect(lastJob<ChatJob>().messages).toEqual([
      { role: 'system', content: 'Be brief' },
      { role: 'user', content: 'Hello' },
    ])
    await keyless.generate({ model: 'tiny', prompt: 'def add(a, b):', suffix: '\n    return c', raw: true })
    expect(lastJob<CompleteJob>()).toMatchObject({ type: 'complete', prompt: 'def add(a, b):', suffix: '\n    return c' })
  })

  it('embeds, with /api/embed and the older /api/embeddings', async () => {
    const embedded = await keyless.embed({ model: 'bert', input: ['one', 'two'] })
    expect(embedded.embeddings).toHaveLength(2)
    expect(embedded.embeddings[0]).toHaveLength(4)
    const legacy = await keyless.embeddings({ model: 'bert', prompt: 'one' })
    expect(legacy.embedding).toHaveLength(4)
  })

  it('pulls a GGUF from Hugging Face by its Ollama name, with progress, and serves it under that name', async () => {
    const statuses: string[] = []
    for await (const progress of await keyless.pull({ model: 'hf.co/acme/tiny-GGUF:Q8_0', stream: true })) statuses.push(progress.status)
    expect(statuses[0]).toBe('pulling manifest')
    expect(statuses.at(-1)).toBe('success')
    expect(statuses.some((s) => s.startsWith('pulling tiny-Q8_0.gguf'))).toBe(true)
    expect((await keyless.list()).models.map((m) => m.name)).toContain('hf.co/acme/tiny-GGUF:Q8_0')
    expect((await keyless.chat({ model: 'hf.co/acme/tiny-GGUF:Q8_0', messages: [{ role: 'user', content: 'Hi' }] })).message.content).toBe('Once upon a time.')
    // Pulled again: there already, nothing fetched.
    expect(await keyless.pull({ model: 'hf.co/acme/tiny-GGUF:Q8_0' })).toMatchObject({ status: 'success' })
    const missing = await keyless.pull({ model: 'hf.co/acme/tiny-GGUF:Q2_K' }).catch((e: unknown) => e)
    expect(missing).toMatchObject({ status_code: 404, error: expect.stringContaining('tiny-Q8_0.gguf, tiny-F16.gguf') })
  })

  it('copies a model under a second name, and deleting the copy leaves the first', async () => {
    await keyless.copy({ source: 'tiny', destination: 'tiny-copy' })
    expect((await keyless.list()).models.map((m) => m.name)).toEqual(expect.arrayContaining(['tiny:latest', 'tiny-copy:latest']))
    await keyless.delete({ model: 'tiny-copy' })
    const names = (await keyless.list()).models.map((m) => m.name)
    expect(names).toContain('tiny:latest')
    expect(names).not.toContain('tiny-copy:latest')
    expect((await keyless.chat({ model: 'tiny', messages: [{ role: 'user', content: 'Hello' }] })).message.content).toBe('Once upon a time.')
  })

  it('loads with an empty request, lists it as running, and unloads with keep_alive 0', async () => {
    const loaded = await keyless.generate({ model: 'tiny', prompt: '', keep_alive: '10m' })
    expect(loaded.done_reason).toBe('load')
    const { models } = await keyless.ps()
    const running = models.find((m) => m.name === 'tiny:latest')
    expect(running).toBeDefined()
    expect(new Date(running!.expires_at).getTime()).toBeGreaterThan(Date.now() + 9 * 60_000)
    const unloaded = await keyless.generate({ model: 'tiny', prompt: '', keep_alive: 0 })
    expect(unloaded.done_reason).toBe('unload')
    expect((await keyless.ps()).models.map((m) => m.name)).not.toContain('tiny:latest')
  })

  it('unloads a model right after a request with keep_alive 0', async () => {
    await keyless.chat({ model: 'tiny', messages: [{ role: 'user', content: 'Hello' }], keep_alive: 0 })
    await new Promise((r) => setTimeout(r, 50))
    expect(server.context.scheduler.loadedModelIds()).not.toContain('tiny')
  })

  it("answers a model it does not have with Ollama's 404, which the client throws", async () => {
    const error = await keyless.chat({ model: 'llama3.2:3b', messages: [{ role: 'user', content: 'Hi' }] }).catch((e: unknown) => e)
    expect(error).toMatchObject({ name: 'ResponseError', status_code: 404, error: "model 'llama3.2:3b' not found" })
  })

  it('refuses what it cannot honour by name, in Ollama’s shape', async () => {
    const refused = async (request: Promise<unknown>) => await request.catch((e: unknown) => e)
    expect(await refused(keyless.chat({ model: 'tiny', messages: [{ role: 'user', content: 'Hi' }], options: { tfs_z: 0.9 } }))).toMatchObject({
      status_code: 400,
      error: expect.stringContaining('tfs_z'),
    })
    expect(await refused(keyless.generate({ model: 'tiny', prompt: 'Hi', template: '{{ .Prompt }}' }))).toMatchObject({
      status_code: 400,
      error: expect.stringContaining("'template'"),
    })
    expect(await refused(keyless.chat({ model: 'tiny', messages: [{ role: 'user', content: 'Hi' }], format: 'xml' }))).toMatchObject({
      status_code: 400,
      error: expect.stringContaining('format'),
    })
    expect(await refused(keyless.chat({ model: 'tiny', messages: [{ role: 'user', content: 'Hi' }], keep_alive: 'soon' }))).toMatchObject({
      status_code: 400,
      error: expect.stringContaining('keep_alive'),
    })
    expect(await refused(keyless.chat({ model: 'tiny', messages: [{ role: 'user', content: 'Hi' }], think: true }))).toMatchObject({
      status_code: 400,
      error: '"tiny" does not support thinking',
    })
    expect(await refused(keyless.chat({ model: 'bert', messages: [{ role: 'user', content: 'Hi' }] }))).toMatchObject({ status_code: 400 })
    expect(await refused(keyless.embed({ model: 'tiny', input: 'x' }))).toMatchObject({ status_code: 400 })
    // Ollama's library is pulled from its registry, which this machine cannot reach: said, as a 502.
    expect(await refused(keyless.pull({ model: 'llama3.2:3b' }))).toMatchObject({ status_code: 502, error: expect.stringContaining('registry.ollama.ai') })
    expect(await refused(keyless.pull({ model: 'a/b/c/d:1' }))).toMatchObject({ status_code: 400, error: expect.stringContaining('a/b/c/d:1') })
  })

  it('answers bad bodies with 400 and the reason, and stays up', async () => {
    for (const body of [
      '{',
      '[]',
      '{"model": "tiny", "messages": "hi"}',
      '{"model": "tiny", "messages": [{"role": "wizard", "content": "x"}]}',
      '{"model": 7}',
    ]) {
      const response = await fetch(`${server.ollamaUrl}/api/chat`, { method: 'POST', body })
      expect(response.status, body).toBe(400)
      expect(typeof ((await response.json()) as { error: unknown }).error, body).toBe('string')
    }
    expect((await keyless.version()).version).toMatch(/^\d+\.\d+\.\d+$/)
  })
})

describe('keys on the two ports', () => {
  it("needs a key on Hearth's port, and says so in Ollama's shape", async () => {
    const response = await fetch(`${server.url}/api/tags`)
    expect(response.status).toBe(401)
    expect(await response.json()).toEqual({ error: expect.stringContaining('API key') })
    expect((await keyed.list()).models.length).toBeGreaterThan(0)
    expect((await keyed.chat({ model: 'tiny', messages: [{ role: 'user', content: 'Hi' }] })).message.content).toBe('Once upon a time.')
  })

  it('lets a program in on the Ollama port without a key or with any key not of Hearth’s, as Ollama does', async () => {
    expect(await (await fetch(`${server.ollamaUrl}/`)).text()).toBe('Ollama is running')
    // Tools set up for Ollama send a key of their own ("ollama", as Ollama's docs write it).
    const anyKey = new Ollama({ host: server.ollamaUrl!, headers: { Authorization: 'Bearer ollama' } })
    expect((await anyKey.list()).models.length).toBeGreaterThan(0)
    expect((await new Ollama({ host: server.ollamaUrl!, headers: { Authorization: `Bearer ${server.apiKey}` } }).list()).models.length).toBeGreaterThan(0)
  })

  it('lets in the page origins Ollama lets in by default, and no other page', async () => {
    const preflight = (origin: string) =>
      fetch(`${server.ollamaUrl}/api/chat`, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
      })
    for (const origin of ['http://localhost:3000', 'vscode-webview://abc123', 'app://some-app']) {
      const answer = await preflight(origin)
      expect(answer.status, origin).toBeLessThan(300)
      expect(answer.headers.get('access-control-allow-origin'), origin).toBe(origin)
    }
    expect((await preflight('https://evil.example')).status).toBe(403)
    // A page elsewhere cannot make its chat run on this computer, even without a preflight.
    const write = await fetch(`${server.ollamaUrl}/api/generate`, {
      method: 'POST',
      headers: { origin: 'https://evil.example', 'content-type': 'text/plain' },
      body: '{"model": "tiny", "prompt": "hi"}',
    })
    expect(write.status).toBe(403)
  })

  it('serves what Ollama serves on the Ollama port, keyless: its /api and the OpenAI- and Anthropic-compatible /v1, nothing of Hearth’s own', async () => {
    for (const path of ['/api/models', '/api/keys', '/api/requests', '/metrics']) {
      expect((await fetch(`${server.ollamaUrl}${path}`)).status, path).toBe(404)
    }
    const listed = await fetch(`${server.ollamaUrl}/v1/models`)
    expect(listed.status).toBe(200)
    expect(((await listed.json()) as { data: Array<{ id: string }> }).data.map((m) => m.id)).toContain('tiny')
    // An unknown /v1 path is OpenAI's 404, not Ollama's.
    expect(await (await fetch(`${server.ollamaUrl}/v1/nothing`)).json()).toMatchObject({ error: { code: 'unknown_url' } })
  })

  it("takes a model's Ollama name on /v1 (tiny:latest for tiny), as Ollama's own /v1 does", async () => {
    // Tools set up for Ollama name the model as `ollama list` shows it.
    const openai = new OpenAI({ baseURL: `${server.ollamaUrl}/v1`, apiKey: 'ollama', maxRetries: 0 })
    const answer = await openai.chat.completions.create({ model: 'tiny:latest', messages: [{ role: 'user', content: 'Hi' }] })
    expect(answer.choices[0]!.message.content).toBe('Once upon a time.')
    const message = await fetch(`${server.ollamaUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'ollama' },
      body: JSON.stringify({ model: 'tiny:latest', max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] }),
    })
    expect(message.status).toBe(200)
    expect((await openai.models.retrieve('tiny:latest')).id).toBe('tiny')
    // Another tag is another model.
    expect(await openai.chat.completions.create({ model: 'tiny:7b', messages: [{ role: 'user', content: 'Hi' }] }).catch((e: unknown) => e)).toMatchObject({
      status: 404,
    })
  })

  it("lets a keyless program see none of the files and responses kept for Hearth's keys, nor run MCP tools", async () => {
    const keyed = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey, maxRetries: 0 })
    const anyone = new OpenAI({ baseURL: `${server.ollamaUrl}/v1`, apiKey: 'ollama', maxRetries: 0 })
    const secret = await keyed.files.create({ file: await toFile(Buffer.from('The meeting is on Tuesday.'), 'notes.txt'), purpose: 'user_data' })
    const stored = await keyed.responses.create({ model: 'tiny', input: 'Hi' })
    // Any program on this computer reaches the Ollama port; the person's documents and conversations stay theirs.
    expect((await anyone.files.list()).data.map((f) => f.id)).not.toContain(secret.id)
    expect(await anyone.files.retrieve(secret.id).catch((e: unknown) => e)).toMatchObject({ status: 404 })
    expect(await anyone.files.content(secret.id).catch((e: unknown) => e)).toMatchObject({ status: 404 })
    expect(await anyone.responses.retrieve(stored.id).catch((e: unknown) => e)).toMatchObject({ status: 404 })
    // What keyless programs keep is theirs alone, and the server's key does not see it either.
    const theirs = await anyone.files.create({ file: await toFile(Buffer.from('mine'), 'mine.txt'), purpose: 'user_data' })
    expect((await anyone.files.list()).data.map((f) => f.id)).toContain(theirs.id)
    expect((await keyed.files.list()).data.map((f) => f.id)).not.toContain(theirs.id)
    // MCP tools run as the person: not for a program without a key, which the server's key on the same port may.
    const mcp = { model: 'tiny', input: 'Hi', tools: [{ type: 'mcp' as const, server_label: 'files', require_approval: 'never' as const }] }
    expect(await anyone.responses.create(mcp).catch((e: unknown) => e)).toMatchObject({ status: 403, code: 'mcp_not_allowed' })
    const withKey = new OpenAI({ baseURL: `${server.ollamaUrl}/v1`, apiKey: server.apiKey, maxRetries: 0 })
    expect(await withKey.responses.create(mcp).catch((e: unknown) => e)).toMatchObject({ status: 400, code: 'mcp_server_not_found' })
  })

  it('answers the ollama.com account routes as a server with no account and no cloud', async () => {
    // `ollama signin`, `signout` and `push` ask these first; `ollama launch` reads the cloud's status.
    for (const path of ['/api/me', '/api/signout']) {
      const answer = await fetch(`${server.ollamaUrl}${path}`, { method: 'POST' })
      expect(answer.status, path).toBe(400)
      expect(await answer.json(), path).toEqual({ error: expect.stringContaining('no ollama.com account') })
    }
    expect(await (await fetch(`${server.ollamaUrl}/api/status`)).json()).toEqual({ cloud: { disabled: true, source: 'config' } })
  })
})

describe("LangChain's ChatOllama and the AI SDK's Ollama provider", () => {
  it('LangChain: invoke, stream, tools and embeddings', async () => {
    const { ChatOllama, OllamaEmbeddings } = await import('@langchain/ollama')
    const { tool } = await import('@langchain/core/tools')
    const { z } = await import('zod')
    const chat = new ChatOllama({ baseUrl: server.url, model: 'tiny', headers: { Authorization: `Bearer ${server.apiKey}` }, temperature: 0 })
    expect((await chat.invoke('Hello')).content).toBe('Once upon a time.')
    const pieces: string[] = []
    for await (const chunk of await chat.stream('Hello')) pieces.push(String(chunk.content))
    expect(pieces.join('')).toBe('Once upon a time.')
    expect(lastJob<ChatJob>().temperature).toBe(0)
    const weather = tool(async ({ city }) => `Sunny in ${city}`, { name: 'weather', description: 'The weather', schema: z.object({ city: z.string() }) })
    const called = await chat.bindTools([weather]).invoke('Weather in Oslo?')
    expect(called.tool_calls).toEqual([expect.objectContaining({ name: 'weather', args: { city: 'Oslo' } })])
    const embeddings = new OllamaEmbeddings({ baseUrl: server.ollamaUrl!, model: 'bert' })
    expect(await embeddings.embedDocuments(['one', 'two'])).toHaveLength(2)
  })

  it('AI SDK: generateText, streamText, tool calls and embed', async () => {
    const { createOllama } = await import('ollama-ai-provider-v2')
    const { embed, generateText, streamText, tool, jsonSchema } = await import('ai')
    const ollama = createOllama({ baseURL: `${server.url}/api`, headers: { Authorization: `Bearer ${server.apiKey}` } })
    expect((await generateText({ model: ollama('tiny'), prompt: 'Hello' })).text).toBe('Once upon a time.')
    const streamed = streamText({ model: ollama('tiny'), prompt: 'Hello' })
    let text = ''
    for await (const part of streamed.textStream) text += part
    expect(text).toBe('Once upon a time.')
    const withTools = await generateText({
      model: ollama('tiny'),
      prompt: 'Weather in Oslo?',
      tools: {
        weather: tool({
          description: 'The weather',
          inputSchema: jsonSchema<{ city: string }>({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }),
        }),
      },
    })
    expect(withTools.toolCalls).toEqual([expect.objectContaining({ toolName: 'weather', input: { city: 'Oslo' } })])
    const { embedding } = await embed({ model: ollama.textEmbeddingModel('bert'), value: 'one' })
    expect(embedding).toHaveLength(4)
  })
})
