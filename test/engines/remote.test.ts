/**
 * Remote models: a Hearth in front serving models that run on other servers, here another Hearth
 * (chat, embeddings, rerank, speech), upstream llama-server built from our pinned source (two
 * copies, one killed and restarted under load), and small fake servers that hang or record what
 * they are sent. Every answer through the front is checked against the same request sent straight
 * to the remote.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http'
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI, { toFile } from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { describeIf } from '../support/skips.ts'
import { postJson, PROJECT_ROOT, startTestServer, type TestServer } from '../support/server-process.ts'
import { writeTinyBert, writeTinyLlama, writeTinyWhisper } from '../support/tiny-models.ts'
import { familyModel } from '../support/family-models.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { llamaBuild, startUpstreamProgram, type UpstreamServer } from '../support/upstream-servers.ts'

const REMOTE_KEY = 'remote-secret-0123456789'
/** A chat template with tool calling (the tiny ChatML model has none): Qwen 3's, from the shared fixtures. */
const toolTemplate = sharedFixture('chat-templates/Qwen-Qwen3-0.6B.jinja')
if (!toolTemplate)
  console.warn('*** test/engines/remote.test.ts: no Qwen 3 chat template in ../shared/fixtures; tool calls through a remote are not tested ***')
const speech = () => readFileSync(join(PROJECT_ROOT, 'test/fixtures/audio/speech.flac'))

let remote: TestServer
let front: TestServer
let frontKeyFile: string
/** A server that takes requests and never answers; it counts the connections it saw closed. */
let hanging: { server: Server; url: string; closed: number; received: number }
/** A server that answers like a remote Hearth and keeps the headers it was sent. */
let recorder: { server: Server; url: string; headers: IncomingMessage['headers'][] }
/** Servers that count the connections chat requests came on (see connectionCounter's modes). */
let keeps: ConnectionCounter
let dropsReused: ConnectionCounter
let lingers: ConnectionCounter

beforeAll(async () => {
  const remoteModels = mkdtempSync(join(tmpdir(), 'hearth-remote-far-'))
  writeTinyLlama(join(remoteModels, 'tiny-chat.gguf'), { contextLength: 256 })
  writeTinyBert(join(remoteModels, 'tiny-bert.gguf'))
  writeTinyBert(join(remoteModels, 'tiny-reranker.gguf'), { reranker: true })
  writeTinyWhisper(join(remoteModels, 'tiny-whisper.bin'))
  if (toolTemplate) {
    const path = familyModel(
      join(PROJECT_ROOT, 'test/artifacts/family-models'),
      { template: 'Qwen-Qwen3-0.6B', vocabulary: 'qwen3' },
      readFileSync(toolTemplate, 'utf8'),
    )
    copyFileSync(path, join(remoteModels, 'tiny-tools.gguf'))
  }
  remote = await startTestServer({ modelsDir: remoteModels, args: ['--api-key', REMOTE_KEY] })

  hanging = await hangingServer()
  recorder = await recordingServer()
  keeps = await connectionCounter('answers')
  dropsReused = await connectionCounter('drops-reused')
  lingers = await connectionCounter('lingers')

  const frontModels = mkdtempSync(join(tmpdir(), 'hearth-remote-front-'))
  const far = (model: string) => ({ base_url: `${remote.url}/v1`, model, api_key_env: 'FAR_KEY' })
  writeFileSync(
    join(frontModels, 'models.json'),
    JSON.stringify({
      models: [
        { id: 'far-chat', remote: far('tiny-chat') },
        ...(toolTemplate ? [{ id: 'far-tools', remote: far('tiny-tools') }] : []),
        { id: 'far-bert', remote: far('tiny-bert') },
        { id: 'far-reranker', remote: far('tiny-reranker') },
        { id: 'far-whisper', remote: far('tiny-whisper') },
        { remote: { base_url: `${remote.url}/v1`, api_key_env: 'FAR_KEY', import: true, id_prefix: 'far/' } },
        { id: 'hangs', remote: { base_url: `${hanging.url}/v1`, model: 'slow' } },
        { id: 'recorded', remote: { base_url: `${recorder.url}/v1`, model: 'echo', api_key_env: 'RECORDER_KEY' } },
        { id: 'breaks', remote: { base_url: `${recorder.url}/v1`, model: 'breaks', api_key_env: 'RECORDER_KEY' } },
        { id: 'kept', remote: { base_url: `${keeps.url}/v1`, model: 'echo' } },
        { id: 'drops-reused', remote: { base_url: `${dropsReused.url}/v1`, model: 'echo' } },
        { id: 'lingers', remote: { base_url: `${lingers.url}/v1`, model: 'echo' } },
        { id: 'drops-reused-speech', kind: 'speech', remote: { base_url: `${dropsReused.url}/v1`, model: 'echo' } },
        { id: 'no-key', remote: { base_url: `${remote.url}/v1`, model: 'tiny-chat', api_key_env: 'UNSET_VARIABLE_FOR_TEST' } },
        { id: 'not-a-url', remote: { base_url: 'file:///etc/passwd' } },
      ],
    }),
  )
  const dataDir = mkdtempSync(join(tmpdir(), 'hearth-remote-front-data-'))
  front = await startTestServer({
    modelsDir: frontModels,
    dataDir,
    noKeyFlag: true,
    env: { FAR_KEY: REMOTE_KEY, RECORDER_KEY: 'recorder-secret-123', HEARTH_REMOTE_CHECK_SECONDS: '0.5' },
  })
  frontKeyFile = readFileSync(join(dataDir, 'api-key'), 'utf8').trim()
  front.apiKey = frontKeyFile
})

afterAll(async () => {
  await front?.stop()
  await remote?.stop()
  hanging?.server.close()
  recorder?.server.close()
  for (const counter of [keeps, dropsReused, lingers]) counter?.server.closeAllConnections()
  for (const counter of [keeps, dropsReused, lingers]) counter?.server.close()
  hanging?.server.closeAllConnections()
})

const client = () => new OpenAI({ baseURL: `${front.url}/v1`, apiKey: front.apiKey, maxRetries: 0 })
const direct = () => new OpenAI({ baseURL: `${remote.url}/v1`, apiKey: REMOTE_KEY, maxRetries: 0 })

describe('the catalog', () => {
  it('lists remote models with their context and capabilities from the remote, and their health', async () => {
    const models = (await client().models.list()).data as unknown as Array<Record<string, any>>
    const byId = new Map(models.map((m) => [m.id, m]))
    expect(byId.get('far-chat')).toMatchObject({ context_length: 256, capabilities: ['chat'], remote: { health: 'healthy' } })
    expect(byId.get('far-bert')).toMatchObject({ capabilities: ['embeddings'], remote: { health: 'healthy' } })
    expect(byId.get('far-whisper')).toMatchObject({ capabilities: ['transcription', 'translation'] })
    // Imported whole: every model the remote lists, under the prefix.
    expect([...byId.keys()].filter((id) => id.startsWith('far/')).sort()).toEqual([
      'far/tiny-bert',
      'far/tiny-chat',
      'far/tiny-reranker',
      ...(toolTemplate ? ['far/tiny-tools'] : []),
      'far/tiny-whisper',
    ])
    // Listed by its server, so healthy until a request to it fails.
    expect(byId.get('hangs')).toMatchObject({ remote: { health: 'healthy' } })
  })

  it('reports a bad remote entry at start, like any bad catalog entry, and never shows a key', async () => {
    expect(front.output()).toMatch(/model "no-key" cannot be served: the environment variable UNSET_VARIABLE_FOR_TEST .* is not set/)
    expect(front.output()).toMatch(/model "not-a-url" cannot be served: .*base_url: an http:\/\/ or https:\/\/ URL/)
    const res = await fetch(`${front.url}/api/models`, { headers: { authorization: `Bearer ${front.apiKey}` } })
    const body = (await res.json()) as { models: Array<Record<string, any>>; problems: Array<{ id: string }> }
    expect(body.problems.map((p) => p.id)).toEqual(expect.arrayContaining(['no-key', 'not-a-url']))
    expect(body.models.find((m) => m.id === 'far-chat')).toMatchObject({
      file: null,
      replicas: [{ base_url: `${remote.url}/v1`, model: 'tiny-chat', health: 'healthy' }],
    })
    expect(JSON.stringify(body)).not.toContain(REMOTE_KEY)
    expect(front.output()).not.toContain(REMOTE_KEY)
  })
})

describe('adding a remote model through the API (the Models page)', () => {
  const add = (body: unknown) =>
    fetch(`${front.url}/api/models/remote`, {
      method: 'POST',
      headers: { authorization: `Bearer ${front.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }).then(async (r) => ({ status: r.status, json: (await r.json()) as Record<string, any> }))

  it('writes the catalog entry, checks the server at once, and serves the model', async () => {
    const added = await add({ id: 'added-chat', base_url: `${remote.url}/v1`, model: 'tiny-chat', api_key_env: 'FAR_KEY' })
    expect(added.status).toBe(201)
    expect(added.json).toMatchObject({ id: 'added-chat', remote: { health: 'healthy' }, context_length: 256 })
    const answer = await client().chat.completions.create({ model: 'added-chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 })
    expect(answer.choices[0]!.message.content).toBeTypeOf('string')
    // Removing it takes the entry out of the catalog, and nothing else.
    const removed = await fetch(`${front.url}/api/models/added-chat`, { method: 'DELETE', headers: { authorization: `Bearer ${front.apiKey}` } })
    expect(removed.status).toBe(200)
    expect((await client().models.list()).data.map((m) => m.id)).not.toContain('added-chat')
  })

  it.each([
    [{ base_url: 'http://x/v1' }, 'missing_required_parameter', 'id'],
    [{ id: 'a', base_url: 'gpu-box:8000' }, 'invalid_value', 'base_url'],
    [{ id: 'a', base_url: 'file:///etc/passwd' }, 'invalid_value', 'base_url'],
    [{ id: 'a', base_url: 'http://x/v1', api_key_env: 'not a name' }, 'invalid_value', 'api_key_env'],
    [{ id: 'a', base_url: 'http://x/v1', api_key_env: 'UNSET_VARIABLE_FOR_TEST' }, 'invalid_value', 'api_key_env'],
    [{ id: 'far-chat', base_url: 'http://x/v1' }, 'invalid_value', 'id'],
    [{ id: 'a', base_url: 'http://x/v1', api_key: 'sk-123' }, 'invalid_value', null],
  ])('refuses %j', async (body, code, param) => {
    const res = await add(body)
    expect(res.status).toBe(400)
    expect(res.json.error).toMatchObject({ code, param })
  })
})

describe('forwarding', () => {
  it('a streamed chat through the front equals the same request sent straight to the remote', async () => {
    const request = { messages: [{ role: 'user' as const, content: 'Once upon a time' }], max_tokens: 24, temperature: 0 }
    const viaFront = await client().chat.completions.create({ ...request, model: 'far-chat', stream: true, stream_options: { include_usage: true } })
    let text = ''
    let usage
    let finish
    for await (const chunk of viaFront) {
      text += chunk.choices[0]?.delta.content ?? ''
      finish = chunk.choices[0]?.finish_reason ?? finish
      usage = chunk.usage ?? usage
    }
    const straight = await direct().chat.completions.create({ ...request, model: 'tiny-chat' })
    expect(text).toBe(straight.choices[0]!.message.content)
    expect(finish).toBe(straight.choices[0]!.finish_reason)
    expect(usage).toMatchObject({ prompt_tokens: straight.usage!.prompt_tokens, completion_tokens: straight.usage!.completion_tokens })
    // Not streamed, the same again.
    const whole = await client().chat.completions.create({ ...request, model: 'far/tiny-chat' })
    expect(whole.choices[0]!.message.content).toBe(straight.choices[0]!.message.content)
  })

  it('structured output and tools reach the remote, which answers as it would directly', async () => {
    const schema = { type: 'object', properties: { name: { type: 'string', enum: ['Tom', 'Sue'] } }, required: ['name'], additionalProperties: false }
    const tools = [
      {
        type: 'function' as const,
        function: {
          name: 'get_weather',
          parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] } }, required: ['city'] },
        },
      },
    ]
    // Qwen 3 may think first, and a random model never stops: its thinking is switched off.
    const toolRequests = [
      {
        messages: [{ role: 'user' as const, content: 'Weather?' }],
        max_tokens: 60,
        tools,
        tool_choice: { type: 'function' as const, function: { name: 'get_weather' } },
        reasoning_effort: 'none' as const,
      },
      {
        messages: [{ role: 'user' as const, content: 'Weather?' }],
        max_tokens: 60,
        tools,
        tool_choice: 'required' as const,
        seed: 7,
        stop: ['zz'],
        reasoning_effort: 'none' as const,
      },
    ]
    const requests = [
      {
        messages: [{ role: 'user' as const, content: 'Who?' }],
        max_tokens: 60,
        response_format: { type: 'json_schema' as const, json_schema: { name: 'who', schema } },
      },
      ...(toolTemplate ? toolRequests : []),
      { messages: [{ role: 'user' as const, content: 'Once' }], max_tokens: 8, logprobs: true, top_logprobs: 2, presence_penalty: 0.5 },
    ]
    for (const request of requests) {
      const tooled = 'tools' in request
      const [viaFront, straight] = await Promise.all([
        client().chat.completions.create({ ...request, model: tooled ? 'far-tools' : 'far-chat' }),
        direct().chat.completions.create({ ...request, model: tooled ? 'tiny-tools' : 'tiny-chat' }),
      ])
      if (tooled) expect(viaFront.choices[0]!.message.tool_calls?.[0]).toMatchObject({ function: { name: 'get_weather' } })
      const shape = (c: OpenAI.ChatCompletion) => ({
        content: c.choices[0]!.message.content,
        finish: c.choices[0]!.finish_reason,
        calls: c.choices[0]!.message.tool_calls?.map((t) => (t as { function: unknown }).function),
        usage: [c.usage!.prompt_tokens, c.usage!.completion_tokens],
        logprobs: c.choices[0]!.logprobs?.content?.map((l) => [l.token, l.top_logprobs.length]),
      })
      expect(shape(viaFront)).toEqual(shape(straight))
    }
    // What the remote enforced holds: the schema's enum.
    const who = await client().chat.completions.create({ ...requests[0]!, model: 'far-chat', max_tokens: 200 })
    if (who.choices[0]!.finish_reason === 'stop') expect(['Tom', 'Sue']).toContain(JSON.parse(who.choices[0]!.message.content!).name)
    // What the remote refuses comes back as its error: the ChatML model has no tool calling.
    const refused = await postJson(front, '/v1/chat/completions', {
      model: 'far-chat',
      messages: [{ role: 'user', content: 'Weather?' }],
      tools,
      max_tokens: 4,
    })
    expect(refused.status).toBe(400)
    expect(refused.json.error).toMatchObject({ code: 'model_not_compatible', param: 'tools' })
  })

  it("embeddings, rerank and speech equal the remote's own answers", async () => {
    const input = ['a small river', 'an old town']
    const [viaFront, straight] = await Promise.all([
      client().embeddings.create({ model: 'far-bert', input }),
      direct().embeddings.create({ model: 'tiny-bert', input }),
    ])
    expect(viaFront.usage.prompt_tokens).toBe(straight.usage.prompt_tokens)
    viaFront.data.forEach((d, i) => d.embedding.forEach((v, j) => expect(v).toBeCloseTo(straight.data[i]!.embedding[j]!, 5)))

    const rerank = async (url: string, key: string, model: string) =>
      (await fetch(`${url}/v1/rerank`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model, query: 'river', documents: ['a river', 'a town', 'a cat'] }),
      }).then((r) => r.json())) as { results: Array<{ index: number; relevance_score: number }> }
    const ranked = await rerank(front.url, front.apiKey, 'far-reranker')
    const rankedStraight = await rerank(remote.url, REMOTE_KEY, 'tiny-reranker')
    expect(ranked.results.map((r) => r.index)).toEqual(rankedStraight.results.map((r) => r.index))

    const heard = await client().audio.transcriptions.create({
      model: 'far-whisper',
      file: await toFile(speech(), 'speech.flac'),
      response_format: 'verbose_json',
      timestamp_granularities: ['word', 'segment'],
    })
    const heardStraight = await direct().audio.transcriptions.create({
      model: 'tiny-whisper',
      file: await toFile(speech(), 'speech.flac'),
      response_format: 'verbose_json',
      timestamp_granularities: ['word', 'segment'],
    })
    expect(heard.text).toBe(heardStraight.text)
    expect(heard.words).toEqual(heardStraight.words)
    expect(heard.segments!.map((s) => s.tokens)).toEqual(heardStraight.segments!.map((s) => s.tokens))
  })

  it('completions and the Anthropic Messages route go through too', async () => {
    const request = { prompt: 'Once upon a time', max_tokens: 12, temperature: 0 }
    const [viaFront, straight] = await Promise.all([
      client().completions.create({ ...request, model: 'far-chat' }),
      direct().completions.create({ ...request, model: 'tiny-chat' }),
    ])
    expect(viaFront.choices[0]!.text).toBe(straight.choices[0]!.text)
    expect(viaFront.usage).toMatchObject({ completion_tokens: straight.usage!.completion_tokens })
    const message = await fetch(`${front.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': front.apiKey, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'far-chat', max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] }),
    }).then((r) => r.json() as Promise<{ type: string; content: Array<{ type: string; text: string }>; usage: { output_tokens: number } }>)
    expect(message.type).toBe('message')
    expect(message.content[0]!.type).toBe('text')
    expect(message.usage.output_tokens).toBeGreaterThan(0)
  })

  it("the remote's refusals come back as our error bodies, with its status", async () => {
    const long = 'word '.repeat(400)
    const res = await postJson(front, '/v1/chat/completions', { model: 'far-chat', messages: [{ role: 'user', content: long }], max_tokens: 4 })
    expect(res.status).toBe(400)
    expect(res.json.error).toMatchObject({ type: 'invalid_request_error', code: 'context_length_exceeded' })
    // Hearth's own checks come first: a bad field never reaches the remote.
    const bad = await postJson(front, '/v1/chat/completions', { model: 'far-chat', messages: [{ role: 'user', content: 'hi' }], temperature: 7 })
    expect(bad.status).toBe(400)
    expect(bad.json.error.param).toBe('temperature')
  })

  it("sends the remote its own key from the environment, never the client's", async () => {
    const res = await postJson(front, '/v1/chat/completions', { model: 'recorded', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 })
    expect(res.status).toBe(200)
    expect(res.json.choices[0].message.content).toBe('echo')
    const sent = recorder.headers.at(-1)!
    expect(sent.authorization).toBe('Bearer recorder-secret-123')
    expect(JSON.stringify(recorder.headers)).not.toContain(front.apiKey)
  })

  it('a remote that fails part way ends the stream with an error event', async () => {
    const res = await fetch(`${front.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${front.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'breaks', messages: [{ role: 'user', content: 'hi' }], stream: true }),
    })
    expect(res.status).toBe(200)
    const events = (await res.text())
      .split('\n\n')
      .filter(Boolean)
      .map((e) => e.replace(/^data: /, ''))
    expect(events.some((e) => e.includes('half an'))).toBe(true)
    const error = events.map((e) => (e.startsWith('{') ? JSON.parse(e) : undefined)).find((e) => e?.error)
    expect(error.error).toMatchObject({ code: 'remote_error', message: expect.stringContaining('stopped answering part way') })
    // Not streamed, the same failure is a 502.
    const whole = await postJson(front, '/v1/chat/completions', { model: 'breaks', messages: [{ role: 'user', content: 'hi' }] })
    expect(whole.status).toBe(502)
    expect(whole.json.error.code).toBe('remote_error')
  })

  it('a remote that hangs gives 408, and the remote sees the connection closed', async () => {
    // A server of its own with a short request limit: the other tests' requests may take their time.
    const models = mkdtempSync(join(tmpdir(), 'hearth-remote-hang-'))
    writeFileSync(join(models, 'models.json'), JSON.stringify({ models: [{ id: 'hangs', remote: { base_url: `${hanging.url}/v1`, model: 'slow' } }] }))
    const impatient = await startTestServer({ modelsDir: models, args: ['--request-timeout', '2'] })
    try {
      const before = hanging.closed
      const started = performance.now()
      const res = await postJson(impatient, '/v1/chat/completions', { model: 'hangs', messages: [{ role: 'user', content: 'hi' }] })
      expect(res.status).toBe(408)
      expect(performance.now() - started).toBeLessThan(30_000)
      await expect.poll(() => hanging.closed, { timeout: 10_000 }).toBeGreaterThan(before)
    } finally {
      await impatient.stop()
    }
  })

  it('streams one request after another over one kept connection', async () => {
    const before = keeps.connections
    for (let i = 0; i < 3; i++) {
      const stream = await client().chat.completions.create({ model: 'kept', messages: [{ role: 'user', content: `hi ${i}` }], stream: true })
      let text = ''
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ''
      expect(text).toBe('echo')
    }
    expect(keeps.connections - before).toBeLessThanOrEqual(1)
    expect(keeps.answered).toBeGreaterThanOrEqual(3)
  })

  it('sends a request again on a fresh connection when the remote closed the kept one as it was reused', async () => {
    const before = { ...dropsReused }
    for (let i = 0; i < 3; i++) {
      const answer = await client().chat.completions.create({ model: 'drops-reused', messages: [{ role: 'user', content: `hi ${i}` }] })
      expect(answer.choices[0]?.message.content).toBe('echo')
    }
    // The second and third went out on the first's kept connection, were dropped, and went again.
    expect(dropsReused.answered - before.answered).toBe(3)
    expect(dropsReused.dropped - before.dropped).toBe(2)
    expect(dropsReused.connections - before.connections).toBe(3)
  })

  it('sends an audio upload again when the remote closed the kept connection it went on', async () => {
    const before = { ...dropsReused }
    for (let i = 0; i < 3; i++) {
      const answer = await client().audio.transcriptions.create({ model: 'drops-reused-speech', file: await toFile(speech(), 'speech.flac') })
      expect(answer.text).toBe('echo')
    }
    expect(dropsReused.answered - before.answered).toBe(3)
    expect(dropsReused.dropped - before.dropped).toBeGreaterThanOrEqual(1)
  })

  it('answers at [DONE] from a remote that holds its response open after it, and lets that connection go', async () => {
    const before = lingers.connections
    for (let i = 0; i < 2; i++) {
      const started = performance.now()
      const answer = await client().chat.completions.create({ model: 'lingers', messages: [{ role: 'user', content: `hi ${i}` }] })
      expect(answer.choices[0]?.message.content).toBe('echo')
      expect(performance.now() - started).toBeLessThan(500)
    }
    // The first connection was still held when the second request went: it took a new one.
    expect(lingers.connections - before).toBe(2)
    await expect.poll(() => lingers.closed, { timeout: 5_000 }).toBeGreaterThanOrEqual(2)
  })

  it('counts remote work in quotas and metrics', async () => {
    const created = await fetch(`${front.url}/api/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${frontKeyFile}`, 'content-type': 'application/json' },
      body: JSON.stringify({ label: 'small', tokens_per_day: 60 }),
    }).then((r) => r.json() as Promise<{ key: string }>)
    const limited = { ...front, apiKey: created.key }
    const ask = () =>
      postJson(limited, '/v1/chat/completions', { model: 'far-chat', messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 20 })
    const first = await ask()
    expect(first.status).toBe(200)
    const spent = first.json.usage.total_tokens as number
    let last = first
    for (let i = 0; i < 10 && last.status === 200; i++) last = await ask()
    expect(last.status).toBe(429)
    expect(last.json.error.code).toBe('insufficient_quota')
    expect(spent).toBeGreaterThan(0)

    const metrics = await fetch(`${front.url}/metrics`, { headers: { authorization: `Bearer ${front.apiKey}` } }).then((r) => r.text())
    const completion = Number(/hearth_tokens_total\{model="far-chat",type="completion"\} (\d+)/.exec(metrics)?.[1] ?? 0)
    expect(completion).toBeGreaterThanOrEqual(first.json.usage.completion_tokens)
  })
})

describeIf(llamaBuild, 'needs llama.cpp built here (npm run build:engines)')('two copies on upstream llama-server', () => {
  let modelPath: string
  const ports: number[] = []
  const copies: Array<UpstreamServer | undefined> = [undefined, undefined]
  let replicated: TestServer

  const startCopy = (i: number) =>
    startUpstreamProgram(llamaBuild!, 'llama-server', ['-m', modelPath, '--alias', 'tiny', '-t', '1', '-np', '4', '--metrics', '--no-webui'], {
      port: ports[i],
    })

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hearth-replicas-'))
    modelPath = join(dir, 'tiny.gguf')
    writeTinyLlama(modelPath, { contextLength: 512 })
    for (let i = 0; i < 2; i++) {
      const probe = createServer().listen(0, '127.0.0.1')
      await new Promise((r) => probe.once('listening', r))
      ports.push((probe.address() as { port: number }).port)
      await new Promise((r) => probe.close(r))
      copies[i] = await startCopy(i)
    }
    const frontModels = mkdtempSync(join(tmpdir(), 'hearth-replicas-front-'))
    writeFileSync(
      join(frontModels, 'models.json'),
      JSON.stringify({ models: [{ id: 'tiny-everywhere', replicas: ports.map((p) => ({ base_url: `http://127.0.0.1:${p}/v1`, model: 'tiny' })) }] }),
    )
    replicated = await startTestServer({ modelsDir: frontModels, env: { HEARTH_REMOTE_CHECK_SECONDS: '0.5' } })
  })

  afterAll(async () => {
    await replicated?.stop()
    for (const copy of copies) await copy?.stop('SIGKILL')
  })

  const tokensServed = async (port: number) => {
    const text = await fetch(`http://127.0.0.1:${port}/metrics`).then(
      (r) => r.text(),
      () => '',
    )
    return Number(/llamacpp:tokens_predicted_total (\d+)/.exec(text)?.[1] ?? 0)
  }

  it('spreads 200 mixed requests over both, and loses none that had not started while one is killed and restarted', async () => {
    const outcomes: Array<{ status: number; code?: string }> = []
    let next = 0
    const one = async (i: number) => {
      const stream = i % 2 === 0
      let res: Response
      try {
        res = await fetch(`${replicated.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${replicated.apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'tiny-everywhere', messages: [{ role: 'user', content: `story ${i}` }], max_tokens: 8, stream }),
        })
      } catch (e) {
        outcomes.push({ status: 0, code: `fetch failed: ${(e as { cause?: Error }).cause?.message ?? (e as Error).message}` })
        return
      }
      const text = await res.text()
      const failed = stream ? text.includes('"error"') : res.status !== 200
      outcomes.push(failed ? { status: res.status, code: /"code":"([a-z_]+)"/.exec(text)?.[1] } : { status: 200 })
    }
    const worker = async () => {
      while (next < 200) await one(next++)
    }
    const load = Promise.all(Array.from({ length: 6 }, worker))
    await expect.poll(() => outcomes.length, { timeout: 30_000 }).toBeGreaterThan(40)
    await copies[0]!.stop('SIGKILL') // killed under load
    copies[0] = undefined
    await expect.poll(() => outcomes.length, { timeout: 30_000 }).toBeGreaterThan(100)
    copies[0] = await startCopy(0)
    await load
    expect(outcomes).toHaveLength(200)
    const failures = outcomes.filter((o) => o.status !== 200 || o.code)
    // Only a request already being answered by the killed copy can fail (at most one per client),
    // and then as a remote failure part way, never as "no copy".
    expect(failures.length).toBeLessThanOrEqual(6)
    for (const f of failures) expect(f.code).toBe('remote_error')
    expect(await tokensServed(ports[1]!)).toBeGreaterThan(0)

    // The restarted copy passes its health check and takes requests again.
    const before = await tokensServed(ports[0]!)
    await new Promise((r) => setTimeout(r, 1_500))
    for (let i = 0; i < 20; i++) await one(1000 + i)
    await Promise.all(Array.from({ length: 8 }, (_, i) => one(2000 + i)))
    expect(await tokensServed(ports[0]!)).toBeGreaterThan(before)
  }, 120_000)

  it('answers 503 naming the copies when none can be reached', async () => {
    for (const [i, copy] of copies.entries()) {
      await copy?.stop('SIGKILL')
      copies[i] = undefined
    }
    const res = await postJson(replicated, '/v1/chat/completions', { model: 'tiny-everywhere', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 })
    expect(res.status).toBe(503)
    expect(res.json.error.code).toBe('remote_unavailable')
    expect(res.json.error.message).toContain(`127.0.0.1:${ports[0]}`)
  })
})

describeIf(llamaBuild && toolTemplate, 'needs llama.cpp built here (npm run build:engines) and the chat templates of ../shared/fixtures')(
  'upstream llama-server as the remote: what it takes differently',
  () => {
    const servers: UpstreamServer[] = []
    let tooled: TestServer
    const weather = {
      type: 'function' as const,
      function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] } }, required: ['city'] } },
    }
    const time = {
      type: 'function' as const,
      function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string', enum: ['UTC', 'CET'] } }, required: ['zone'] } },
    }

    beforeAll(async () => {
      const dir = mkdtempSync(join(tmpdir(), 'hearth-remote-tools-'))
      const qwen = familyModel(
        join(PROJECT_ROOT, 'test/artifacts/family-models'),
        { template: 'Qwen-Qwen3-0.6B', vocabulary: 'qwen3' },
        readFileSync(toolTemplate!, 'utf8'),
      )
      const chatml = join(dir, 'chatml.gguf')
      writeTinyLlama(chatml, { contextLength: 256 })
      servers.push(await startUpstreamProgram(llamaBuild!, 'llama-server', ['-m', qwen, '--alias', 'qwen', '-t', '1', '-c', '1024', '--no-webui']))
      servers.push(await startUpstreamProgram(llamaBuild!, 'llama-server', ['-m', chatml, '--alias', 'chatml', '-t', '1', '--no-webui']))
      const frontModels = mkdtempSync(join(tmpdir(), 'hearth-remote-tools-front-'))
      const models = [
        { id: 'qwen-far', remote: { base_url: `${servers[0]!.url}/v1`, model: 'qwen' } },
        { id: 'chatml-far', remote: { base_url: `${servers[1]!.url}/v1`, model: 'chatml' } },
      ]
      writeFileSync(join(frontModels, 'models.json'), JSON.stringify({ models }))
      tooled = await startTestServer({ modelsDir: frontModels })
    })

    afterAll(async () => {
      await tooled?.stop()
      for (const server of servers) await server.stop('SIGKILL')
    })

    const ask = () => new OpenAI({ baseURL: `${tooled.url}/v1`, apiKey: tooled.apiKey, maxRetries: 0 })

    it('a named tool_choice is held (llama-server takes none: an object there means "auto")', async () => {
      const messages = [{ role: 'user' as const, content: 'What now?' }]
      for (const name of ['get_time', 'get_weather']) {
        const answer = await ask().chat.completions.create({
          model: 'qwen-far',
          messages,
          tools: [weather, time],
          tool_choice: { type: 'function', function: { name } },
          reasoning_effort: 'none',
          max_tokens: 60,
        })
        const names = (answer.choices[0]!.message.tool_calls ?? []).map((c) => (c as { function: { name: string } }).function.name)
        expect(names.length).toBeGreaterThan(0)
        expect(new Set(names)).toEqual(new Set([name]))
      }
    })

    it('tools for a template without tool calling are refused by name, as for a local model', async () => {
      const refused = await postJson(tooled, '/v1/chat/completions', {
        model: 'chatml-far',
        messages: [{ role: 'user', content: 'Weather?' }],
        tools: [weather],
        max_tokens: 4,
      })
      expect(refused.status).toBe(400)
      expect(refused.json.error).toMatchObject({ code: 'model_not_compatible', param: 'tools', type: 'invalid_request_error' })
      const plain = await ask().chat.completions.create({ model: 'chatml-far', messages: [{ role: 'user', content: 'Weather?' }], max_tokens: 4 })
      expect(plain.choices[0]!.finish_reason).toBe('length')
    })

    it('logprobs without alternatives (top_logprobs 0) still has an entry per token', async () => {
      const answer = await ask().chat.completions.create({
        model: 'chatml-far',
        messages: [{ role: 'user', content: 'Once' }],
        max_tokens: 3,
        logprobs: true,
        top_logprobs: 0,
      })
      const entries = answer.choices[0]!.logprobs?.content ?? []
      expect(entries).toHaveLength(answer.usage!.completion_tokens)
      for (const entry of entries) {
        expect(entry.logprob).toBeLessThanOrEqual(0)
        expect(entry.top_logprobs).toEqual([])
      }
      expect(entries.map((e) => e.token).join('')).toBe(answer.choices[0]!.message.content)
    })

    it("completions' logprobs come through (llama-server writes them as chat does), streamed or not", async () => {
      for (const top of [0, 2]) {
        const request = { model: 'chatml-far', prompt: 'Once upon a', max_tokens: 4, logprobs: top, temperature: 0 }
        const whole = await ask().completions.create(request)
        const logprobs = whole.choices[0]!.logprobs!
        expect(logprobs.tokens).toHaveLength(whole.usage!.completion_tokens)
        expect(logprobs.tokens!.join('')).toBe(whole.choices[0]!.text)
        for (const candidates of logprobs.top_logprobs!) expect(Object.keys(candidates)).toHaveLength(top)
        let streamed: string[] = []
        for await (const chunk of await ask().completions.create({ ...request, stream: true }))
          streamed = [...streamed, ...(chunk.choices[0]?.logprobs?.tokens ?? [])]
        expect(streamed).toEqual(logprobs.tokens)
      }
    })
  },
)

/** An OpenAI-style server that lists its model, then accepts requests and never answers them. */
async function hangingServer(): Promise<{ server: Server; url: string; closed: number; received: number }> {
  const state = { server: undefined as unknown as Server, url: '', closed: 0, received: 0 }
  state.server = createServer((req, res) => {
    if (req.url?.endsWith('/models')) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data: [{ id: 'slow', object: 'model' }] }))
      return
    }
    state.received++
    res.on('close', () => state.closed++)
  })
  await new Promise<void>((r) => state.server.listen(0, '127.0.0.1', r))
  state.url = `http://127.0.0.1:${(state.server.address() as { port: number }).port}`
  return state
}

interface ConnectionCounter {
  server: Server
  url: string
  /** Connections that carried a chat request (the health checks' own are not counted), and of those, closed. */
  connections: number
  closed: number
  answered: number
  dropped: number
}

/**
 * Lists "echo", streams "echo" to every chat request and hears "echo" in any audio. `drops-reused`: a connection's second
 * request is dropped unanswered (a kept connection whose idle time ran out as it was reused);
 * `lingers`: the response is held open after its `[DONE]`.
 */
async function connectionCounter(mode: 'answers' | 'drops-reused' | 'lingers'): Promise<ConnectionCounter> {
  const state = { server: undefined as unknown as Server, url: '', connections: 0, closed: 0, answered: 0, dropped: 0 }
  const requestsOn = new WeakMap<object, number>()
  state.server = createServer((req, res) => {
    if (req.url?.endsWith('/models')) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data: [{ id: 'echo', object: 'model' }] }))
      return
    }
    const earlier = requestsOn.get(req.socket) ?? 0
    requestsOn.set(req.socket, earlier + 1)
    if (earlier === 0) {
      state.connections++
      req.socket.once('close', () => state.closed++)
    }
    req.resume()
    req.on('end', () => {
      if (mode === 'drops-reused' && earlier > 0) {
        state.dropped++
        req.socket.destroy()
        return
      }
      state.answered++
      if (req.url?.endsWith('/audio/transcriptions')) {
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ text: 'echo', language: 'english', duration: 1, segments: [{ start: 0, end: 1, text: 'echo' }] }))
        return
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { role: 'assistant', content: 'echo' }, finish_reason: null }] })}\n\n`)
      res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`)
      res.write(`data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } })}\n\n`)
      if (mode === 'lingers') res.write('data: [DONE]\n\n')
      else res.end('data: [DONE]\n\n')
    })
  })
  await new Promise<void>((r) => state.server.listen(0, '127.0.0.1', r))
  state.url = `http://127.0.0.1:${(state.server.address() as { port: number }).port}`
  return state
}

/**
 * Lists "echo", which streams "echo" to every chat request, and "breaks", which drops the
 * connection half way through its answer; keeps the request headers.
 */
async function recordingServer(): Promise<{ server: Server; url: string; headers: IncomingMessage['headers'][] }> {
  const state = { server: undefined as unknown as Server, url: '', headers: [] as IncomingMessage['headers'][] }
  state.server = createServer((req, res) => {
    state.headers.push(req.headers)
    if (req.url?.endsWith('/models')) {
      const data = [
        { id: 'echo', object: 'model' },
        { id: 'breaks', object: 'model' },
      ]
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data }))
      return
    }
    let body = ''
    req.on('data', (d: Buffer) => (body += d.toString()))
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      const chunk = (body: object) => res.write(`data: ${JSON.stringify(body)}\n\n`)
      if ((JSON.parse(body) as { model: string }).model === 'breaks') {
        // Half an answer, then the connection drops.
        chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: 'half an' }, finish_reason: null }] })
        setTimeout(() => res.destroy(), 50)
        return
      }
      chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: 'echo' }, finish_reason: null }] })
      chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })
      chunk({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } })
      res.end('data: [DONE]\n\n')
    })
  })
  await new Promise<void>((r) => state.server.listen(0, '127.0.0.1', r))
  state.url = `http://127.0.0.1:${(state.server.address() as { port: number }).port}`
  return state
}
