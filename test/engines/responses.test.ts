/**
 * OpenAI's Responses API through openai-node and the Vercel AI SDK's default provider (which speaks
 * it): plain and streamed answers, function tools and their outputs, json_schema text, an image,
 * stored responses continued with previous_response_id, read back and deleted, and bad input.
 */
import { createOpenAI } from '@ai-sdk/openai'
import { ChatOpenAI } from '@langchain/openai'
import { tool as langchainTool } from '@langchain/core/tools'
import { generateText, tool } from 'ai'
import { Ajv } from 'ajv'
import { copyFileSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { z } from 'zod'
import { familyModel } from '../support/family-models.ts'
import { PROJECT_ROOT, postJson, startTestServer, type TestServer } from '../support/server-process.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { makePng } from '../support/test-images.ts'
import { writeTinyLlama, writeTinyMmproj } from '../support/tiny-models.ts'
import { llamaBuild } from '../support/upstream-servers.ts'
import { cannotRun, describeIf } from '../support/skips.ts'

const qwen3 = sharedFixture('chat-templates/Qwen-Qwen3-0.6B.jinja')
if (!llamaBuild) cannotRun('llama.cpp is not built on this machine (npm run build:engines); the Responses suite cannot run')

const MODEL = 'qwen3-tiny'
const weather = {
  type: 'object',
  properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] }, days: { type: 'integer', enum: [1, 2, 3] } },
  required: ['city', 'days'],
  additionalProperties: false,
}
const tools: OpenAI.Responses.FunctionTool[] = [
  { type: 'function', name: 'get_weather', description: 'The weather in a city', parameters: weather, strict: true },
]
const validWeather = new Ajv().compile(weather)

describeIf(llamaBuild && qwen3, 'needs llama.cpp built here (npm run build:engines) and the chat templates of ../shared/fixtures')(
  "OpenAI's Responses API",
  () => {
    let server: TestServer
    let client: OpenAI

    beforeAll(async () => {
      const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-responses-'))
      copyFileSync(
        familyModel(join(PROJECT_ROOT, 'test/artifacts/family-models'), { template: 'Qwen-Qwen3-0.6B', vocabulary: 'qwen3' }, readFileSync(qwen3!, 'utf8')),
        join(modelsDir, `${MODEL}.gguf`),
      )
      const llama = writeTinyLlama(join(modelsDir, 'tiny-vision.gguf'), { contextLength: 512 })
      writeTinyMmproj(join(modelsDir, 'mmproj-tiny-vision.gguf'), { textEmbd: llama.embd })
      server = await startTestServer({ modelsDir })
      client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey })
    })

    afterAll(async () => {
      await server?.stop()
    })

    it('answers a string input with instructions, in the Response shape', async () => {
      const response = await client.responses.create({ model: MODEL, input: 'Hello there', instructions: 'Be brief.', max_output_tokens: 6 })
      expect(response.id).toMatch(/^resp_/)
      expect(response.object).toBe('response')
      expect(response.status).toBe('incomplete')
      expect(response.incomplete_details).toEqual({ reason: 'max_output_tokens' })
      expect(response.output[0]).toMatchObject({ type: 'message', role: 'assistant', status: 'completed' })
      expect(response.output_text.length).toBeGreaterThan(0)
      expect(response.usage).toMatchObject({ output_tokens: 6 })
      expect(response.usage!.total_tokens).toBe(response.usage!.input_tokens + 6)
    })

    it("gives each output token's log probability, as chat completions gives it for the same request, whole and streamed", async () => {
      const asked = { model: MODEL, input: 'Tell me a story', max_output_tokens: 6, store: false, temperature: 0 }
      const response = await client.responses.create({ ...asked, include: ['message.output_text.logprobs'], top_logprobs: 2 })
      const text = (response.output.find((i) => i.type === 'message') as OpenAI.Responses.ResponseOutputMessage)
        .content[0] as OpenAI.Responses.ResponseOutputText
      expect(text.logprobs!.length).toBe(6)
      expect(text.logprobs!.map((l) => l.token).join('')).toBe(text.text)
      expect(text.logprobs!.every((l) => l.top_logprobs.length === 2 && l.logprob <= 0)).toBe(true)
      const chat = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Tell me a story' }],
        max_tokens: 6,
        temperature: 0,
        logprobs: true,
        top_logprobs: 2,
      })
      expect(text.logprobs!.map((l) => l.token)).toEqual(chat.choices[0]!.logprobs!.content!.map((l) => l.token))
      const stream = await client.responses.create({ ...asked, include: ['message.output_text.logprobs'], top_logprobs: 2, stream: true })
      const streamed: Array<{ token: string }> = []
      for await (const event of stream)
        if (event.type === 'response.output_text.delta') streamed.push(...((event as { logprobs?: Array<{ token: string }> }).logprobs ?? []))
      expect(streamed.map((l) => l.token)).toEqual(text.logprobs!.map((l) => l.token))
      // Not asked for, none come.
      const plain = await client.responses.create(asked)
      expect(
        ((plain.output.find((i) => i.type === 'message') as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText).logprobs,
      ).toEqual([])
    })

    it('streams typed events in order, and they add up to the same Response', async () => {
      const whole = await client.responses.create({ model: MODEL, input: 'Tell me a story', max_output_tokens: 8, store: false })
      const stream = await client.responses.create({ model: MODEL, input: 'Tell me a story', max_output_tokens: 8, stream: true, store: false })
      const types: string[] = []
      let text = ''
      let last: OpenAI.Responses.Response | undefined
      const numbers: number[] = []
      for await (const event of stream) {
        types.push(event.type)
        numbers.push(event.sequence_number)
        if (event.type === 'response.output_text.delta') text += event.delta
        if (event.type === 'response.completed' || event.type === 'response.incomplete') last = event.response
      }
      expect(types.slice(0, 4)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added'])
      expect(types.slice(-4)).toEqual(['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.incomplete'])
      expect(numbers).toEqual(numbers.map((_, i) => i))
      expect(text).toBe(whole.output_text)
      expect(last!.output_text ?? (last!.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0]).toBeTruthy()
    })

    it('calls a function tool, and continues from the call output with previous_response_id', async () => {
      const first = await client.responses.create({
        model: MODEL,
        input: 'What is the weather in Paris?',
        tools,
        tool_choice: 'required',
        parallel_tool_calls: false,
        max_output_tokens: 100,
      })
      const call = first.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call')!
      expect(call).toMatchObject({ name: 'get_weather', call_id: expect.stringMatching(/^call_/), status: 'completed' })
      expect(validWeather(JSON.parse(call.arguments))).toBe(true)
      expect(first.status).toBe('completed')

      const next = await client.responses.create({
        model: MODEL,
        previous_response_id: first.id,
        input: [{ type: 'function_call_output', call_id: call.call_id, output: 'Sunny, 21 °C' }],
        tools,
        max_output_tokens: 4,
      })
      expect(next.previous_response_id).toBe(first.id)
      // The earlier question, the call and its output are all in the prompt.
      expect(next.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens + 10)
    })

    it('streams a function call as output_item.added, arguments deltas and done', async () => {
      const stream = await client.responses.create({
        model: MODEL,
        input: 'Weather in Oslo?',
        tools,
        tool_choice: { type: 'function', name: 'get_weather' },
        parallel_tool_calls: false,
        max_output_tokens: 100,
        stream: true,
      })
      let added: OpenAI.Responses.ResponseOutputItem | undefined
      let args = ''
      let done: string | undefined
      for await (const event of stream) {
        if (event.type === 'response.output_item.added') added = event.item
        if (event.type === 'response.function_call_arguments.delta') args += event.delta
        if (event.type === 'response.function_call_arguments.done') done = event.arguments
      }
      expect(added).toMatchObject({ type: 'function_call', name: 'get_weather' })
      expect(done).toBe(args)
      expect(validWeather(JSON.parse(args))).toBe(true)
    })

    it('text.format json_schema gives JSON that satisfies the schema', async () => {
      const response = await client.responses.create({
        model: MODEL,
        input: 'Weather?',
        max_output_tokens: 60,
        text: { format: { type: 'json_schema', name: 'weather', schema: weather, strict: true } },
      })
      expect(validWeather(JSON.parse(response.output_text))).toBe(true)
    })

    it('takes an input_image as a data URL', async () => {
      const url = `data:image/png;base64,${(await makePng(48, 40)).toString('base64')}`
      const response = await client.responses.create({
        model: 'tiny-vision',
        max_output_tokens: 3,
        input: [
          {
            role: 'user',
            content: [
              { type: 'input_text', text: 'What is this?' },
              { type: 'input_image', image_url: url, detail: 'auto' },
            ],
          },
        ],
      })
      expect(response.usage!.input_tokens).toBeGreaterThan(20)
    })

    it('lists the input items of a stored response, earlier turns included, newest first', async () => {
      const first = await client.responses.create({ model: MODEL, input: 'First question', max_output_tokens: 2 })
      const second = await client.responses.create({
        model: MODEL,
        previous_response_id: first.id,
        input: [{ role: 'user', content: 'Second question' }],
        max_output_tokens: 2,
      })
      const page = await client.responses.inputItems.list(second.id)
      const items = page.data as Array<{ id: string; type: string; role?: string; content?: Array<{ text?: string }> | string }>
      // Newest first: this turn's question, the first answer, the first question.
      expect(items.map((i) => i.type)).toEqual(['message', 'message', 'message'])
      expect(items.map((i) => i.role)).toEqual(['user', 'assistant', 'user'])
      for (const item of items) expect(item.id).toMatch(/^msg_/)
      const ascending = await client.responses.inputItems.list(second.id, { order: 'asc', limit: 1 })
      expect(ascending.data).toHaveLength(1)
      expect(ascending.data[0]!.id).toBe(items.at(-1)!.id)
      expect(ascending.has_more).toBe(true)
      const bad = await fetch(`${server.url}/v1/responses/${second.id}/input_items?limit=500`, { headers: { authorization: `Bearer ${server.apiKey}` } })
      expect(bad.status).toBe(400)
      expect((await bad.json()).error.param).toBe('limit')
    })

    it('keeps responses for their key: read back, then deleted', async () => {
      const made = await client.responses.create({ model: MODEL, input: 'Remember me', max_output_tokens: 3 })
      const read = await client.responses.retrieve(made.id)
      expect(read.id).toBe(made.id)
      expect(read.output).toEqual(made.output)
      const other = await postJson(server, '/api/keys', { label: 'other' })
      const otherClient = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: other.json.key })
      await expect(otherClient.responses.retrieve(made.id)).rejects.toMatchObject({ status: 404 })
      await client.responses.delete(made.id)
      await expect(client.responses.retrieve(made.id)).rejects.toMatchObject({ status: 404 })
      const unstored = await client.responses.create({ model: MODEL, input: 'Forget me', max_output_tokens: 2, store: false })
      await expect(client.responses.retrieve(unstored.id)).rejects.toMatchObject({ status: 404 })
    })

    it("the AI SDK's default provider (Responses) generates text and calls tools", async () => {
      const openai = createOpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey })
      const text = await generateText({ model: openai(MODEL), prompt: 'Hello', maxOutputTokens: 5 })
      expect(text.text.length).toBeGreaterThan(0)
      const called = await generateText({
        model: openai(MODEL),
        prompt: 'Weather in Paris?',
        tools: {
          get_weather: tool({
            description: 'The weather',
            inputSchema: z.object({ city: z.enum(['Paris', 'Oslo']), days: z.union([z.literal(1), z.literal(2), z.literal(3)]) }),
          }),
        },
        toolChoice: 'required',
        maxOutputTokens: 100,
        providerOptions: { openai: { parallelToolCalls: false } },
      })
      expect(called.toolCalls[0]!.toolName).toBe('get_weather')
    })

    it("LangChain's useResponsesApi answers and calls tools", async () => {
      const chat = () =>
        new ChatOpenAI({ model: MODEL, apiKey: server.apiKey, configuration: { baseURL: `${server.url}/v1` }, maxTokens: 100, useResponsesApi: true })
      const answer = await new ChatOpenAI({
        model: MODEL,
        apiKey: server.apiKey,
        configuration: { baseURL: `${server.url}/v1` },
        maxTokens: 5,
        useResponsesApi: true,
      }).invoke('Hello')
      expect(answer.text.length).toBeGreaterThan(0)
      const weatherTool = langchainTool(async () => 'Sunny', {
        name: 'get_weather',
        description: 'The weather',
        schema: z.object({ city: z.enum(['Paris', 'Oslo']), days: z.union([z.literal(1), z.literal(2), z.literal(3)]) }),
      })
      const message = await chat().bindTools([weatherTool], { tool_choice: 'get_weather', parallel_tool_calls: false }).invoke('Weather in Paris?')
      expect(message.tool_calls).toHaveLength(1)
      expect(validWeather(message.tool_calls![0]!.args)).toBe(true)
    })

    it.each([
      ['no input', { model: MODEL }, 'input', 'missing_required_parameter'],
      ["a client tool of OpenAI's own schema", { model: MODEL, input: 'x', tools: [{ type: 'local_shell' }] }, 'tools[0].type', 'unsupported_parameter'],
      [
        'an MCP server the user did not configure',
        { model: MODEL, input: 'x', tools: [{ type: 'mcp', server_label: 'x', server_url: 'http://127.0.0.1:9' }] },
        'tools[0].server_label',
        'mcp_server_not_found',
      ],
      [
        'a call with no output at the end',
        {
          model: MODEL,
          input: [
            { role: 'user', content: 'x' },
            { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
          ],
        },
        'input[1]',
        'invalid_value',
      ],
      ['an output with no call', { model: MODEL, input: [{ type: 'function_call_output', call_id: 'c9', output: 'x' }] }, 'input[0].call_id', 'invalid_value'],
      [
        'logprobs beside tools',
        {
          model: MODEL,
          input: 'x',
          include: ['message.output_text.logprobs'],
          tools: [{ type: 'function', name: 'f', parameters: { type: 'object', properties: {} } }],
        },
        'include',
        'unsupported_parameter',
      ],
      ['top_logprobs past 20', { model: MODEL, input: 'x', top_logprobs: 21 }, 'top_logprobs', 'invalid_value'],
      ['an unknown include', { model: MODEL, input: 'x', include: ['everything'] }, 'include[0]', 'invalid_value'],
      ['background', { model: MODEL, input: 'x', background: true }, 'background', 'unsupported_parameter'],
      [
        'an unknown previous response',
        { model: MODEL, input: 'x', previous_response_id: 'resp_000000000000000000000000' },
        'previous_response_id',
        'previous_response_not_found',
      ],
      ['a bad item', { model: MODEL, input: [{ type: 'function_call_output' }] }, 'input[0]', undefined],
      [
        'a refusal as input',
        { model: MODEL, input: [{ role: 'user', content: [{ type: 'refusal', refusal: 'no' }] }] },
        'input[0].content[0].type',
        'invalid_value',
      ],
      ['max_output_tokens of 0', { model: MODEL, input: 'x', max_output_tokens: 0 }, 'max_output_tokens', 'invalid_value'],
      ['an unknown text format', { model: MODEL, input: 'x', text: { format: { type: 'yaml' } } }, 'text.format.type', 'invalid_value'],
    ])('%s is a 400 naming the field', async (_name, body, param, code) => {
      const res = await postJson(server, '/v1/responses', body)
      expect(res.status, res.text).toBe(400)
      expect(res.json.error.param?.startsWith(param)).toBe(true)
      if (code) expect(res.json.error.code).toBe(code)
    })
  },
)
