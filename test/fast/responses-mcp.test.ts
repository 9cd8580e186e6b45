/**
 * The Responses API's `mcp` tool on servers the user configured (test/support/mcp-test-server.ts,
 * on stdio and on HTTP), through openai-node against the whole app in-process with a scripted
 * model: tool lists, approvals asked for and answered (through previous_response_id), calls run
 * between model turns, their failures, the stream's events, the limit on calls, each refusal, and
 * a conversation's earlier turns given to the model the same from request to request (through
 * previous_response_id, and as the web page sends it back).
 */
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ChatJob, ChatResult, EngineJob, ToolCall } from '../../engines/engine-jobs.ts'
import type { ResponseEvent } from '../../main/server/wire-types.ts'
import type { AnswerItem } from '../../renderer/src/lib/services/answer-items.ts'
import { readResponse } from '../../renderer/src/lib/services/answer-stream.ts'
import { buildResponsesRequest, DEFAULT_PARAMETERS, type ChatTurn } from '../../renderer/src/lib/services/chat-messages.ts'
import { readSseJson } from '../../renderer/src/lib/services/sse.ts'
import { startInProcessServer, type InProcessServer, type Script } from '../support/in-process-server.ts'
import { startHttpMcpTestServer, writeMcpConfig, type HttpMcpTestServer } from '../support/mcp-config.ts'
import { postJson } from '../support/server-process.ts'
import { writeTinyLlama } from '../support/tiny-models.ts'

const MODEL = 'tiny-chat'

let server: InProcessServer
let http: HttpMcpTestServer
let client: OpenAI
/** What the scripted model does next. */
let script: Script

beforeAll(async () => {
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-responses-mcp-'))
  writeTinyLlama(join(modelsDir, 'tiny.gguf'), { contextLength: 4096 })
  writeFileSync(join(modelsDir, 'models.json'), JSON.stringify({ models: [{ id: MODEL, file: 'tiny.gguf' }] }))
  http = await startHttpMcpTestServer()
  const dataDir = mkdtempSync(join(tmpdir(), 'hearth-responses-mcp-data-'))
  writeMcpConfig(dataDir, { calc: { timeout: 5 }, web: { url: http.url }, off: { disabled: true } })
  server = await startInProcessServer({ modelsDir, dataDir, script: (job, context) => script(job, context) })
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey, maxRetries: 0 })
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

/**
 * A model that calls `name` with `args` while the conversation ends on the user (or, with `again`,
 * on every turn), and otherwise says what the last tool answered.
 */
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

function lastJob(): ChatJob {
  return server.engines.flatMap((e) => e.jobs as EngineJob[]).at(-1) as ChatJob
}

const calc = (extra: Record<string, unknown> = {}) => ({ type: 'mcp' as const, server_label: 'calc', ...extra })

describe('the mcp tool', () => {
  it('lists the tools, asks for approval, and runs the call once approved', async () => {
    script = callsTool('add', { a: 2, b: 3 })
    const first = await client.responses.create({ model: MODEL, input: 'What is 2 + 3?', tools: [calc()] })
    expect(first.status).toBe('completed')
    expect(first.output.map((i) => i.type)).toEqual(['mcp_list_tools', 'mcp_approval_request'])
    const list = first.output[0] as OpenAI.Responses.ResponseOutputItem.McpListTools
    expect(list.id).toMatch(/^mcpl_/)
    expect(list.server_label).toBe('calc')
    expect(list.tools.map((t) => t.name)).toEqual(['add', 'secret_word', 'echo', 'fail', 'crash', 'hang'])
    expect(list.tools[0]).toMatchObject({
      name: 'add',
      description: 'Adds two numbers.',
      input_schema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } },
    })
    expect(list.tools[1]!.annotations).toEqual({ read_only: true })
    expect(first.output[1]).toEqual({
      type: 'mcp_approval_request',
      id: expect.stringMatching(/^mcpr_/),
      server_label: 'calc',
      name: 'add',
      arguments: '{"a":2,"b":3}',
    })
    expect(lastJob().tools.map((t) => t.function.name)).toContain('add')

    const approval = first.output[1] as OpenAI.Responses.ResponseOutputItem.McpApprovalRequest
    const second = await client.responses.create({
      model: MODEL,
      previous_response_id: first.id,
      input: [{ type: 'mcp_approval_response', approval_request_id: approval.id, approve: true }],
      tools: [calc()],
    })
    expect(second.status).toBe('completed')
    expect(second.output.map((i) => i.type)).toEqual(['mcp_call', 'message'])
    expect(second.output[0]).toEqual({
      type: 'mcp_call',
      id: expect.stringMatching(/^mcp_/),
      server_label: 'calc',
      name: 'add',
      arguments: '{"a":2,"b":3}',
      output: '5',
      error: null,
      approval_request_id: approval.id,
      status: 'completed',
    })
    expect(second.output_text).toBe('The tool said: 5')
    const messages = lastJob().messages
    expect(messages.at(-2)).toMatchObject({ role: 'assistant', tool_calls: [{ id: approval.id, function: { name: 'add', arguments: '{"a":2,"b":3}' } }] })
    expect(messages.at(-1)).toEqual({ role: 'tool', tool_call_id: approval.id, content: '5' })
    expect(server.output()).toMatch(/POST \/v1\/responses 200 .*tool=calc\/add/)

    // The same approval again: that call has run.
    const again = await postJson(server, '/v1/responses', {
      model: MODEL,
      previous_response_id: second.id,
      input: [{ type: 'mcp_approval_response', approval_request_id: approval.id, approve: true }],
      tools: [calc()],
    })
    expect(again.status).toBe(400)
    expect(again.json.error).toMatchObject({ param: 'input[0].approval_request_id' })
  })

  it('continues from items sent back with store: false', async () => {
    script = callsTool('echo', { text: 'hello' })
    const first = await client.responses.create({ model: MODEL, input: 'Echo hello', tools: [calc()], store: false })
    const approval = first.output[1] as OpenAI.Responses.ResponseOutputItem.McpApprovalRequest
    const input: OpenAI.Responses.ResponseInput = [
      { role: 'user', content: 'Echo hello' },
      ...(first.output as OpenAI.Responses.ResponseInputItem[]),
      { type: 'mcp_approval_response', approval_request_id: approval.id, approve: true },
    ]
    const second = await client.responses.create({ model: MODEL, input, tools: [calc()], store: false })
    expect(second.output.map((i) => i.type)).toEqual(['mcp_call', 'message'])
    expect(second.output_text).toBe('The tool said: hello')
  })

  it('lets the model answer after a forced call', async () => {
    script = (job, context) => ((job as ChatJob).toolChoice === 'required' ? callsTool('add', { a: 1, b: 1 }, true) : callsTool('none', {}))(job, context)
    const response = await client.responses.create({ model: MODEL, input: 'Add', tools: [calc({ require_approval: 'never' })], tool_choice: 'required' })
    expect(response.status).toBe('completed')
    expect(response.output.map((i) => i.type)).toEqual(['mcp_list_tools', 'mcp_call', 'message'])
    expect(response.output_text).toBe('The tool said: 2')
  })

  it('runs calls straight through with require_approval "never"', async () => {
    script = callsTool('add', { a: 2, b: 3 })
    const response = await client.responses.create({ model: MODEL, input: 'What is 2 + 3?', tools: [calc({ require_approval: 'never' })] })
    expect(response.status).toBe('completed')
    expect(response.output.map((i) => i.type)).toEqual(['mcp_list_tools', 'mcp_call', 'message'])
    expect(response.output[1]).toMatchObject({ name: 'add', output: '5', error: null, approval_request_id: null, status: 'completed' })
    expect(response.output_text).toBe('The tool said: 5')
    expect(response.usage!.input_tokens).toBe(20)
  })

  it('asks approval only for the tools the approval filter names', async () => {
    script = callsTool('secret_word', {})
    const never = { require_approval: { always: { tool_names: ['add'] }, never: { read_only: true } } }
    const response = await client.responses.create({ model: MODEL, input: 'The word?', tools: [calc(never)] })
    expect(response.output.map((i) => i.type)).toEqual(['mcp_list_tools', 'mcp_call', 'message'])
    expect(response.output_text).toBe('The tool said: The secret word is PERSIMMON.')
  })

  it('offers the model only the allowed tools', async () => {
    script = callsTool('add', { a: 1, b: 1 })
    const byName = await client.responses.create({ model: MODEL, input: 'Hi', tools: [calc({ allowed_tools: ['echo'] })] })
    expect((byName.output[0] as OpenAI.Responses.ResponseOutputItem.McpListTools).tools.map((t) => t.name)).toEqual(['echo'])
    expect(lastJob().tools.map((t) => t.function.name)).toEqual(['echo'])
    expect(byName.output_text).toBe('I used no tool.')

    await client.responses.create({ model: MODEL, input: 'Hi', tools: [calc({ allowed_tools: { read_only: true } })] })
    expect(lastJob().tools.map((t) => t.function.name)).toEqual(['secret_word'])
  })

  it('tells the model a denied call did not run, and runs nothing', async () => {
    script = callsTool('add', { a: 2, b: 3 })
    const first = await client.responses.create({ model: MODEL, input: 'What is 2 + 3?', tools: [calc()] })
    const approval = first.output[1] as OpenAI.Responses.ResponseOutputItem.McpApprovalRequest
    const before = server.output().split('\n').length
    const second = await client.responses.create({
      model: MODEL,
      previous_response_id: first.id,
      input: [{ type: 'mcp_approval_response', approval_request_id: approval.id, approve: false, reason: 'not now' }],
      tools: [calc()],
    })
    expect(second.output.map((i) => i.type)).toEqual(['message'])
    expect(second.output_text).toMatch(/^The tool said: The user did not approve this call, so it did not run: not now/)
    expect(lastJob().messages.at(-1)).toMatchObject({ role: 'tool', tool_call_id: approval.id })
    expect(server.output().split('\n').slice(before).join('\n')).not.toContain('tool=')
  })

  it('streams the items and their events in order', async () => {
    script = callsTool('add', { a: 2, b: 3 })
    const stream = await client.responses.create({ model: MODEL, input: 'What is 2 + 3?', tools: [calc({ require_approval: 'never' })], stream: true })
    const events: OpenAI.Responses.ResponseStreamEvent[] = []
    for await (const event of stream) events.push(event)
    expect(events.map((e) => e.type)).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.mcp_list_tools.in_progress',
      'response.mcp_list_tools.completed',
      'response.output_item.done',
      'response.output_item.added',
      'response.mcp_call.in_progress',
      'response.mcp_call_arguments.delta',
      'response.mcp_call_arguments.done',
      'response.mcp_call.completed',
      'response.output_item.done',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ])
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i))
    const callDone = events[11] as OpenAI.Responses.ResponseOutputItemDoneEvent
    expect(callDone.output_index).toBe(1)
    expect(callDone.item).toMatchObject({ type: 'mcp_call', output: '5', status: 'completed' })
    const done = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent
    expect(done.response.output.map((i) => i.type)).toEqual(['mcp_list_tools', 'mcp_call', 'message'])

    const asking = await client.responses.create({ model: MODEL, input: 'What is 2 + 3?', tools: [calc()], stream: true })
    const types: string[] = []
    for await (const event of asking) types.push(event.type)
    expect(types.slice(-3)).toEqual(['response.output_item.added', 'response.output_item.done', 'response.completed'])
  })

  it('gives the model the error of a tool that fails or crashes, and still answers', async () => {
    script = callsTool('fail', {})
    const failed = await client.responses.create({ model: MODEL, input: 'Go', tools: [calc({ require_approval: 'never' })] })
    expect(failed.status).toBe('completed')
    expect(failed.output[1]).toMatchObject({ type: 'mcp_call', name: 'fail', output: null, error: 'the tool failed on purpose', status: 'failed' })
    expect(failed.output_text).toBe('The tool said: Error: the tool failed on purpose')

    script = callsTool('crash', {})
    const crashed = await client.responses.create({ model: MODEL, input: 'Go', tools: [calc({ require_approval: 'never' })] })
    expect(crashed.status).toBe('completed')
    expect(crashed.output[1]).toMatchObject({ type: 'mcp_call', name: 'crash', output: null, status: 'failed' })
    expect((crashed.output[1] as OpenAI.Responses.ResponseOutputItem.McpCall).error).toMatch(/stopped during the call/)
    expect(crashed.output_text).toMatch(/^The tool said: Error: /)
    expect(server.output()).toMatch(/tool=calc\/crash/)

    // The next need starts the server again.
    script = callsTool('add', { a: 2, b: 3 })
    const after = await client.responses.create({ model: MODEL, input: 'Go', tools: [calc({ require_approval: 'never' })] })
    expect(after.output_text).toBe('The tool said: 5')
  })

  it('stops at max_tool_calls, incomplete, with the call it did not run', async () => {
    script = callsTool('add', { a: 1, b: 2 }, true)
    // OpenAI's field, not in openai-node's types.
    const limited = { model: MODEL, input: 'Add forever', tools: [calc({ require_approval: 'never' })], max_tool_calls: 2 }
    const response = await client.responses.create(limited as OpenAI.Responses.ResponseCreateParamsNonStreaming)
    expect(response.status).toBe('incomplete')
    expect(response.incomplete_details).toEqual({ reason: 'max_tool_calls' })
    expect(response.output.map((i) => (i.type === 'mcp_call' ? i.status : i.type))).toEqual(['mcp_list_tools', 'completed', 'completed', 'incomplete'])
    expect(server.output()).toMatch(/tool=calc\/add,calc\/add /)

    const rounds = await client.responses.create({ model: MODEL, input: 'Add forever', tools: [calc({ require_approval: 'never' })], store: false })
    expect(rounds.status).toBe('incomplete')
    expect(rounds.output.filter((i) => i.type === 'mcp_call' && i.status === 'completed')).toHaveLength(8)
  })

  it('bounds the whole response by max_output_tokens, across its tool rounds, as OpenAI does', async () => {
    // Each turn writes 40 tokens, or what it is allowed if less.
    const allowed: Array<number | undefined> = []
    script = (job, context) => {
      const chat = job as ChatJob
      allowed.push(chat.maxTokens)
      const answer = callsTool('add', { a: 1, b: 2 }, true)(job, context) as ChatResult
      const written = Math.min(40, chat.maxTokens ?? 40)
      return { ...answer, completionTokens: written, ...(written < 40 ? { finishReason: 'length' as const, toolCalls: [] } : {}) }
    }
    const tools = [calc({ require_approval: 'never' })]
    const response = await client.responses.create({ model: MODEL, input: 'Add forever', tools, max_output_tokens: 96, store: false })
    expect(allowed).toEqual([96, 56, 16])
    expect(response.usage!.output_tokens).toBe(96)
    expect(response.status).toBe('incomplete')
    expect(response.incomplete_details).toEqual({ reason: 'max_output_tokens' })

    // A budget spent exactly by a turn that called a tool: no further turn, incomplete.
    allowed.length = 0
    const spent = await client.responses.create({ model: MODEL, input: 'Add forever', tools, max_output_tokens: 80, store: false })
    expect(allowed).toEqual([80, 40])
    expect(spent.usage!.output_tokens).toBe(80)
    expect(spent.incomplete_details).toEqual({ reason: 'max_output_tokens' })
    expect(spent.output.filter((i) => i.type === 'mcp_call')).toHaveLength(2)
  })

  it('keeps the calls a turn cut at its token limit finished writing: runs or asks about them, drops the cut one, and ends there', async () => {
    // Two calls in one turn, the second cut off by the limit (a small model writing parallel calls).
    script = (job) => {
      const chat = job as ChatJob
      if (chat.messages.at(-1)!.role !== 'user') return result({ text: 'never reached' })
      const whole: ToolCall = { id: `call_${++callNumber}`, type: 'function', function: { name: 'add', arguments: '{"a":2,"b":3}' } }
      const cut: ToolCall = { id: `call_${++callNumber}`, type: 'function', function: { name: 'add', arguments: '{"a":' } }
      return result({ toolCalls: [whole, cut], finishReason: 'length', completionTokens: 40 })
    }
    const ran = await client.responses.create({ model: MODEL, input: 'Add', tools: [calc({ require_approval: 'never' })], max_output_tokens: 40, store: false })
    expect(ran.output.map((i) => (i.type === 'mcp_call' ? `${i.status}:${i.output}` : i.type))).toEqual(['mcp_list_tools', 'completed:5'])
    expect(ran.incomplete_details).toEqual({ reason: 'max_output_tokens' })
    const asked = await client.responses.create({ model: MODEL, input: 'Add', tools: [calc()], max_output_tokens: 40, store: false })
    expect(asked.output.map((i) => i.type)).toEqual(['mcp_list_tools', 'mcp_approval_request'])
    expect((asked.output[1] as OpenAI.Responses.ResponseOutputItem.McpApprovalRequest).arguments).toBe('{"a":2,"b":3}')
  })

  it('runs MCP calls and hands function calls back in the same turn, names clashing tools label__tool', async () => {
    script = (job, { emit }) => {
      const chat = job as ChatJob
      if (chat.messages.at(-1)!.role !== 'user') return result({ text: 'done' })
      const calls: ToolCall[] = [
        { id: 'call_f', type: 'function', function: { name: 'add', arguments: '{"x":1}' } },
        { id: 'call_m', type: 'function', function: { name: 'calc__add', arguments: '{"a":4,"b":4}' } },
      ]
      calls.forEach((c, index) => emit({ type: 'tool_call', index, id: c.id, name: c.function.name, arguments: c.function.arguments }))
      return result({ toolCalls: calls, finishReason: 'tool_calls' })
    }
    const tools: OpenAI.Responses.Tool[] = [
      { type: 'function', name: 'add', parameters: { type: 'object', properties: { x: { type: 'number' } } }, strict: false },
      calc({ require_approval: 'never', allowed_tools: ['add'] }),
    ]
    const response = await client.responses.create({ model: MODEL, input: 'Both', tools })
    expect(lastJob().tools.map((t) => t.function.name)).toEqual(['add', 'calc__add'])
    expect(response.output.map((i) => i.type)).toEqual(['mcp_list_tools', 'function_call', 'mcp_call'])
    expect(response.output[1]).toMatchObject({ name: 'add', call_id: 'call_f' })
    expect(response.output[2]).toMatchObject({ name: 'add', output: '8' })
  })

  it('reaches an HTTP server at the URL the user configured', async () => {
    script = callsTool('echo', { text: 'over http' })
    const response = await client.responses.create({
      model: MODEL,
      input: 'Echo',
      tools: [{ type: 'mcp', server_label: 'web', server_url: http.url, require_approval: 'never' }],
    })
    expect(response.output_text).toBe('The tool said: over http')
  })
})

describe("a conversation's earlier turns", () => {
  const THOUGHT = 'Let me see.'
  /**
   * A thinking model that calls `add` when asked to add and `secret_word` when asked for it, says
   * what the tool answered after it, and is glad otherwise.
   */
  const converses: Script = (job, { emit }) => {
    const chat = job as ChatJob
    const last = chat.messages.at(-1)!
    emit({ type: 'reasoning', text: THOUGHT })
    const asked = last.role === 'user' ? String(last.content) : ''
    const [a, b] = (asked.match(/\d+/g) ?? []).map(Number)
    const wanted = asked.startsWith('Add') ? { name: 'add', args: { a, b } } : asked.startsWith('Secret') ? { name: 'secret_word', args: {} } : undefined
    if (wanted) {
      const call: ToolCall = { id: `call_${++callNumber}`, type: 'function', function: { name: wanted.name, arguments: JSON.stringify(wanted.args) } }
      emit({ type: 'tool_call', index: 0, id: call.id, name: wanted.name, arguments: call.function.arguments })
      return result({ reasoning: THOUGHT, toolCalls: [call], finishReason: 'tool_calls' })
    }
    const text = last.role === 'tool' ? `The tool said: ${last.content}` : 'Glad to help.'
    emit({ type: 'text', text })
    return result({ reasoning: THOUGHT, text })
  }

  /** The chat jobs the engine was given while `run` ran, in order. */
  async function jobsOf(run: () => Promise<void>): Promise<ChatJob[]> {
    const before = server.engines.flatMap((e) => e.jobs).length
    await run()
    return server.engines.flatMap((e) => e.jobs).slice(before) as ChatJob[]
  }

  /** Each job's messages begin with the previous job's, byte for byte: the engine's cached prompt still fits. */
  function expectEachToExtendTheLast(jobs: ChatJob[]): void {
    jobs.slice(1).forEach((job, i) => {
      const earlier = JSON.stringify(jobs[i]!.messages)
      expect(JSON.stringify(job.messages.slice(0, jobs[i]!.messages.length)), `job ${i + 1}`).toBe(earlier)
    })
  }

  const DENIED = 'The user did not approve this call, so it did not run.'
  const SECRET = 'The secret word is PERSIMMON.'

  it('are the same bytes in every later request, a denied call included, as the web page sends them back', async () => {
    script = converses
    let ids = 0
    const hooks = { newId: () => `t${ids++}`, model: MODEL, showEveryMs: 0 }
    const turns: ChatTurn[] = []
    /** One request of the answer being written, as the chat page makes it; the calls waiting for approval come back. */
    const request = async (items: AnswerItem[]) => {
      const body = buildResponsesRequest(MODEL, turns, DEFAULT_PARAMETERS, false, { toolServers: [{ name: 'calc', alwaysAllowed: ['secret_word'] }] })
      const res = await fetch(`${server.url}/v1/responses`, {
        method: 'POST',
        headers: { authorization: `Bearer ${server.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
      expect(res.status, await res.clone().text()).toBe(200)
      const outcome = await readResponse(turns, items, readSseJson<ResponseEvent>(res.body!), new AbortController().signal, hooks)
      expect(outcome.ended).toBe(false)
      return outcome.approvals
    }
    /** A question, and the person's answer to the one call it asks to approve. */
    const ask = async (text: string, approve?: boolean) => {
      turns.push({ id: hooks.newId(), role: 'user', text }, { id: hooks.newId(), role: 'assistant', text: '', model: MODEL, items: [] })
      const items = turns.at(-1)!.items!
      const approvals = await request(items)
      if (approve === undefined) return expect(approvals).toEqual([])
      expect(approvals).toHaveLength(1)
      items.push({ type: 'mcp_approval_response', approval_request_id: approvals[0]!.id, approve })
      expect(await request(items)).toEqual([])
    }
    const jobs = await jobsOf(async () => {
      await ask('Add 2 and 3', false)
      await ask('Add 4 and 4', true)
      // Always allowed: the server's loop runs it and asks the model again, in one request.
      await ask('Secret word?')
      await ask('Thanks')
    })
    expect(jobs).toHaveLength(7)
    expectEachToExtendTheLast(jobs)
    const last = jobs.at(-1)!.messages
    expect(last.filter((m) => m.role === 'tool').map((m) => m.content)).toEqual([DENIED, '8', SECRET])
    expect(last.filter((m) => m.role === 'assistant').map((m) => m.reasoning_content)).toEqual(Array(6).fill(THOUGHT))
    expect(turns.filter((t) => t.role !== 'tool' && t.text).map((t) => t.text)).toEqual([
      'Add 2 and 3',
      `The tool said: ${DENIED}`,
      'Add 4 and 4',
      'The tool said: 8',
      'Secret word?',
      `The tool said: ${SECRET}`,
      'Thanks',
      'Glad to help.',
    ])
  })

  it('are the same bytes in every later request through previous_response_id', async () => {
    script = converses
    const tools = [calc({ require_approval: { never: { tool_names: ['secret_word'] } } })]
    const approval = (response: OpenAI.Responses.Response) => response.output.find((i) => i.type === 'mcp_approval_request')!.id
    const jobs = await jobsOf(async () => {
      const first = await client.responses.create({ model: MODEL, input: 'Add 2 and 3', tools })
      const denied = await client.responses.create({
        model: MODEL,
        previous_response_id: first.id,
        input: [{ type: 'mcp_approval_response', approval_request_id: approval(first), approve: false }],
        tools,
      })
      const third = await client.responses.create({ model: MODEL, previous_response_id: denied.id, input: 'Add 4 and 4', tools })
      const approved = await client.responses.create({
        model: MODEL,
        previous_response_id: third.id,
        input: [{ type: 'mcp_approval_response', approval_request_id: approval(third), approve: true }],
        tools,
      })
      const secret = await client.responses.create({ model: MODEL, previous_response_id: approved.id, input: 'Secret word?', tools })
      await client.responses.create({ model: MODEL, previous_response_id: secret.id, input: 'Thanks', tools })
    })
    expect(jobs).toHaveLength(7)
    expectEachToExtendTheLast(jobs)
    expect(
      jobs
        .at(-1)!
        .messages.filter((m) => m.role === 'tool')
        .map((m) => m.content),
    ).toEqual([DENIED, '8', SECRET])
  })
})

describe('refusals', () => {
  const post = (tools: unknown[], apiKey = server.apiKey) => postJson({ url: server.url, apiKey }, '/v1/responses', { model: MODEL, input: 'Hi', tools })

  it.each([
    ['an unknown server_label', [{ type: 'mcp', server_label: 'nope' }], 400, 'mcp_server_not_found', 'tools[0].server_label'],
    [
      'a server_url for a stdio server',
      [{ type: 'mcp', server_label: 'calc', server_url: 'http://127.0.0.1:1/mcp' }],
      400,
      'invalid_value',
      'tools[0].server_url',
    ],
    [
      'a foreign server_url',
      [
        { type: 'function', name: 'f' },
        { type: 'mcp', server_label: 'web', server_url: 'https://example.com/mcp' },
      ],
      400,
      'invalid_value',
      'tools[1].server_url',
    ],
    ['connector_id', [{ type: 'mcp', server_label: 'calc', connector_id: 'connector_gmail' }], 400, 'unsupported_parameter', 'tools[0].connector_id'],
    ['headers', [{ type: 'mcp', server_label: 'calc', headers: { Authorization: 'Bearer x' } }], 400, 'unsupported_parameter', 'tools[0].headers'],
    ['authorization', [{ type: 'mcp', server_label: 'calc', authorization: 'token' }], 400, 'unsupported_parameter', 'tools[0].authorization'],
    ['a missing server_label', [{ type: 'mcp' }], 400, 'invalid_value', 'tools[0].server_label'],
    ['a server named twice', [calc(), calc()], 400, 'invalid_value', 'tools[1].server_label'],
    ['a disabled server', [{ type: 'mcp', server_label: 'off' }], 409, 'mcp_server_disabled', 'tools[0].server_label'],
  ])('refuses %s by name', async (_what, tools, status, code, param) => {
    script = callsTool('add', { a: 1, b: 1 })
    const res = await post(tools)
    expect(res.status, res.text).toBe(status)
    expect(res.json.error).toMatchObject({ code, param })
  })

  it('refuses a key without the MCP permission', async () => {
    const made = await postJson(server, '/api/keys', { label: 'no mcp' })
    expect(made.status).toBe(201)
    const key = (made.json as { key: string }).key
    const res = await post([calc()], key)
    expect(res.status).toBe(403)
    expect(res.json.error).toMatchObject({ type: 'permission_error', code: 'mcp_not_allowed' })
    // The same key without an mcp tool is served.
    script = callsTool('add', { a: 1, b: 1 })
    expect((await post([], key)).status).toBe(200)
  })

  it('refuses an approval for a request that was never made', async () => {
    const res = await postJson(server, '/v1/responses', {
      model: MODEL,
      input: [{ type: 'mcp_approval_response', approval_request_id: 'mcpr_x', approve: true }],
      tools: [calc()],
    })
    expect(res.status).toBe(400)
    expect(res.json.error).toMatchObject({ param: 'input[0].approval_request_id' })
  })
})
