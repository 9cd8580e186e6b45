/**
 * Anthropic's Messages API through @anthropic-ai/sdk against the running server: text, a system
 * prompt, tools (forced, streamed, replayed with their results), an image, thinking, token
 * counting, and errors in Anthropic's shape (the SDK's own error classes). Tool and thinking
 * behaviour use tiny models with Qwen 3's and QwQ's real templates (see tools.test.ts).
 */
import Anthropic from '@anthropic-ai/sdk'
import { Ajv } from 'ajv'
import { copyFileSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { familyModel } from '../support/family-models.ts'
import { PROJECT_ROOT, startTestServer, type TestServer } from '../support/server-process.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { makePng } from '../support/test-images.ts'
import { writeTinyLlama, writeTinyMmproj } from '../support/tiny-models.ts'
import { llamaBuild } from '../support/upstream-servers.ts'
import { cannotRun, describeIf } from '../support/skips.ts'

const qwen3 = sharedFixture('chat-templates/Qwen-Qwen3-0.6B.jinja')
const qwq = sharedFixture('chat-templates/Qwen-QwQ-32B.jinja')
if (!llamaBuild) cannotRun('llama.cpp is not built on this machine (npm run build:engines); the Anthropic Messages suite cannot run')

const MODEL = 'qwen3-tiny'
const weather = {
  type: 'object' as const,
  properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] }, days: { type: 'integer', enum: [1, 2, 3] } },
  required: ['city', 'days'],
  additionalProperties: false,
}
const tools: Anthropic.Tool[] = [
  { name: 'get_weather', description: 'The weather in a city', input_schema: weather },
  {
    name: 'get_time',
    description: 'The time in a city',
    input_schema: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] } }, required: ['city'] },
  },
]
const ask: Anthropic.MessageParam[] = [{ role: 'user', content: 'What is the weather in Paris?' }]
const validWeather = new Ajv().compile(weather)

describeIf(llamaBuild && qwen3 && qwq, 'needs llama.cpp built here (npm run build:engines) and the chat templates of ../shared/fixtures')(
  "Anthropic's Messages API",
  () => {
    let server: TestServer
    let client: Anthropic

    beforeAll(async () => {
      const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-messages-'))
      const cache = join(PROJECT_ROOT, 'test/artifacts/family-models')
      copyFileSync(familyModel(cache, { template: 'Qwen-Qwen3-0.6B', vocabulary: 'qwen3' }, readFileSync(qwen3!, 'utf8')), join(modelsDir, `${MODEL}.gguf`))
      copyFileSync(familyModel(cache, { template: 'Qwen-QwQ-32B', vocabulary: 'qwen3' }, readFileSync(qwq!, 'utf8')), join(modelsDir, 'qwq-tiny.gguf'))
      const llama = writeTinyLlama(join(modelsDir, 'tiny-vision.gguf'), { contextLength: 512 })
      writeTinyMmproj(join(modelsDir, 'mmproj-tiny-vision.gguf'), { textEmbd: llama.embd })
      server = await startTestServer({ modelsDir })
      client = new Anthropic({ baseURL: server.url, apiKey: server.apiKey, maxRetries: 0 })
    })

    afterAll(async () => {
      await server?.stop()
    })

    it('answers a message with a system prompt, in the Message shape with usage', async () => {
      const message = await client.messages.create({ model: MODEL, max_tokens: 6, system: 'Be brief.', messages: ask, stop_sequences: ['\n\n\n'] })
      expect(message.id).toMatch(/^msg_/)
      expect(message).toMatchObject({ type: 'message', role: 'assistant', model: MODEL, stop_sequence: null })
      expect(message.content[0]!.type).toBe('text')
      expect((message.content[0] as Anthropic.TextBlock).text.length).toBeGreaterThan(0)
      expect(['max_tokens', 'end_turn']).toContain(message.stop_reason)
      expect(message.usage.output_tokens).toBeLessThanOrEqual(6)
      expect(message.usage.input_tokens + (message.usage.cache_read_input_tokens ?? 0)).toBeGreaterThan(5)
    })

    it('a forced tool gives a tool_use block whose input satisfies the schema', async () => {
      const message = await client.messages.create({
        model: MODEL,
        max_tokens: 100,
        messages: ask,
        tools,
        tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true },
      })
      expect(message.stop_reason).toBe('tool_use')
      const uses = message.content.filter((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use')
      expect(uses).toHaveLength(1)
      expect(uses[0]!.id).toMatch(/^toolu_/)
      expect(uses[0]!.name).toBe('get_weather')
      expect(validWeather(uses[0]!.input)).toBe(true)
    })

    it("streams Anthropic's events in order, and the SDK assembles the same tool use", async () => {
      const stream = client.messages.stream({
        model: MODEL,
        max_tokens: 100,
        messages: ask,
        tools,
        tool_choice: { type: 'any', disable_parallel_tool_use: true },
      })
      const events: string[] = []
      stream.on('streamEvent', (event) => events.push(event.type))
      const message = await stream.finalMessage()
      expect(events[0]).toBe('message_start')
      expect(events.at(-1)).toBe('message_stop')
      expect(events.at(-2)).toBe('message_delta')
      expect(events.filter((e) => e === 'content_block_start').length).toBe(events.filter((e) => e === 'content_block_stop').length)
      expect(events).toContain('content_block_delta')
      expect(message.stop_reason).toBe('tool_use')
      const use = message.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use')!
      expect(['get_weather', 'get_time']).toContain(use.name)
      expect(use.input).toHaveProperty('city')
    })

    it('takes a conversation with tool_use and tool_result blocks', async () => {
      const message = await client.messages.create({
        model: MODEL,
        max_tokens: 4,
        tools,
        messages: [
          ...ask,
          { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris', days: 1 } }] },
          {
            role: 'user',
            content: [
              { type: 'tool_result', tool_use_id: 'toolu_1', content: 'Sunny, 21 °C' },
              { type: 'text', text: 'Thanks!' },
            ],
          },
        ],
      })
      expect(message.type).toBe('message')
      const plain = await client.messages.create({ model: MODEL, max_tokens: 4, tools, messages: ask })
      // The call and its result are in the prompt.
      const total = (m: Anthropic.Message) => m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0)
      expect(total(message)).toBeGreaterThan(total(plain) + 15)
    })

    it('takes one base64 image, and refuses a second or a URL with invalid_request_error', async () => {
      const data = (await makePng(48, 40)).toString('base64')
      const image: Anthropic.ImageBlockParam = { type: 'image', source: { type: 'base64', media_type: 'image/png', data } }
      const message = await client.messages.create({
        model: 'tiny-vision',
        max_tokens: 3,
        messages: [{ role: 'user', content: [image, { type: 'text', text: 'What is this?' }] }],
      })
      expect(message.usage.input_tokens + (message.usage.cache_read_input_tokens ?? 0)).toBeGreaterThan(20)
      const two = client.messages.create({ model: 'tiny-vision', max_tokens: 3, messages: [{ role: 'user', content: [image, image] }] })
      await expect(two).rejects.toBeInstanceOf(Anthropic.BadRequestError)
      await expect(two).rejects.toMatchObject({ status: 400, error: { type: 'error', error: { type: 'invalid_request_error' } } })
      const url = client.messages.create({
        model: 'tiny-vision',
        max_tokens: 3,
        messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://example.com/x.png' } }] }],
      })
      await expect(url).rejects.toMatchObject({ status: 400, error: { error: { message: expect.stringMatching(/base64/) } } })
    })

    it('returns thinking as a thinking block first, and not when thinking is disabled', async () => {
      const thinking = await client.messages.create({ model: 'qwq-tiny', max_tokens: 10, messages: ask })
      expect(thinking.content[0]).toMatchObject({ type: 'thinking', thinking: expect.stringMatching(/./) })
      const plain = await client.messages.create({ model: 'qwq-tiny', max_tokens: 10, messages: ask, thinking: { type: 'disabled' } })
      expect(plain.content.map((b) => b.type)).toEqual(['text'])
      const streamed = await client.messages.stream({ model: 'qwq-tiny', max_tokens: 10, messages: ask }).finalMessage()
      // The same thinking, each sealed in its signature (sealed twice, it reads differently).
      expect({ ...streamed.content[0], signature: '' }).toEqual({ ...thinking.content[0], signature: '' })
      expect(streamed.content[0]).toMatchObject({ signature: expect.stringMatching(/^hearth1\./) })
    })

    it("takes a history with another model's thinking, a mid-conversation system message and an adaptive-thinking request, as Claude Code sends them", async () => {
      const message = await client.messages.create({
        model: 'qwq-tiny',
        max_tokens: 8,
        thinking: { type: 'adaptive', display: 'omitted' } as never,
        messages: [
          { role: 'user', content: 'Hi' },
          {
            role: 'assistant',
            content: [
              { type: 'thinking', thinking: 'Another model thought this.', signature: 'EqQBCkgIARAB' },
              { type: 'text', text: 'Hello' },
            ],
          },
          { role: 'system' as never, content: 'Be brief.' },
          { role: 'user', content: 'And now?' },
        ],
      })
      expect(message.content[0]).toMatchObject({ type: 'thinking', thinking: '', signature: expect.stringMatching(/^hearth1\./) })
    })

    it('holds thinking to budget_tokens: the thinking block ends and a text block follows', async () => {
      // A random model never ends its thinking by itself; the engine closes it after the budget.
      const uncapped = await client.messages.create({ model: 'qwq-tiny', max_tokens: 20, messages: ask })
      expect(uncapped.content.map((b) => b.type)).toEqual(['thinking'])
      const capped = await client.messages.create({ model: 'qwq-tiny', max_tokens: 20, messages: ask, thinking: { type: 'enabled', budget_tokens: 3 } })
      expect(capped.content.map((b) => b.type)).toEqual(['thinking', 'text'])
      expect(capped.content[0]).toMatchObject({ type: 'thinking', thinking: expect.stringMatching(/./) })
    })

    it('counts tokens as the model will see them', async () => {
      const short = await client.messages.countTokens({ model: MODEL, messages: ask })
      const longer = await client.messages.countTokens({ model: MODEL, messages: ask, system: 'You are a weather assistant who answers in one word.', tools })
      expect(short.input_tokens).toBeGreaterThan(5)
      expect(longer.input_tokens).toBeGreaterThan(short.input_tokens + 40)
      const message = await client.messages.create({ model: MODEL, max_tokens: 2, messages: ask })
      expect(message.usage.input_tokens + (message.usage.cache_read_input_tokens ?? 0)).toBe(short.input_tokens)
    })

    describe("errors in Anthropic's shape", () => {
      const raw = (body: unknown, headers: Record<string, string> = {}) =>
        fetch(`${server.url}/v1/messages`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': server.apiKey, 'anthropic-version': '2023-06-01', ...headers },
          body: JSON.stringify(body),
        })

      it.each([
        ['no max_tokens', { model: MODEL, messages: ask }, /max_tokens/],
        ['no messages', { model: MODEL, max_tokens: 5 }, /messages/],
        ['a bad role', { model: MODEL, max_tokens: 5, messages: [{ role: 'tool', content: 'x' }] }, /role/],
        ['temperature over 1', { model: MODEL, max_tokens: 5, messages: ask, temperature: 1.5 }, /temperature/],
        ['an unknown tool_choice', { model: MODEL, max_tokens: 5, messages: ask, tools, tool_choice: { type: 'sometimes' } }, /tool_choice/],
        [
          'a tool_use block from the user',
          { model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'tool_use', id: 't', name: 'f', input: {} }] }] },
          /tool_use/,
        ],
        [
          'an MCP server the user has not configured',
          { model: MODEL, max_tokens: 5, messages: ask, mcp_servers: [{ type: 'url', url: 'https://mcp.example.com/sse', name: 'nowhere' }] },
          /No MCP server named 'nowhere'/,
        ],
        [
          'an MCP server with credentials in the request',
          {
            model: MODEL,
            max_tokens: 5,
            messages: ask,
            mcp_servers: [{ type: 'url', url: 'https://mcp.example.com/sse', name: 'x', authorization_token: 't' }],
          },
          /authorization_token/,
        ],
      ])('%s is a 400 invalid_request_error', async (_name, body, message) => {
        const res = await raw(body)
        expect(res.status).toBe(400)
        const error = await res.json()
        expect(error).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringMatching(message) } })
      })

      it('a wrong x-api-key is a 401 authentication_error; an unknown model a 404 not_found_error', async () => {
        const denied = await raw({ model: MODEL, max_tokens: 5, messages: ask }, { 'x-api-key': 'wrong-key-123456' })
        expect(denied.status).toBe(401)
        expect(await denied.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error' } })
        await expect(
          new Anthropic({ baseURL: server.url, apiKey: 'wrong-key-123456', maxRetries: 0 }).messages.create({ model: MODEL, max_tokens: 2, messages: ask }),
        ).rejects.toBeInstanceOf(Anthropic.AuthenticationError)
        await expect(client.messages.create({ model: 'no-such-model', max_tokens: 2, messages: ask })).rejects.toBeInstanceOf(Anthropic.NotFoundError)
      })
    })
  },
)
