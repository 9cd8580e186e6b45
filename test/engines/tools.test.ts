/**
 * Agent-grade chat completions through the clients agents are written with: openai-node, the Vercel
 * AI SDK and LangChain, against the running server and a tiny random model that speaks Qwen 3's chat
 * format (real vocabulary, real template). Its weights are random, so what it writes is noise: the
 * engine's grammar is what makes a forced call or a schema come out valid, and that is what is tested.
 */
import { createOpenAI } from '@ai-sdk/openai'
import { ChatOpenAI } from '@langchain/openai'
import { AIMessage, HumanMessage, ToolMessage } from '@langchain/core/messages'
import { tool as langchainTool } from '@langchain/core/tools'
import { generateText, Output, streamText, tool } from 'ai'
import { Ajv } from 'ajv'
import { mkdtempSync, readFileSync, copyFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { zodResponseFormat } from 'openai/helpers/zod'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { familyModel } from '../support/family-models.ts'
import { PROJECT_ROOT, postJson, startTestServer, type TestServer } from '../support/server-process.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { llamaBuild } from '../support/upstream-servers.ts'
import { cannotRun, describeIf } from '../support/skips.ts'

const template = sharedFixture('chat-templates/Qwen-Qwen3-0.6B.jinja')
const thinkingTemplate = sharedFixture('chat-templates/Qwen-QwQ-32B.jinja')
if (!llamaBuild) cannotRun('llama.cpp is not built on this machine (npm run build:engines); the tools suite cannot run')

const MODEL = 'qwen3-tiny'
/** QwQ opens every answer with its thinking. */
const THINKER = 'qwq-tiny'
const weatherParameters: Record<string, unknown> = {
  type: 'object',
  properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] }, days: { type: 'integer', enum: [1, 2, 3] } },
  required: ['city', 'days'],
  additionalProperties: false,
}
const tools: OpenAI.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: weatherParameters } },
  {
    type: 'function',
    function: {
      name: 'get_time',
      description: 'The time in a city',
      parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] } }, required: ['city'] },
    },
  },
]
const ask: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'What is the weather in Paris?' }]
// Qwen 3 may think before it calls; a random model never stops thinking, so these tests switch it off.
const noThinking = { reasoning_effort: 'none' } as const
const validWeather = new Ajv().compile(weatherParameters)

describeIf(llamaBuild && template && thinkingTemplate, 'needs llama.cpp built here (npm run build:engines) and the chat templates of ../shared/fixtures')(
  'tools, structured output, reasoning and logprobs',
  () => {
    let server: TestServer
    let client: OpenAI

    beforeAll(async () => {
      const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-tools-'))
      const path = familyModel(
        join(PROJECT_ROOT, 'test/artifacts/family-models'),
        { template: 'Qwen-Qwen3-0.6B', vocabulary: 'qwen3' },
        readFileSync(template!, 'utf8'),
      )
      copyFileSync(path, join(modelsDir, `${MODEL}.gguf`))
      const thinker = familyModel(
        join(PROJECT_ROOT, 'test/artifacts/family-models'),
        { template: 'Qwen-QwQ-32B', vocabulary: 'qwen3' },
        readFileSync(thinkingTemplate!, 'utf8'),
      )
      copyFileSync(thinker, join(modelsDir, `${THINKER}.gguf`))
      server = await startTestServer({ modelsDir })
      client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey })
    })

    afterAll(async () => {
      await server?.stop()
    })

    describe('openai-node', () => {
      it('a named function is always called, with arguments that satisfy its schema', async () => {
        const answer = await client.chat.completions.create({
          model: MODEL,
          messages: ask,
          tools,
          tool_choice: { type: 'function', function: { name: 'get_weather' } },
          parallel_tool_calls: false,
          max_tokens: 100,
          ...noThinking,
        })
        const choice = answer.choices[0]!
        expect(choice.finish_reason).toBe('tool_calls')
        expect(choice.message.content).toBeNull()
        expect(choice.message.tool_calls).toHaveLength(1)
        const call = choice.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall
        expect(call.id).toMatch(/^call_/)
        expect(call.type).toBe('function')
        expect(call.function.name).toBe('get_weather')
        expect(validWeather(JSON.parse(call.function.arguments))).toBe(true)
      })

      it("'required' calls one of the tools", async () => {
        const answer = await client.chat.completions.create({
          model: MODEL,
          messages: ask,
          tools,
          tool_choice: 'required',
          parallel_tool_calls: false,
          max_tokens: 100,
          ...noThinking,
        })
        expect(answer.choices[0]!.finish_reason).toBe('tool_calls')
        const call = answer.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall
        expect(['get_weather', 'get_time']).toContain(call.function.name)
        expect(JSON.parse(call.function.arguments)).toHaveProperty('city')
      })

      it('streams a call as OpenAI does: id, type and name first, then arguments that join into valid JSON', async () => {
        const stream = await client.chat.completions.create({
          model: MODEL,
          messages: ask,
          tools,
          tool_choice: { type: 'function', function: { name: 'get_weather' } },
          parallel_tool_calls: false,
          max_tokens: 100,
          stream: true,
          ...noThinking,
        })
        const deltas: OpenAI.ChatCompletionChunk.Choice.Delta.ToolCall[] = []
        let finish: string | null = null
        for await (const chunk of stream) {
          deltas.push(...(chunk.choices[0]?.delta.tool_calls ?? []))
          finish = chunk.choices[0]?.finish_reason ?? finish
        }
        expect(finish).toBe('tool_calls')
        expect(deltas.length).toBeGreaterThan(1)
        expect(deltas[0]).toMatchObject({ index: 0, id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'get_weather' } })
        for (const later of deltas.slice(1)) {
          expect(later.index).toBe(0)
          expect(later.id).toBeUndefined()
          expect(later.function?.name).toBeUndefined()
        }
        const joined = deltas.map((d) => d.function?.arguments ?? '').join('')
        expect(validWeather(JSON.parse(joined))).toBe(true)
      })

      it('runTools: calls our function, sends its result back, and returns', async () => {
        const calls: unknown[] = []
        const runner = client.chat.completions.runTools({
          model: MODEL,
          messages: ask,
          max_tokens: 100,
          tool_choice: { type: 'function', function: { name: 'get_weather' } },
          parallel_tool_calls: false,
          tools: [
            {
              type: 'function',
              function: {
                name: 'get_weather',
                description: 'The weather in a city',
                parameters: { ...weatherParameters },
                function: (args: unknown) => {
                  calls.push(args)
                  return 'Sunny, 21 °C'
                },
                parse: JSON.parse,
              },
            },
          ],
        })
        await runner.done()
        expect(calls).toHaveLength(1)
        expect(validWeather(calls[0])).toBe(true)
        const result = runner.messages.find((m) => m.role === 'tool')
        expect(result).toMatchObject({ role: 'tool', content: 'Sunny, 21 °C' })
      })

      it('a conversation with calls and their results reaches the template (content null, role tool)', async () => {
        const answer = await client.chat.completions.create({
          model: MODEL,
          max_tokens: 3,
          tools,
          messages: [
            ...ask,
            {
              role: 'assistant',
              content: null,
              tool_calls: [
                { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","days":1}' } },
                { id: 'call_2', type: 'function', function: { name: 'get_time', arguments: '{"city":"Paris"}' } },
              ],
            },
            { role: 'tool', tool_call_id: 'call_1', content: 'Sunny, 21 °C' },
            { role: 'tool', tool_call_id: 'call_2', content: '14:00' },
            { role: 'user', content: 'And in Oslo?' },
          ],
        })
        expect(answer.choices[0]!.message.role).toBe('assistant')
        // The results are in the prompt: the same conversation without them is shorter.
        const without = await client.chat.completions.create({
          model: MODEL,
          max_tokens: 3,
          tools,
          messages: [...ask, { role: 'user', content: 'And in Oslo?' }],
        })
        expect(answer.usage!.prompt_tokens).toBeGreaterThan(without.usage!.prompt_tokens + 20)
      })

      it('chat.completions.parse with a zod schema gets an object that satisfies it', async () => {
        const Weather = z.object({ city: z.enum(['Paris', 'Oslo']), warm: z.boolean() })
        const completion = await client.chat.completions.parse({
          model: MODEL,
          messages: ask,
          max_tokens: 60,
          response_format: zodResponseFormat(Weather, 'weather'),
        })
        const parsed = completion.choices[0]!.message.parsed
        expect(Weather.parse(parsed)).toEqual(parsed)
      })

      it('json_object answers are a JSON object', async () => {
        const answer = await client.chat.completions.create({ model: MODEL, messages: ask, max_tokens: 40, response_format: { type: 'json_object' } })
        const text = answer.choices[0]!.message.content!
        // The random model may run out of tokens mid-object; what it wrote is an object's beginning.
        if (answer.choices[0]!.finish_reason === 'stop') expect(typeof JSON.parse(text)).toBe('object')
        else expect(text.trimStart().startsWith('{')).toBe(true)
      })

      it('logprobs and top_logprobs come in OpenAI’s shape, streamed and not', async () => {
        const answer = await client.chat.completions.create({ model: MODEL, messages: ask, max_tokens: 4, logprobs: true, top_logprobs: 3, ...noThinking })
        const content = answer.choices[0]!.logprobs!.content!
        // One entry per token (a token that ends inside a UTF-8 character too: Hearth's llama.cpp
        // llama-08), and the entries' texts join into the answer.
        expect(content.length).toBe(answer.usage!.completion_tokens)
        expect(content.map((t) => t.token).join('')).toBe(answer.choices[0]!.message.content)
        for (const token of content) {
          expect(token.logprob).toBeLessThanOrEqual(0)
          // The bytes are the token's own; its text shows a character it only begins as U+FFFD.
          if (!token.token.includes('\ufffd')) expect(token.bytes).toEqual([...Buffer.from(token.token)])
          expect(token.top_logprobs).toHaveLength(3)
          // Greedy: the chosen token is the most likely one.
          expect(token.top_logprobs[0]!.logprob).toBeCloseTo(token.logprob, 5)
        }
        const none = await client.chat.completions.create({ model: MODEL, messages: ask, max_tokens: 2, logprobs: true, top_logprobs: 0, ...noThinking })
        expect(none.choices[0]!.logprobs!.content!.every((t) => t.top_logprobs.length === 0)).toBe(true)
        const stream = await client.chat.completions.create({
          model: MODEL,
          messages: ask,
          max_tokens: 4,
          logprobs: true,
          top_logprobs: 1,
          stream: true,
          ...noThinking,
        })
        const streamed: OpenAI.ChatCompletionTokenLogprob[] = []
        for await (const chunk of stream) streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []))
        expect(streamed.map((t) => t.token)).toEqual(content.map((t) => t.token))
        const plain = await client.chat.completions.create({ model: MODEL, messages: ask, max_tokens: 2 })
        expect(plain.choices[0]!.logprobs).toBeNull()
      })

      it('gives a token that ends inside a UTF-8 character its own logprobs entry, streamed and not', async () => {
        // Seed 3 samples, as its first token, the first two bytes of a three-byte character (this
        // test model's vocabulary has such tokens); llama.cpp used to fold it into the next entry.
        const request = {
          model: MODEL,
          messages: [{ role: 'user' as const, content: 'Hi' }],
          max_tokens: 40,
          temperature: 1,
          seed: 3,
          logprobs: true,
          ...noThinking,
        }
        const answer = await client.chat.completions.create(request)
        const content = answer.choices[0]!.logprobs!.content!
        expect(content).toHaveLength(answer.usage!.completion_tokens)
        const held = content.filter((t) => t.token === '' && t.bytes!.length === 0)
        expect(held.length).toBeGreaterThan(0)
        expect(held.every((t) => t.logprob <= 0)).toBe(true)
        expect(content.map((t) => t.token).join('')).toBe(answer.choices[0]!.message.content)
        const streamed: OpenAI.ChatCompletionTokenLogprob[] = []
        for await (const chunk of await client.chat.completions.create({ ...request, stream: true }))
          streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []))
        expect(streamed.map((t) => [t.token, t.logprob])).toEqual(content.map((t) => [t.token, t.logprob]))
      })

      it('the same seed gives the same answer when sampling', async () => {
        const sample = (seed: number) =>
          client.chat.completions
            .create({ model: MODEL, messages: ask, max_tokens: 12, temperature: 1, top_p: 1, seed, ...noThinking })
            .then((a) => a.choices[0]!.message.content)
        const first = await sample(42)
        expect(await sample(42)).toBe(first)
        const others = await Promise.all([sample(1), sample(2), sample(3)])
        expect(others.some((text) => text !== first)).toBe(true)
      })
    })

    describe('reasoning', () => {
      it('thinking comes apart from the answer, and usage counts it', async () => {
        const answer = await client.chat.completions.create({ model: THINKER, messages: ask, max_tokens: 12 })
        const message = answer.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string }
        expect(message.reasoning_content?.length).toBeGreaterThan(0)
        expect(message.content).not.toContain('<think>')
        const details = answer.usage!.completion_tokens_details!
        expect(details.reasoning_tokens).toBeGreaterThan(0)
        expect(details.reasoning_tokens).toBeLessThanOrEqual(answer.usage!.completion_tokens)
      })

      it("streams it as delta.reasoning_content, the same as the answer's", async () => {
        const answer = await client.chat.completions.create({ model: THINKER, messages: ask, max_tokens: 12 })
        const stream = await client.chat.completions.create({ model: THINKER, messages: ask, max_tokens: 12, stream: true })
        let reasoning = ''
        for await (const chunk of stream) reasoning += (chunk.choices[0]?.delta as { reasoning_content?: string } | undefined)?.reasoning_content ?? ''
        expect(reasoning).toBe((answer.choices[0]!.message as { reasoning_content?: string }).reasoning_content)
      })

      it("reasoning_effort 'none' switches the thinking off", async () => {
        const answer = await client.chat.completions.create({ model: THINKER, messages: ask, max_tokens: 12, reasoning_effort: 'none' })
        const message = answer.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string }
        expect(message.reasoning_content).toBeUndefined()
        expect(message.content!.length).toBeGreaterThan(0)
        expect(answer.usage!.completion_tokens_details!.reasoning_tokens).toBe(0)
      })

      it('thinking_budget_tokens caps the thinking: the engine closes it and the answer follows', async () => {
        const body = { model: THINKER, messages: ask, max_tokens: 24, thinking_budget_tokens: 4 }
        const res = await postJson(server, '/v1/chat/completions', body)
        expect(res.status, res.text).toBe(200)
        const { message } = res.json.choices[0]
        // A random model never ends its thinking by itself: without the cap all 24 tokens are thinking.
        const uncapped = await postJson(server, '/v1/chat/completions', { ...body, thinking_budget_tokens: undefined })
        expect(uncapped.json.choices[0].message.content ?? '').toBe('')
        expect(message.reasoning_content.length).toBeGreaterThan(0)
        expect(message.content.length).toBeGreaterThan(0)
        // The four thinking tokens, and the closing marker the engine wrote for the model.
        expect(res.json.usage.completion_tokens_details.reasoning_tokens).toBeLessThanOrEqual(6)
      })
    })

    describe('the Vercel AI SDK', () => {
      const provider = () => createOpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey }).chat(MODEL)
      const weatherTool = tool({
        description: 'The weather in a city',
        inputSchema: z.object({ city: z.enum(['Paris', 'Oslo']), days: z.union([z.literal(1), z.literal(2), z.literal(3)]) }),
      })

      it('generateText with a required tool gets a typed call', async () => {
        const result = await generateText({
          model: provider(),
          prompt: 'What is the weather in Paris?',
          tools: { get_weather: weatherTool },
          toolChoice: 'required',
          maxOutputTokens: 100,
          providerOptions: { openai: { parallelToolCalls: false, reasoningEffort: 'none' } },
        })
        expect(result.finishReason).toBe('tool-calls')
        expect(result.toolCalls).toHaveLength(1)
        expect(result.toolCalls[0]!.toolName).toBe('get_weather')
        expect(['Paris', 'Oslo']).toContain((result.toolCalls[0]!.input as { city: string }).city)
      })

      it('streamText streams the same call', async () => {
        const result = streamText({
          model: provider(),
          prompt: 'What is the weather in Paris?',
          tools: { get_weather: weatherTool },
          toolChoice: { type: 'tool', toolName: 'get_weather' },
          maxOutputTokens: 100,
          providerOptions: { openai: { parallelToolCalls: false, reasoningEffort: 'none' } },
        })
        const calls = await result.toolCalls
        expect(calls).toHaveLength(1)
        expect(calls[0]!.toolName).toBe('get_weather')
        expect(await result.finishReason).toBe('tool-calls')
      })

      it('Output.object gets an object that satisfies the schema', async () => {
        const schema = z.object({ city: z.enum(['Paris', 'Oslo']), warm: z.boolean() })
        const result = await generateText({
          model: provider(),
          prompt: 'Describe the weather in Paris.',
          output: Output.object({ schema }),
          maxOutputTokens: 60,
        })
        expect(schema.parse(result.output)).toEqual(result.output)
      })
    })

    describe('LangChain', () => {
      const chat = () =>
        new ChatOpenAI({
          model: MODEL,
          apiKey: server.apiKey,
          configuration: { baseURL: `${server.url}/v1` },
          maxTokens: 100,
          reasoning: { effort: 'none' } as never,
        })
      const weather = langchainTool(async () => 'Sunny', {
        name: 'get_weather',
        description: 'The weather in a city',
        schema: z.object({ city: z.enum(['Paris', 'Oslo']), days: z.union([z.literal(1), z.literal(2), z.literal(3)]) }),
      })

      it('bindTools gets tool calls, and a conversation with their results goes back', async () => {
        const model = chat().bindTools([weather], { tool_choice: 'get_weather', parallel_tool_calls: false })
        const message = await model.invoke([new HumanMessage('What is the weather in Paris?')])
        expect(message.tool_calls).toHaveLength(1)
        const call = message.tool_calls![0]!
        expect(call.name).toBe('get_weather')
        expect(validWeather(call.args)).toBe(true)
        const next = await chat()
          .bindTools([weather])
          .invoke([
            new HumanMessage('What is the weather in Paris?'),
            new AIMessage({ content: '', tool_calls: [call] }),
            new ToolMessage({ content: 'Sunny', tool_call_id: call.id! }),
          ])
        expect(next).toBeInstanceOf(AIMessage)
      })

      it('withStructuredOutput parses into the schema', async () => {
        const schema = z.object({ city: z.enum(['Paris', 'Oslo']), warm: z.boolean() })
        const structured = chat().withStructuredOutput(schema, { method: 'jsonSchema' })
        const answer = await structured.invoke('Describe the weather in Paris.')
        expect(schema.parse(answer)).toEqual(answer)
      })
    })

    describe('bad input gets a 400 naming the field', () => {
      const cases: Array<[string, Record<string, unknown>, string, string?]> = [
        ['n > 1', { n: 2 }, 'n', 'unsupported_parameter'],
        ['audio output', { audio: { voice: 'alloy', format: 'mp3' } }, 'audio', 'unsupported_parameter'],
        ['modalities', { modalities: ['text', 'audio'] }, 'modalities', 'unsupported_parameter'],
        ['predicted outputs', { prediction: { type: 'content', content: 'x' } }, 'prediction', 'unsupported_parameter'],
        ['deprecated functions', { functions: [{ name: 'f' }] }, 'functions', 'unsupported_parameter'],
        ['a tool of another type', { tools: [{ type: 'custom', custom: { name: 'x' } }] }, 'tools[0].type'],
        ['a tool without a name', { tools: [{ type: 'function', function: {} }] }, 'tools[0].function.name'],
        ['a bad function name', { tools: [{ type: 'function', function: { name: 'has space' } }] }, 'tools[0].function.name'],
        ['two tools of one name', { tools: [tools[0], tools[0]] }, 'tools[1].function.name'],
        [
          'parameters that are not an object schema',
          { tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'string' } } }] },
          'tools[0].function.parameters.type',
        ],
        ['tool_choice without tools', { tool_choice: 'required' }, 'tool_choice'],
        ['an unknown tool_choice', { tools, tool_choice: 'always' }, 'tool_choice'],
        ['tool_choice naming a missing function', { tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice.function.name'],
        ['parallel_tool_calls without tools', { parallel_tool_calls: false }, 'parallel_tool_calls'],
        ['parallel_tool_calls not a boolean', { tools, parallel_tool_calls: 'yes' }, 'parallel_tool_calls'],
        ['an unknown response_format', { response_format: { type: 'xml' } }, 'response_format.type'],
        ['json_schema without a name', { response_format: { type: 'json_schema', json_schema: { schema: {} } } }, 'response_format.json_schema.name'],
        [
          'a schema that is not an object',
          { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: 'string' } } },
          'response_format.json_schema.schema',
        ],
        ['a bad reasoning_effort', { reasoning_effort: 'extreme' }, 'reasoning_effort'],
        ['a negative thinking budget', { thinking_budget_tokens: -1 }, 'thinking_budget_tokens'],
        ['a thinking budget that is not a whole number', { thinking_budget_tokens: 2.5 }, 'thinking_budget_tokens'],
        ['top_logprobs without logprobs', { top_logprobs: 2 }, 'top_logprobs'],
        ['top_logprobs over 20', { logprobs: true, top_logprobs: 21 }, 'top_logprobs'],
        ['logprobs with tools', { logprobs: true, tools }, 'logprobs', 'unsupported_parameter'],
        ['presence_penalty out of range', { presence_penalty: 3 }, 'presence_penalty'],
        ['logit_bias with a word for a key', { logit_bias: { hello: 1 } }, 'logit_bias.hello'],
        ['logit_bias over 100', { logit_bias: { '5': 101 } }, 'logit_bias.5'],
        ['a token id the model does not have', { logit_bias: { '99999999': 1 } }, 'logit_bias.99999999'],
        ['an assistant message with neither content nor calls', { messages: [{ role: 'assistant', content: null }] }, 'messages[0].content'],
        ['a tool result with no call before it', { messages: [...ask, { role: 'tool', tool_call_id: 'call_9', content: 'x' }] }, 'messages[1].tool_call_id'],
        ['a tool message without tool_call_id', { messages: [...ask, { role: 'tool', content: 'x' }] }, 'messages[1].tool_call_id'],
        [
          'a conversation that ends on a call with no result',
          { messages: [...ask, { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] }] },
          'messages[1].tool_calls',
        ],
        ['an unknown role', { messages: [{ role: 'function', content: 'x', name: 'f' }] }, 'messages[0].role'],
      ]
      it.each(cases)('%s', async (_name, fields, param, code) => {
        const res = await postJson(server, '/v1/chat/completions', { model: MODEL, messages: ask, max_tokens: 2, ...fields })
        expect(res.status).toBe(400)
        expect(res.json.error.param).toBe(param)
        expect(res.json.error.type).toBe('invalid_request_error')
        if (code) expect(res.json.error.code).toBe(code)
        expect(res.json.error.message).toBeTruthy()
      })

      it('harmless fields are accepted (user, metadata, store, service_tier), and fields that are not OpenAI’s are ignored', async () => {
        const res = await postJson(server, '/v1/chat/completions', {
          model: MODEL,
          messages: ask,
          max_tokens: 2,
          user: 'u-1',
          metadata: { task: 'test' },
          store: false,
          service_tier: 'auto',
          prompt_cache_key: 'k',
          safety_identifier: 's',
          some_client_extension: { x: 1 },
        })
        expect(res.status).toBe(200)
      })

      it('a history the engine would choke on is mended or named, never a 500: a call cut off mid-way, a call with no result', async () => {
        const cutOff = {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Par' } }],
        }
        const mended = await postJson(server, '/v1/chat/completions', {
          model: MODEL,
          ...noThinking,
          tools,
          max_tokens: 2,
          messages: [...ask, cutOff, { role: 'tool', tool_call_id: 'call_a', content: 'sunny' }],
        })
        expect(mended.status, mended.text).toBe(200)
        expect(mended.headers.get('warning')).toMatch(/messages\[1\]\.tool_calls\[0\]\.function\.arguments/)
        const noCall = {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'call_b', type: 'function', function: { name: 'get_weather', arguments: 'not json at all' } }],
        }
        const middle = await postJson(server, '/v1/chat/completions', {
          model: MODEL,
          ...noThinking,
          tools,
          max_tokens: 2,
          messages: [...ask, noCall, { role: 'user', content: 'never mind' }],
        })
        expect(middle.status, middle.text).toBe(200)
      })

      it('a schema the engine cannot turn into a grammar is a 400 naming where in the schema', async () => {
        const res = await postJson(server, '/v1/chat/completions', {
          model: MODEL,
          messages: ask,
          max_tokens: 2,
          response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } } } },
        })
        expect(res.status).toBe(400)
        expect(res.json.error.param).toBe('response_format.json_schema.schema.properties.a')
        expect(res.json.error.message).toMatch(/#\/\$defs\/missing/)
      })
    })
  },
)
