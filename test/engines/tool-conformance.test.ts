/**
 * Tool calling, structured output and thinking across real model families, through the HTTP API.
 * Each family's real chat template (../shared/fixtures/chat-templates) goes into a tiny random model
 * with the family's vocabulary and special tokens (test/support/family-models.ts); the engine's chat
 * parser and grammar do the family's work, and Hearth's contract is checked on what comes out.
 *
 * The tables in support/conformance-families.ts say what each family does today; docs/tools.md's
 * conformance table is written from them. A family that starts or stops doing something fails its
 * row, so the table stays true. The models are generated before the suites run (engines-setup.ts).
 */
import { Ajv } from 'ajv'
import { existsSync, linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { FAMILIES, WITHOUT_TOOLS } from '../support/conformance-families.ts'
import { familyModel } from '../support/family-models.ts'
import { PROJECT_ROOT, postJson, startTestServer, type TestServer } from '../support/server-process.ts'
import { SHARED_FIXTURES } from '../support/shared-fixtures.ts'
import { llamaBuild } from '../support/upstream-servers.ts'
import { cannotRun, describeIf } from '../support/skips.ts'

const TEMPLATES = join(SHARED_FIXTURES, 'chat-templates')
const haveTemplates = existsSync(TEMPLATES)
if (!haveTemplates) cannotRun(`test/engines/tool-conformance.test.ts: no chat templates at ${TEMPLATES}`)

const weather = {
  type: 'object',
  properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] }, days: { type: 'integer', enum: [1, 2, 3] } },
  required: ['city', 'days'],
  additionalProperties: false,
}
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: weather } },
  {
    type: 'function',
    function: {
      name: 'get_time',
      description: 'The time in a city',
      parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] } }, required: ['city'] },
    },
  },
]
const ask = [{ role: 'user', content: 'What is the weather in Paris?' }]
const forceWeather = {
  tools,
  tool_choice: { type: 'function', function: { name: 'get_weather' } },
  parallel_tool_calls: false,
  reasoning_effort: 'none',
  max_tokens: 100,
}
const validWeather = new Ajv().compile(weather)

describeIf(llamaBuild && haveTemplates, 'needs llama.cpp built here (npm run build:engines) and the chat templates of ../shared/fixtures')(
  'tool calling across model families',
  () => {
    let server: TestServer
    let modelsDir: string
    const chat = (model: string, body: Record<string, unknown>) => postJson(server, '/v1/chat/completions', { model, ...body })

    beforeAll(async () => {
      const cache = join(PROJECT_ROOT, 'test/artifacts/family-models')
      // Hard links beside the cache: fifty models copied would take longer than the tests.
      mkdirSync(join(PROJECT_ROOT, 'test/artifacts'), { recursive: true })
      modelsDir = mkdtempSync(join(PROJECT_ROOT, 'test/artifacts/families-'))
      for (const family of [...FAMILIES, ...WITHOUT_TOOLS]) {
        const path = familyModel(cache, family, readFileSync(join(TEMPLATES, `${family.template}.jinja`), 'utf8'))
        linkSync(path, join(modelsDir, `${family.template}.gguf`))
      }
      server = await startTestServer({ modelsDir })
    })

    afterAll(async () => {
      await server?.stop()
      rmSync(modelsDir, { recursive: true, force: true })
    })

    /** In place where the template writes it there, else in the user turn beside it: in the prompt either way, never an error. */
    async function expectMidSystemMessageKept(model: string) {
      const turns = (middle: unknown[]) => [
        { role: 'system', content: 'You answer questions.' },
        ...ask,
        { role: 'assistant', content: 'It is sunny.' },
        ...middle,
        { role: 'user', content: 'And tomorrow?' },
      ]
      const note = { role: 'system', content: 'The user is in Oslo this week, not Paris, so answer for Oslo and say so plainly.' }
      const withNote = await chat(model, { messages: turns([note]), max_tokens: 2, reasoning_effort: 'none' })
      expect(withNote.status, withNote.text).toBe(200)
      const without = await chat(model, { messages: turns([]), max_tokens: 2, reasoning_effort: 'none' })
      expect(withNote.json.usage.prompt_tokens).toBeGreaterThan(without.json.usage.prompt_tokens + 10)
    }

    describe.each(FAMILIES)('$template', (family) => {
      const model = family.template

      afterAll(async () => {
        // One family's engine at a time.
        await postJson(server, `/api/models/${encodeURIComponent(model)}/unload`, {})
      })

      it('a forced call names the function, with arguments that satisfy its schema; streamed the same', async () => {
        const res = await chat(model, { messages: ask, ...forceWeather, max_tokens: family.callTokens ?? forceWeather.max_tokens })
        const listed = await fetch(`${server.url}/v1/models/${encodeURIComponent(model)}`, { headers: { authorization: `Bearer ${server.apiKey}` } })
        expect(((await listed.json()) as { capabilities: string[] }).capabilities).toContain('tools')
        expect(res.status, res.text).toBe(200)
        const choice = res.json.choices[0]
        expect(validWeather(JSON.parse(choice.message.tool_calls?.[0]?.function.arguments ?? 'null'))).toBe(true)
        expect(choice.message.tool_calls).toHaveLength(1)
        const call = choice.message.tool_calls[0]
        expect(call).toMatchObject({ id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'get_weather' } })

        const streamed = await chat(model, { messages: ask, ...forceWeather, max_tokens: family.callTokens ?? forceWeather.max_tokens, stream: true })
        const pieces = streamed.text
          .split('\n')
          .filter((line) => line.startsWith('data: {'))
          .flatMap((line) => JSON.parse(line.slice(6)).choices[0]?.delta?.tool_calls ?? [])
        expect(pieces[0]).toMatchObject({ index: 0, id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'get_weather' } })
        const joined = pieces.map((p: { function?: { arguments?: string } }) => p.function?.arguments ?? '').join('')
        // Greedy decoding: the stream says exactly what the plain answer said.
        expect(joined).toBe(call.function.arguments)
      })

      it(family.parallel ? 'calls several tools in one answer when allowed' : 'makes one call per answer', async () => {
        const res = await chat(model, { messages: ask, tools, tool_choice: 'required', reasoning_effort: 'none', max_tokens: 160 })
        expect(res.status, res.text).toBe(200)
        const calls = res.json.choices[0].message.tool_calls
        if (family.parallel) expect(calls.length).toBeGreaterThan(1)
        else expect(calls).toHaveLength(1)
        expect(new Set(calls.map((c: { id: string }) => c.id)).size).toBe(calls.length)
      })

      it(`replays a conversation with ${family.replaysParallel ? 'two calls' : 'a call'} and the results, and shows the model its tools`, async () => {
        const calls = [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","days":1}' } },
          { id: 'call_2', type: 'function', function: { name: 'get_time', arguments: '{"city":"Paris"}' } },
        ].slice(0, family.replaysParallel ? 2 : 1)
        const results = calls.map((c, i) => ({ role: 'tool', tool_call_id: c.id, content: ['Sunny, 21 °C', '14:00'][i] }))
        // As an agent loop sends it: the model answers once it has its results.
        const res = await chat(model, { tools, max_tokens: 3, messages: [...ask, { role: 'assistant', content: null, tool_calls: calls }, ...results] })
        expect(res.status, res.text).toBe(200)
        const bare = await chat(model, { tools, max_tokens: 3, messages: ask })
        expect(res.json.usage.prompt_tokens).toBeGreaterThan(bare.json.usage.prompt_tokens + 10)
        // The model sees its tools (where the template never shows them, Hearth's system message does).
        const toolless = await chat(model, { max_tokens: 3, messages: ask })
        expect(bare.json.usage.prompt_tokens).toBeGreaterThan(toolless.json.usage.prompt_tokens + 10)
      })

      it('takes a system message between turns (as Claude Code sends them) and keeps what it says', async () => {
        await expectMidSystemMessageKept(model)
      })

      it('json_schema output satisfies the schema', async () => {
        const res = await chat(model, {
          messages: ask,
          max_tokens: family.callTokens ?? 60,
          reasoning_effort: 'none',
          response_format: { type: 'json_schema', json_schema: { name: 'weather', schema: weather } },
        })
        expect(res.status, res.text).toBe(200)
        expect(validWeather(JSON.parse(res.json.choices[0].message.content)), res.text).toBe(true)
      })

      // Declared only for the families that think: a row that can never run is not a test.
      if (family.thinking !== 'none')
        it('thinks apart from the answer, and reasoning_effort "none" switches it off', async () => {
          const thinking = await chat(model, { messages: ask, max_tokens: 8 })
          expect(thinking.status, thinking.text).toBe(200)
          expect(thinking.json.choices[0].message.reasoning_content.length).toBeGreaterThan(0)
          expect(thinking.json.usage.completion_tokens_details.reasoning_tokens).toBeGreaterThan(0)
          const plain = await chat(model, { messages: ask, max_tokens: 8, reasoning_effort: 'none' })
          expect(plain.status, plain.text).toBe(200)
          expect(plain.json.choices[0].message.reasoning_content).toBe(family.openingWords)
          expect(plain.json.choices[0].message.content.length).toBeGreaterThan(0)
        })
    })

    describe.each(WITHOUT_TOOLS)('$template (no tools in its template)', ({ template: model }) => {
      afterAll(async () => {
        await postJson(server, `/api/models/${encodeURIComponent(model)}/unload`, {})
      })

      it('takes a system message between turns and keeps what it says', async () => {
        await expectMidSystemMessageKept(model)
      })

      it('refuses tools by name, and answers without them', async () => {
        const res = await chat(model, { messages: ask, tools, tool_choice: 'auto', max_tokens: 4 })
        expect(res.status, res.text).toBe(400)
        expect(res.json.error).toMatchObject({ type: 'invalid_request_error', code: 'model_not_compatible', param: 'tools' })
        expect(res.json.error.message).toContain('has no tool calling')
        // tool_choice "none" asks for no call: the tools are beside the point, and the answer comes.
        const none = await chat(model, { messages: ask, tools, tool_choice: 'none', max_tokens: 4 })
        expect(none.status, none.text).toBe(200)
        const plain = await chat(model, { messages: ask, max_tokens: 4 })
        expect(plain.status, plain.text).toBe(200)
        const { content, reasoning_content: reasoning } = plain.json.choices[0].message
        expect(content.length + (reasoning?.length ?? 0)).toBeGreaterThan(0)
        // Loaded, the engine's own check stands in the listing: the chat offers this model no tools.
        const listed = await fetch(`${server.url}/v1/models/${encodeURIComponent(model)}`, { headers: { authorization: `Bearer ${server.apiKey}` } })
        expect(((await listed.json()) as { capabilities: string[] }).capabilities).not.toContain('tools')
      })

      // Codex and Claude Code stream: a refusal that came after the stream opened reached them as a
      // dropped stream, which they retry, five times, before saying only "stream disconnected".
      it('refuses tools before a stream opens, on each API an agent streams from', async () => {
        const weatherTool = tools[0]!.function
        const refusals = {
          chat: await chat(model, { messages: ask, tools, max_tokens: 4, stream: true }),
          responses: await postJson(server, '/v1/responses', {
            model,
            input: ask,
            tools: [{ type: 'function', ...weatherTool }],
            max_output_tokens: 4,
            stream: true,
          }),
          messages: await postJson(server, '/v1/messages', {
            model,
            messages: ask,
            tools: [{ name: weatherTool.name, input_schema: weatherTool.parameters }],
            max_tokens: 4,
            stream: true,
          }),
        }
        for (const [api, res] of Object.entries(refusals)) {
          expect(res.status, `${api}: ${res.text}`).toBe(400)
          expect(res.headers.get('content-type'), api).toContain('application/json')
          expect(res.json.error.message, api).toContain('has no tool calling')
        }
        expect(refusals.responses.json.error).toMatchObject({ code: 'model_not_compatible', param: 'tools' })
        expect(refusals.messages.json.type).toBe('error')
      })
    })
  },
)
