/**
 * Tool calling, structured output and thinking across real model families, through the HTTP API.
 * Each family's real chat template (../shared/fixtures/chat-templates) goes into a tiny random model
 * with the family's vocabulary and special tokens (test/support/family-models.ts); the engine's chat
 * parser and grammar do the family's work, and Hearth's contract is checked on what comes out.
 *
 * The tables below say what each family does today; the README's conformance table is written from
 * them. A family that starts or stops doing something fails its row, so the table stays true.
 */
import { Ajv } from 'ajv'
import { existsSync, mkdtempSync, readFileSync, copyFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { familyModel, type FamilyModelSpec } from './support/family-models.ts'
import { PROJECT_ROOT, postJson, startTestServer, type TestServer } from './support/server-process.ts'
import { SHARED_FIXTURES } from './support/shared-fixtures.ts'
import { llamaBuild } from './support/upstream-servers.ts'

const TEMPLATES = join(SHARED_FIXTURES, 'chat-templates')
const haveTemplates = existsSync(TEMPLATES)
if (!haveTemplates) console.warn(`\n*** SKIPPED test/tool-conformance.test.ts: no chat templates at ${TEMPLATES} ***\n`)

interface Family extends FamilyModelSpec {
  /** A forced call: `valid` arguments satisfy the schema; `named` only the right function is called (string arguments are free text in this format). */
  forced: 'valid' | 'named'
  /** Several calls in one answer when `parallel_tool_calls` allows them. */
  parallel: boolean
  /** The template renders a history with two calls in one turn (some allow one call per turn). */
  replaysParallel: boolean
  /** `json_schema` output satisfies the schema (the others think first, and a random model never stops thinking). */
  schema: boolean
  /** The template opens its thinking itself, and `reasoning_effort: "none"` closes it. */
  thinking: 'switchable' | 'always' | 'none'
}

const qwen = (template: string, rest: Omit<Family, 'template' | 'vocabulary'>): Family => ({ template, vocabulary: 'qwen3', ...rest })
const llama = (template: string, rest: Omit<Family, 'template' | 'vocabulary'>): Family => ({ template, vocabulary: 'llama3_1', ...rest })

const FAMILIES: Family[] = [
  qwen('Qwen-Qwen2.5-7B-Instruct', { forced: 'valid', parallel: true, replaysParallel: true, schema: true, thinking: 'none' }),
  qwen('Qwen-Qwen3-0.6B', { forced: 'valid', parallel: true, replaysParallel: true, schema: true, thinking: 'none' }),
  qwen('Qwen-QwQ-32B', { forced: 'valid', parallel: true, replaysParallel: true, schema: false, thinking: 'switchable' }),
  llama('NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use', { forced: 'valid', parallel: true, replaysParallel: true, schema: true, thinking: 'none' }),
  llama('NousResearch-Hermes-3-Llama-3.1-8B-tool_use', { forced: 'valid', parallel: true, replaysParallel: true, schema: true, thinking: 'none' }),
  llama('meta-llama-Llama-3.1-8B-Instruct', { forced: 'valid', parallel: true, replaysParallel: false, schema: true, thinking: 'none' }),
  llama('meta-llama-Llama-3.2-3B-Instruct', { forced: 'valid', parallel: true, replaysParallel: false, schema: true, thinking: 'none' }),
  llama('meta-llama-Llama-3.3-70B-Instruct', { forced: 'valid', parallel: true, replaysParallel: false, schema: true, thinking: 'none' }),
  llama('fireworks-ai-llama-3-firefunction-v2', { forced: 'valid', parallel: true, replaysParallel: true, schema: true, thinking: 'none' }),
  llama('meetkai-functionary-medium-v3.1', { forced: 'valid', parallel: true, replaysParallel: true, schema: true, thinking: 'none' }),
  qwen('ibm-granite-granite-4.0', { forced: 'valid', parallel: true, replaysParallel: true, schema: true, thinking: 'none' }),
  qwen('ibm-granite-granite-4.1', { forced: 'valid', parallel: true, replaysParallel: true, schema: true, thinking: 'none' }),
  qwen('MiMo-VL', { forced: 'valid', parallel: true, replaysParallel: true, schema: true, thinking: 'none' }),
  qwen('GigaChat3.1-10B-A1.8B', { forced: 'valid', parallel: true, replaysParallel: true, schema: true, thinking: 'none' }),
  qwen('upstage-Solar-Open-100B', { forced: 'valid', parallel: true, replaysParallel: true, schema: true, thinking: 'none' }),
  qwen('Apertus-8B-Instruct', { forced: 'valid', parallel: false, replaysParallel: true, schema: true, thinking: 'none' }),
  qwen('unsloth-Apriel-1.5', { forced: 'valid', parallel: false, replaysParallel: true, schema: true, thinking: 'none' }),
  qwen('mistralai-Mistral-Nemo-Instruct-2407', { eos: '</s>', forced: 'valid', parallel: false, replaysParallel: false, schema: true, thinking: 'none' }),
  { template: 'deepseek-ai-DeepSeek-V3.1', vocabulary: 'deepseek_v3', forced: 'valid', parallel: false, replaysParallel: true, schema: false, thinking: 'switchable' },
]

const weather = {
  type: 'object',
  properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] }, days: { type: 'integer', enum: [1, 2, 3] } },
  required: ['city', 'days'],
  additionalProperties: false,
}
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: weather } },
  { type: 'function', function: { name: 'get_time', description: 'The time in a city', parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] } }, required: ['city'] } } },
]
const ask = [{ role: 'user', content: 'What is the weather in Paris?' }]
const forceWeather = { tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, parallel_tool_calls: false, reasoning_effort: 'none', max_tokens: 100 }
const validWeather = new Ajv().compile(weather)

describe.skipIf(!llamaBuild || !haveTemplates)('tool calling across model families', () => {
  let server: TestServer
  const chat = (model: string, body: Record<string, unknown>) => postJson(server, '/v1/chat/completions', { model, ...body })

  beforeAll(async () => {
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-families-'))
    const cache = join(PROJECT_ROOT, 'test/artifacts/family-models')
    for (const family of FAMILIES) {
      const path = familyModel(cache, family, readFileSync(join(TEMPLATES, `${family.template}.jinja`), 'utf8'))
      copyFileSync(path, join(modelsDir, `${family.template}.gguf`))
    }
    server = await startTestServer({ modelsDir })
  }, 120_000)

  afterAll(async () => {
    await server?.stop()
  })

  describe.each(FAMILIES)('$template', (family) => {
    const model = family.template

    afterAll(async () => {
      // One family's engine at a time.
      await postJson(server, `/api/models/${encodeURIComponent(model)}/unload`, {})
    })

    it(`a forced call names the function${family.forced === 'valid' ? ', with arguments that satisfy its schema' : ''}; streamed the same`, async () => {
      const res = await chat(model, { messages: ask, ...forceWeather })
      expect(res.status, res.text).toBe(200)
      const choice = res.json.choices[0]
      expect(choice.finish_reason).toBe(family.forced === 'valid' ? 'tool_calls' : expect.any(String))
      expect(choice.message.tool_calls).toHaveLength(1)
      const call = choice.message.tool_calls[0]
      expect(call).toMatchObject({ id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'get_weather' } })
      if (family.forced === 'valid') expect(validWeather(JSON.parse(call.function.arguments))).toBe(true)

      const streamed = await chat(model, { messages: ask, ...forceWeather, stream: true })
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

    it(`replays a conversation with ${family.replaysParallel ? 'two calls' : 'a call'} and the results`, async () => {
      const calls = [
        { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","days":1}' } },
        { id: 'call_2', type: 'function', function: { name: 'get_time', arguments: '{"city":"Paris"}' } },
      ].slice(0, family.replaysParallel ? 2 : 1)
      const results = calls.map((c, i) => ({ role: 'tool', tool_call_id: c.id, content: ['Sunny, 21 °C', '14:00'][i] }))
      const res = await chat(model, { tools, max_tokens: 3, messages: [...ask, { role: 'assistant', content: null, tool_calls: calls }, ...results, { role: 'user', content: 'And in Oslo?' }] })
      expect(res.status, res.text).toBe(200)
      const bare = await chat(model, { tools, max_tokens: 3, messages: [...ask, { role: 'user', content: 'And in Oslo?' }] })
      expect(res.json.usage.prompt_tokens).toBeGreaterThan(bare.json.usage.prompt_tokens + 10)
    })

    it.runIf(family.schema)('json_schema output satisfies the schema', async () => {
      const res = await chat(model, { messages: ask, max_tokens: 60, response_format: { type: 'json_schema', json_schema: { name: 'weather', schema: weather } } })
      expect(res.status, res.text).toBe(200)
      expect(validWeather(JSON.parse(res.json.choices[0].message.content))).toBe(true)
    })

    it.runIf(family.thinking !== 'none')('thinks apart from the answer, and reasoning_effort "none" switches it off', async () => {
      const thinking = await chat(model, { messages: ask, max_tokens: 8 })
      expect(thinking.status, thinking.text).toBe(200)
      expect(thinking.json.choices[0].message.reasoning_content.length).toBeGreaterThan(0)
      expect(thinking.json.usage.completion_tokens_details.reasoning_tokens).toBeGreaterThan(0)
      const plain = await chat(model, { messages: ask, max_tokens: 8, reasoning_effort: 'none' })
      expect(plain.status, plain.text).toBe(200)
      if (family.thinking === 'switchable') {
        expect(plain.json.choices[0].message.reasoning_content).toBeUndefined()
        expect(plain.json.choices[0].message.content.length).toBeGreaterThan(0)
      }
    })
  })
})
