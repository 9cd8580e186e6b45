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
import { existsSync, linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
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
  /** Several calls in one answer when `parallel_tool_calls` allows them. */
  parallel: boolean
  /** The template renders a history with two calls in one turn (some allow one call per turn). */
  replaysParallel: boolean
  /**
   * The template opens its thinking itself; `reasoning_effort: "none"` turns it off through the
   * template's own switch (`switch`), or, where the template has none, by the engine closing the
   * thinking as soon as it opens (`closed`).
   */
  thinking: 'switch' | 'closed' | 'none'
  /** Words of the thinking the template writes itself (Apriel's "Here are my reasoning steps:"): they stay as reasoning when it is closed. */
  openingWords?: string
  /** Tokens a forced call may take: formats whose markers are many tokens in the test model's vocabulary need more. */
  callTokens?: number
}

type Row = Omit<Family, 'template' | 'vocabulary'>
const qwen = (template: string, row: Row): Family => ({ template, vocabulary: 'qwen3', ...row })
const llama = (template: string, row: Row): Family => ({ template, vocabulary: 'llama3_1', ...row })
const deepseek = (template: string, row: Row): Family => ({ template, vocabulary: 'deepseek_v3', ...row })
/** Most rows: JSON arguments that satisfy the schema, parallel calls, schema output, no thinking. */
const json: Row = { parallel: true, replaysParallel: true, thinking: 'none' }
/** Families that write arguments as tagged text (or their own syntax): the call is forced, and a string enum takes one of its values (Hearth's llama.cpp patches 4 and 6). */
const tagged: Row = { parallel: false, replaysParallel: true, thinking: 'none' }

const FAMILIES: Family[] = [
  qwen('Qwen-Qwen2.5-7B-Instruct', json),
  qwen('Qwen-Qwen3-0.6B', json),
  qwen('Qwen-QwQ-32B', { ...json, thinking: 'switch' }),
  qwen('Qwen3-Coder', tagged),
  qwen('Qwen3.5-4B', { ...tagged, parallel: true, thinking: 'switch' }),
  llama('NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use', { ...json, parallel: false }),
  llama('NousResearch-Hermes-3-Llama-3.1-8B-tool_use', { ...json, parallel: false }),
  llama('meta-llama-Llama-3.1-8B-Instruct', { ...json, replaysParallel: false }),
  llama('meta-llama-Llama-3.2-3B-Instruct', { ...json, replaysParallel: false }),
  llama('meta-llama-Llama-3.3-70B-Instruct', { ...json, replaysParallel: false }),
  llama('fireworks-ai-llama-3-firefunction-v2', { ...json, parallel: false }),
  llama('meetkai-functionary-medium-v3.1', json),
  llama('meetkai-functionary-medium-v3.2', json),
  qwen('mistralai-Mistral-Nemo-Instruct-2407', { ...json, eos: '</s>', replaysParallel: false }),
  qwen('Mistral-Small-3.2-24B-Instruct-2506', { ...json, eos: '</s>', parallel: false, replaysParallel: false }),
  qwen('unsloth-mistral-Devstral-Small-2507', { ...json, eos: '</s>', parallel: false }),
  qwen('mistralai-Ministral-3-14B-Reasoning-2512', { ...json, eos: '</s>', parallel: false, replaysParallel: false }),
  deepseek('deepseek-ai-DeepSeek-V3.1', { ...json, parallel: false, thinking: 'switch' }),
  deepseek('deepseek-ai-DeepSeek-V3.2', { ...tagged, thinking: 'switch', callTokens: 240 }),
  deepseek('deepseek-ai-DeepSeek-V4', { ...tagged, parallel: true, thinking: 'switch', callTokens: 240 }),
  qwen('ibm-granite-granite-4.0', json),
  qwen('ibm-granite-granite-4.1', json),
  qwen('CohereForAI-c4ai-command-r-plus-tool_use', json),
  qwen('GLM-4.6', tagged),
  qwen('GLM-4.7-Flash', { ...tagged, thinking: 'switch' }),
  // Gemma 4's dict syntax and LFM2's Python-style calls are held to the schema by Hearth's patch 6.
  qwen('google-gemma-4-31B-it', { ...tagged, parallel: true }),
  qwen('LFM2-8B-A1B', tagged),
  qwen('LFM2.5-8B-A1B', tagged),
  qwen('NVIDIA-Nemotron-3-Nano-30B-A3B-BF16', { ...tagged, parallel: true, thinking: 'switch' }),
  qwen('ByteDance-Seed-OSS', tagged),
  qwen('poolside-Laguna-XS.2', { ...tagged, parallel: true, thinking: 'switch' }),
  qwen('tencent-Hy3', { ...tagged, callTokens: 240 }),
  qwen('openbmb-MiniCPM5-1B', { ...tagged, parallel: true, thinking: 'switch' }),
  qwen('Bielik-11B-v3.0-Instruct', { ...json, thinking: 'switch' }),
  // Reka may think before the schema's object even with thinking off: a zero budget closes it (patch 7).
  qwen('Reka-Edge', { ...json, thinking: 'switch' }),
  qwen('MiMo-VL', json),
  qwen('GigaChat3-10B-A1.8B', { ...json, parallel: false }),
  qwen('GigaChat3.1-10B-A1.8B', json),
  qwen('upstage-Solar-Open-100B', json),
  qwen('Apertus-8B-Instruct', { ...json, parallel: false }),
  qwen('unsloth-Apriel-1.5', { ...json, parallel: false }),
  qwen('LFM2.5-Instruct', tagged),
  qwen('StepFun3.5-Flash', { ...tagged, thinking: 'closed' }),
  deepseek('deepseek-ai-DeepSeek-V4-Flash-0731', { ...tagged, parallel: true, thinking: 'switch', callTokens: 240 }),
  qwen('google-gemma-4-31B-it-interleaved', { ...tagged, parallel: true }),
  qwen('poolside-Laguna-S-2.1', { ...tagged, parallel: true, thinking: 'switch' }),
  qwen('poolside-Laguna-XS-2.1', { ...tagged, parallel: true, thinking: 'switch' }),
  // Forced calls here come out through Hearth's patch 8 (bounded ids and format names, no free text
  // before a required call, Granite 3's own parser) and patch 7 (a zero budget closes "<think>\n").
  // gpt-oss, Kimi K2 Thinking and Command R7B think only when the model opens its thinking, which a
  // random model never does.
  { template: 'openai-gpt-oss-120b', vocabulary: 'gptoss', ...json, parallel: false, callTokens: 160 },
  qwen('Kimi-K2-Instruct', { ...json, parallel: false }),
  qwen('Kimi-K2-Thinking', { ...json, parallel: false }),
  qwen('moonshotai-Kimi-K2', { ...json, parallel: false }),
  qwen('MiniMax-M2', { ...tagged, eos: '[e~[', parallel: true, thinking: 'closed' }),
  qwen('MiniMax-M3', { ...tagged, eos: '[e~[', callTokens: 240 }),
  qwen('CohereForAI-c4ai-command-r7b-12-2024-tool_use', { ...json, eos: '<|END_OF_TURN_TOKEN|>' }),
  qwen('Cohere2MoE', { ...json, eos: '<|END_OF_TURN_TOKEN|>', thinking: 'closed' }),
  qwen('ibm-granite-granite-3.3-2B-Instruct', { ...json, eos: '<|end_of_text|>' }),
  qwen('NVIDIA-Nemotron-Nano-v2', { ...json, eos: '<SPECIAL_12>', thinking: 'switch' }),
  qwen('Apriel-1.6-15b-Thinker-fixed', { ...json, eos: '<|end|>', thinking: 'closed', openingWords: 'Here are my reasoning steps:\n' }),
  deepseek('llama-cpp-deepseek-r1', { ...json, parallel: false, thinking: 'closed' }),
  // Writes calls but never shows the model its tools: Hearth lists them in the system message.
  deepseek('deepseek-ai-DeepSeek-R1-Distill-Qwen-32B', { ...json, parallel: false, thinking: 'closed' }),
]

/** Templates with no tool calling at all (no tools shown, no calls written): a request with tools is refused, not answered as if there were none. */
const WITHOUT_TOOLS: FamilyModelSpec[] = [
  { template: 'google-gemma-2-2b-it', vocabulary: 'qwen3', eos: '<end_of_turn>' },
  { template: 'microsoft-Phi-3.5-mini-instruct', vocabulary: 'qwen3', eos: '<|end|>' },
  { template: 'llama-cpp-rwkv-world', vocabulary: 'qwen3' },
  { template: 'HuggingFaceTB-SmolLM3-3B', vocabulary: 'qwen3' },
  { template: 'deepseek-ai-DeepSeek-R1-Distill-Llama-8B', vocabulary: 'deepseek_v3' },
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
  }, 120_000)

  afterAll(async () => {
    await server?.stop()
    rmSync(modelsDir, { recursive: true, force: true })
  })

  describe.each(FAMILIES)('$template', (family) => {
    const model = family.template

    afterAll(async () => {
      // One family's engine at a time.
      await postJson(server, `/api/models/${encodeURIComponent(model)}/unload`, {})
    })

    it('a forced call names the function, with arguments that satisfy its schema; streamed the same', async () => {
      const res = await chat(model, { messages: ask, ...forceWeather, max_tokens: family.callTokens ?? forceWeather.max_tokens })
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

    it('json_schema output satisfies the schema', async () => {
      const res = await chat(model, { messages: ask, max_tokens: family.callTokens ?? 60, reasoning_effort: 'none', response_format: { type: 'json_schema', json_schema: { name: 'weather', schema: weather } } })
      expect(res.status, res.text).toBe(200)
      expect(validWeather(JSON.parse(res.json.choices[0].message.content)), res.text).toBe(true)
    })

    it.runIf(family.thinking !== 'none')('thinks apart from the answer, and reasoning_effort "none" switches it off', async () => {
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
    })
  })
})
