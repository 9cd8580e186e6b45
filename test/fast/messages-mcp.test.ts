/**
 * Anthropic's MCP connector (`mcp_servers`) on servers the user configured
 * (test/support/mcp-test-server.ts, on stdio and on HTTP), through @anthropic-ai/sdk against the
 * whole app in-process with a scripted model: the servers' tools offered, calls run between the
 * model's turns as `mcp_tool_use` and `mcp_tool_result` blocks (whole and streamed), the conversation
 * sent back to go on, a failing tool, the limit on rounds, and each refusal, by name. The same
 * answer pipeline's loop as the Responses API's `mcp` tool (responses-mcp.test.ts).
 */
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ChatJob, ChatResult, EngineJob, ToolCall } from '../../engines/engine-jobs.ts'
import { startInProcessServer, type InProcessServer, type Script } from '../support/in-process-server.ts'
import { startHttpMcpTestServer, writeMcpConfig, type HttpMcpTestServer } from '../support/mcp-config.ts'
import { writeTinyLlama } from '../support/tiny-models.ts'

const MODEL = 'tiny-chat'

let server: InProcessServer
let http: HttpMcpTestServer
let client: Anthropic
let script: Script

beforeAll(async () => {
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-messages-mcp-'))
  writeTinyLlama(join(modelsDir, 'tiny.gguf'), { contextLength: 4096 })
  writeFileSync(join(modelsDir, 'models.json'), JSON.stringify({ models: [{ id: MODEL, file: 'tiny.gguf' }] }))
  http = await startHttpMcpTestServer()
  const dataDir = mkdtempSync(join(tmpdir(), 'hearth-messages-mcp-data-'))
  writeMcpConfig(dataDir, { calc: { timeout: 5 }, web: { url: http.url }, off: { disabled: true } })
  server = await startInProcessServer({ modelsDir, dataDir, script: (job, context) => script(job, context) })
  client = new Anthropic({ baseURL: server.url, apiKey: server.apiKey, maxRetries: 0 })
})

afterAll(async () => {
  await server?.stop()
  await http?.stop()
})

function result(overrides: Partial<ChatResult>): ChatResult {
  return {
    type: 'chat',
    text: '',
    reasoning: '',
    toolCalls: [],
    logprobs: undefined,
    finishReason: 'stop',
    promptTokens: 10,
    completionTokens: 3,
    reasoningTokens: 0,
    timings: { promptMs: 1, promptPerSecond: 1, predictedMs: 1, predictedPerSecond: 1 },
    ...overrides,
  }
}

let callNumber = 0

/** A model that calls `name` with `args` while the conversation ends on the user (or, with `again`, always), and otherwise says what the last tool answered. */
function callsTool(name: string, args: Record<string, unknown>, again = false): Script {
  return (job, { emit }) => {
    const chat = job as ChatJob
    const last = chat.messages.at(-1)!
    if ((last.role === 'user' || again) && chat.tools.some((t) => t.function.name === name)) {
      const call: ToolCall = { id: `call_${++callNumber}`, type: 'function', function: { name, arguments: JSON.stringify(args) } }
      emit({ type: 'tool_call', index: 0, id: call.id, name, arguments: call.function.arguments })
      return result({ toolCalls: [call], finishReason: 'tool_calls' })
    }
    const text = last.role === 'tool' ? `The tool said: ${last.content}` : 'I used no tool.'
    emit({ type: 'text', text })
    return result({ text })
  }
}

const lastJob = () => server.engines.flatMap((e) => e.jobs as EngineJob[]).at(-1) as ChatJob
const calc = { type: 'url' as const, url: 'stdio://calc', name: 'calc' }
const ask = (text: string) => [{ role: 'user' as const, content: text }]
/** The MCP connector's blocks are a beta's: the SDK's beta client sends its header. */
const create = (body: Record<string, unknown>) =>
  client.beta.messages.create({
    model: MODEL,
    max_tokens: 200,
    betas: ['mcp-client-2025-04-04'],
    ...body,
  } as never) as unknown as Promise<Anthropic.Beta.BetaMessage>

describe("Anthropic's MCP connector", () => {
  it('offers the servers’ tools, runs the call and lets the model go on with its result', async () => {
    script = callsTool('add', { a: 2, b: 3 })
    const message = await create({ messages: ask('What is 2 + 3?'), mcp_servers: [calc] })
    expect(message.content.map((b) => b.type)).toEqual(['mcp_tool_use', 'mcp_tool_result', 'text'])
    const [use, answer] = message.content as [Anthropic.Beta.BetaMCPToolUseBlock, Anthropic.Beta.BetaMCPToolResultBlock]
    expect(use).toEqual({ type: 'mcp_tool_use', id: expect.stringMatching(/^mcptoolu_/), name: 'add', server_name: 'calc', input: { a: 2, b: 3 } })
    expect(answer).toEqual({ type: 'mcp_tool_result', tool_use_id: use.id, is_error: false, content: [{ type: 'text', text: '5' }] })
    expect((message.content[2] as Anthropic.Beta.BetaTextBlock).text).toBe('The tool said: 5')
    expect(message.stop_reason).toBe('end_turn')
    // Two turns of the model, both counted.
    expect(message.usage.input_tokens).toBe(20)
    expect(server.output()).toMatch(/POST \/v1\/messages 200 .*tool=calc\/add/)
  })

  it('goes on from the blocks sent back: the model sees its call and the result again', async () => {
    script = callsTool('echo', { text: 'hello' })
    const first = await create({ messages: ask('Echo hello'), mcp_servers: [calc] })
    script = callsTool('none', {})
    await create({ messages: [...ask('Echo hello'), { role: 'assistant', content: first.content }, ...ask('Thanks')], mcp_servers: [calc] })
    const messages = lastJob().messages
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant', 'user'])
    expect(messages[1]).toMatchObject({ tool_calls: [{ function: { name: 'echo', arguments: '{"text":"hello"}' } }] })
    expect(messages[2]).toMatchObject({ role: 'tool', content: 'hello' })
  })

  it('streams the blocks in Anthropic’s order, as the SDK assembles them', async () => {
    script = callsTool('add', { a: 1, b: 1 })
    const stream = client.beta.messages.stream({
      model: MODEL,
      max_tokens: 200,
      betas: ['mcp-client-2025-04-04'],
      messages: ask('1 + 1?'),
      mcp_servers: [calc],
    } as never)
    const final = await stream.finalMessage()
    expect(final.content.map((b) => b.type)).toEqual(['mcp_tool_use', 'mcp_tool_result', 'text'])
    expect((final.content[1] as Anthropic.Beta.BetaMCPToolResultBlock).content).toEqual([{ type: 'text', text: '2' }])
    expect(final.stop_reason).toBe('end_turn')
  })

  it('runs a server reached over HTTP, and tells the model a failing tool failed', async () => {
    script = callsTool('echo', { text: 'over http' })
    const viaHttp = await create({ messages: ask('Echo'), mcp_servers: [{ type: 'url', url: http.url, name: 'web' }] })
    expect((viaHttp.content[1] as Anthropic.Beta.BetaMCPToolResultBlock).content).toEqual([{ type: 'text', text: 'over http' }])
    script = callsTool('fail', {})
    const failed = await create({ messages: ask('Fail'), mcp_servers: [calc] })
    expect(failed.content[1]).toMatchObject({ type: 'mcp_tool_result', is_error: true })
    expect((failed.content[2] as Anthropic.Beta.BetaTextBlock).text).toMatch(/^The tool said: Error: /)
  })

  it('offers only the tools its tool_configuration allows, and none of a server turned off there', async () => {
    script = callsTool('add', { a: 1, b: 1 })
    await create({ messages: ask('Hi'), mcp_servers: [{ ...calc, tool_configuration: { allowed_tools: ['echo'] } }] })
    expect(lastJob().tools.map((t) => t.function.name)).toEqual(['echo'])
    const off = await create({ messages: ask('Hi'), mcp_servers: [{ ...calc, tool_configuration: { enabled: false } }] })
    expect(lastJob().tools).toEqual([])
    expect(off.content.map((b) => b.type)).toEqual(['text'])
  })

  it('pauses the turn once it reaches the rounds one answer may take', async () => {
    script = callsTool('add', { a: 1, b: 1 }, true)
    const message = await create({ messages: ask('Add forever'), mcp_servers: [calc] })
    expect(message.stop_reason).toBe('pause_turn')
    expect(message.content.filter((b) => b.type === 'mcp_tool_use').length).toBeGreaterThan(1)
  })

  it.each([
    ['a server the user has not configured', { type: 'url', url: 'https://mcp.example.com/sse', name: 'nowhere' }, 400, "No MCP server named 'nowhere'"],
    ['a server the user turned off', { type: 'url', url: 'https://mcp.example.com/sse', name: 'off' }, 409, "'off'"],
    ['another URL than the one configured', { type: 'url', url: 'https://elsewhere.example.com/mcp', name: 'web' }, 400, "'url' must be the URL configured"],
    ['credentials in the request', { type: 'url', url: 'https://x', name: 'calc', authorization_token: 'secret' }, 400, 'authorization_token'],
  ])('refuses %s, by name, and reaches nothing', async (_what, mcpServer, status, said) => {
    const refused = await create({ messages: ask('Hi'), mcp_servers: [mcpServer] }).catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(Anthropic.APIError)
    expect((refused as InstanceType<typeof Anthropic.APIError>).status).toBe(status)
    expect((refused as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({ type: 'error', error: { message: expect.stringContaining(said) } })
  })

  it('counts the servers’ tools in count_tokens', async () => {
    const without = await client.messages.countTokens({ model: MODEL, messages: ask('Hi') })
    const withTools = await client.beta.messages.countTokens({
      model: MODEL,
      messages: ask('Hi'),
      mcp_servers: [calc],
      betas: ['mcp-client-2025-04-04'],
    } as never)
    expect(lastJob().tools.map((t) => t.function.name)).toContain('add')
    expect(withTools.input_tokens).toBeGreaterThanOrEqual(without.input_tokens)
  })
})
