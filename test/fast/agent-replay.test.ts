/**
 * The requests today's coding agents really send (recorded by test/support/record-agent-requests.ts
 * into test/fixtures/agents/), replayed against the whole HTTP app with a scripted engine: every
 * one is answered 2xx, and each field becomes what docs/agents.md says it does. The agents
 * themselves run against real engines in agents.test.ts.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ChatJob, ChatMessage, ChatResult, EngineJob } from '../../engines/engine-jobs.ts'
import { refusedFields, setAsideFields } from '../../main/server/protocols/field-decisions.ts'
import { ModelError } from '../../engines/errors.ts'
import { plainScript, startInProcessServer, type InProcessServer, type Script } from '../support/in-process-server.ts'
import { readResponse } from '../support/server-process.ts'
import { writeTinyLlama } from '../support/tiny-models.ts'

interface Recorded {
  method: string
  path: string
  headers: Record<string, string>
  body?: Record<string, unknown>
}
interface Recording {
  agent: string
  version: string
  requests: Recorded[]
}

const MODEL = 'qwen25-tiny'
const MAX_COMPLETION = 512
const recording = (agent: string) => JSON.parse(readFileSync(join(import.meta.dirname, '../fixtures/agents', `${agent}.json`), 'utf8')) as Recording

let server: InProcessServer
/** What the scripted engine answers next; plain text unless a test says otherwise. */
let answer: Script = plainScript

beforeAll(async () => {
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-replay-'))
  writeTinyLlama(join(modelsDir, 'tiny.gguf'), { contextLength: 65536 })
  writeFileSync(join(modelsDir, 'models.json'), JSON.stringify({ models: [{ id: MODEL, file: 'tiny.gguf', max_completion_tokens: MAX_COMPLETION }] }))
  server = await startInProcessServer({ modelsDir, script: (job, context) => answer(job, context) })
})

afterAll(async () => {
  await server?.stop()
})

/** Sends a recorded request as its agent sent it (the key replaced by the test server's). */
async function replay(request: Recorded, body = request.body) {
  const headers = { ...request.headers, authorization: `Bearer ${server.apiKey}` }
  const res = await fetch(`${server.url}${request.path}`, { method: request.method, headers, ...(body ? { body: JSON.stringify(body) } : {}) })
  return readResponse(res)
}

function lastJob(): ChatJob {
  const jobs = server.engines.flatMap((e) => e.jobs as EngineJob[])
  return jobs.at(-1) as ChatJob
}

const textOf = (m: ChatMessage | undefined) => (typeof m?.content === 'string' ? m.content : JSON.stringify(m?.content))

/** A scripted answer, streamed as an engine would stream it. */
function reply(overrides: Partial<ChatResult>): Script {
  return (_job, { emit }) => {
    if (overrides.reasoning) emit({ type: 'reasoning', text: overrides.reasoning })
    if (overrides.text) emit({ type: 'text', text: overrides.text })
    overrides.toolCalls?.forEach((call, index) => emit({ type: 'tool_call', index, id: call.id, name: call.function.name, arguments: call.function.arguments }))
    return result(overrides)
  }
}

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

describe.each(['claude', 'codex', 'opencode', 'qwen', 'continue', 'kilo', 'cline', 'aider'])('%s, as recorded', (agent) => {
  it('gets a 2xx answer to every request it sent', async () => {
    answer = plainScript
    const { requests } = recording(agent)
    for (const request of requests) {
      const res = await replay(request)
      expect(res.status, `${request.method} ${request.path}: ${res.text.slice(0, 300)}`).toBeLessThan(300)
    }
  })

  it('has its max_tokens served, capped at what the model may write', async () => {
    answer = plainScript
    const request = recording(agent).requests.find((r) => r.method === 'POST')!
    await replay(request)
    expect(lastJob().maxTokens ?? MAX_COMPLETION).toBeLessThanOrEqual(MAX_COMPLETION)
  })
})

describe('Claude Code', () => {
  const { requests } = recording('claude')
  const [first, second] = requests.filter((r) => r.method === 'POST')

  it('leaves its billing stamp out of the prompt, so two sessions share their system prompt', async () => {
    answer = plainScript
    const system = first!.body!.system as Array<{ text: string }>
    expect(system[0]!.text).toMatch(/^x-anthropic-billing-header:/)
    const stamped = (stamp: string) => ({ ...first!.body!, system: [{ type: 'text', text: `x-anthropic-billing-header: ${stamp}` }, ...system.slice(1)] })
    await replay(first!, stamped('cc_version=2.1.328.d69; cc_entrypoint=cli; cch=a5145;'))
    const a = textOf(lastJob().messages[0])
    await replay(first!, stamped('cc_version=2.1.328.3c3; cc_entrypoint=sdk-cli; cch=ef01a;'))
    const b = textOf(lastJob().messages[0])
    expect(a).toBe(b)
    expect(a).not.toContain('x-anthropic-billing-header')
    expect(a).toContain(system[1]!.text)
  })

  it('turns its session, effort, adaptive thinking and deferred tools into what they mean here', async () => {
    answer = plainScript
    const res = await replay(first!)
    expect(res.headers.get('warning')).toBeNull()
    const job = lastJob()
    const session = (JSON.parse((first!.body!.metadata as { user_id: string }).user_id) as { session_id: string }).session_id
    expect(job.conversationKey).toBe(session)
    expect(job.reasoningEffort).toBe('high')
    const declared = first!.body!.tools as Array<{ name: string; defer_loading?: boolean }>
    const deferred = declared.filter((t) => t.defer_loading).map((t) => t.name)
    expect(deferred.length).toBeGreaterThan(0)
    expect(job.tools.map((t) => t.function.name).sort()).toEqual(
      declared
        .filter((t) => !t.defer_loading)
        .map((t) => t.name)
        .sort(),
    )
  })

  it('keeps a system message sent between turns where it stands', async () => {
    answer = plainScript
    await replay(first!)
    const roles = lastJob().messages.map((m) => m.role)
    expect(roles[0]).toBe('system')
    expect(roles.indexOf('system', 1)).toBeGreaterThan(roles.indexOf('user'))
  })

  it('sends a prompt whose start is the whole of the turn before it: the cache can reuse it', async () => {
    answer = plainScript
    await replay(first!)
    const before = lastJob().messages
    await replay(second!)
    const after = lastJob().messages
    expect(after.slice(0, before.length)).toEqual(before)
    expect(after.length).toBeGreaterThan(before.length)
  })

  it('gets its thinking back from the signature when the text was omitted', async () => {
    answer = reply({ reasoning: 'I should read the file.', text: 'OK' })
    const res = await replay(first!, { ...first!.body!, stream: false })
    const thinking = res.json.content[0]
    expect(thinking).toMatchObject({ type: 'thinking', thinking: '' })
    answer = plainScript
    const turn = { role: 'assistant', content: [thinking, { type: 'text', text: 'OK' }] }
    const messages = [...(first!.body!.messages as unknown[]), turn, { role: 'user', content: 'And?' }]
    await replay(first!, { ...first!.body!, messages })
    expect(lastJob().messages.find((m) => m.role === 'assistant')).toMatchObject({ reasoning_content: 'I should read the file.' })
  })

  it('ignores a thinking signature from another model, keeping the thinking text it came with', async () => {
    answer = plainScript
    const foreign = { type: 'thinking', thinking: 'Another model thought this.', signature: 'EqQBCkgIARABGAIiQL...' }
    const messages = [
      ...(first!.body!.messages as unknown[]),
      { role: 'assistant', content: [foreign, { type: 'text', text: 'Hi' }] },
      { role: 'user', content: 'Go on' },
    ]
    const res = await replay(first!, { ...first!.body!, messages })
    expect(res.status).toBe(200)
    expect(lastJob().messages.find((m) => m.role === 'assistant')).toMatchObject({ reasoning_content: 'Another model thought this.' })
  })

  it("has its context edits applied: clearing thinking keeps the last turn's", async () => {
    answer = plainScript
    const thought = (text: string) => ({
      role: 'assistant',
      content: [
        { type: 'thinking', thinking: text, signature: 'x' },
        { type: 'text', text: 'ok' },
      ],
    })
    const messages = [
      { role: 'user', content: 'a' },
      thought('first thought'),
      { role: 'user', content: 'b' },
      thought('second thought'),
      { role: 'user', content: 'c' },
    ]
    const body = {
      ...first!.body!,
      messages,
      stream: false,
      context_management: { edits: [{ type: 'clear_thinking_20251015', keep: { type: 'thinking_turns', value: 1 } }] },
    }
    const res = await replay(first!, body)
    expect(res.json.context_management.applied_edits).toEqual([
      { type: 'clear_thinking_20251015', cleared_thinking_turns: 1, cleared_input_tokens: expect.any(Number) },
    ])
    const assistants = lastJob().messages.filter((m) => m.role === 'assistant')
    expect(assistants.map((m) => ('reasoning_content' in m ? m.reasoning_content : undefined))).toEqual([undefined, 'second thought'])
  })

  it('tells Claude Code a prompt over the context in the words it compacts on', async () => {
    answer = () => {
      throw new ModelError('context_length_exceeded', 'too long', 'messages', { promptTokens: 70000, contextLength: 65536 })
    }
    const res = await replay(first!, { ...first!.body!, stream: false })
    expect(res.status).toBe(400)
    expect(res.json).toEqual({ type: 'error', error: { type: 'invalid_request_error', message: 'prompt is too long: 70000 tokens > 65535 maximum' } })
    answer = plainScript
  })

  it('stops with model_context_window_exceeded when the context ran out before max_tokens', async () => {
    answer = reply({ text: 'lots', finishReason: 'length', contextFull: true })
    const res = await replay(first!, { ...first!.body!, stream: false })
    expect(res.json.stop_reason).toBe('model_context_window_exceeded')
    answer = plainScript
  })
})

describe('Codex', () => {
  const { requests } = recording('codex')
  const [first, second] = requests

  it('has its namespaces flattened, its hosted web search left out and said so, and its cache key kept', async () => {
    answer = plainScript
    const res = await replay(first!)
    expect(res.status).toBe(200)
    expect(res.headers.get('warning')).toMatch(/web_search\) was left out/)
    const job = lastJob()
    const names = job.tools.map((t) => t.function.name)
    expect(names).toContain('exec_command')
    expect(names).toContain('multi_agent_v1__spawn_agent')
    expect(names).not.toContain('web_search')
    expect(job.conversationKey).toBe(first!.body!.prompt_cache_key)
    // Its two developer messages open the conversation as system messages.
    expect(job.messages.slice(0, 2).map((m) => m.role)).toEqual(['system', 'system'])
  })

  it('gets a call to a namespaced tool back under its namespace', async () => {
    answer = reply({
      toolCalls: [{ id: 'call_1', type: 'function', function: { name: 'multi_agent_v1__spawn_agent', arguments: '{"message":"hi"}' } }],
      finishReason: 'tool_calls',
    })
    const res = await replay(first!, { ...first!.body!, stream: false })
    const call = res.json.output.find((i: { type: string }) => i.type === 'function_call')
    expect(call).toMatchObject({ namespace: 'multi_agent_v1', name: 'spawn_agent', call_id: 'call_1' })
    // Streamed, the same.
    const streamed = await replay(first!)
    const done = streamed.text
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => JSON.parse(l.slice(6)))
      .find((e) => e.type === 'response.output_item.done')
    expect(done.item).toMatchObject({ type: 'function_call', namespace: 'multi_agent_v1', name: 'spawn_agent' })
    // Sent back in the history, it is the flat name again.
    answer = plainScript
    const input = [...(first!.body!.input as unknown[]), call, { type: 'function_call_output', call_id: 'call_1', output: 'spawned' }]
    await replay(first!, { ...first!.body!, input })
    expect(lastJob().messages.find((m) => m.role === 'assistant')).toMatchObject({ tool_calls: [{ function: { name: 'multi_agent_v1__spawn_agent' } }] })
  })

  it('carries its reasoning sealed with store: false, and gives it back to the model next turn', async () => {
    answer = reply({
      reasoning: 'Let me list the files.',
      toolCalls: [{ id: 'call_2', type: 'function', function: { name: 'exec_command', arguments: '{"cmd":"ls"}' } }],
      finishReason: 'tool_calls',
    })
    const res = await replay(first!, { ...first!.body!, stream: false })
    const reasoning = res.json.output.find((i: { type: string }) => i.type === 'reasoning')
    expect(reasoning.encrypted_content).toMatch(/^hearth1\./)
    answer = plainScript
    // Codex sends back what it kept: the encrypted content, without the text.
    const kept = { type: 'reasoning', id: reasoning.id, summary: [], encrypted_content: reasoning.encrypted_content }
    const call = res.json.output.find((i: { type: string }) => i.type === 'function_call')
    const input = [...(first!.body!.input as unknown[]), kept, call, { type: 'function_call_output', call_id: call.call_id, output: 'notes.txt' }]
    await replay(second!, { ...second!.body!, input })
    expect(lastJob().messages.find((m) => m.role === 'assistant')).toMatchObject({ reasoning_content: 'Let me list the files.' })
  })

  it('replays its second turn, with the call it made and its output, as a tool exchange', async () => {
    answer = plainScript
    const res = await replay(second!)
    expect(res.status).toBe(200)
    const roles = lastJob().messages.map((m) => m.role)
    expect(roles.slice(-2)).toEqual(['assistant', 'tool'])
  })
})

describe('OpenCode', () => {
  const { requests } = recording('opencode')

  it('keeps its session on one slot by its session header, title requests included', async () => {
    answer = plainScript
    for (const request of requests) {
      await replay(request)
      expect(lastJob().conversationKey).toBe(request.headers['x-session-affinity'])
    }
  })
})

describe('malformed history', () => {
  const { requests } = recording('opencode')
  const withTools = requests.find((r) => Array.isArray(r.body?.tools) && (r.body!.tools as unknown[]).length > 0)!

  it('mends a tool call cut off mid-way, says so, and answers', async () => {
    answer = plainScript
    const messages = [
      ...(withTools.body!.messages as unknown[]),
      {
        role: 'assistant',
        content: '',
        tool_calls: [{ id: 'call_x', type: 'function', function: { name: 'read', arguments: '{"filePath": "/home/user/no' } }],
      },
      { role: 'tool', tool_call_id: 'call_x', content: 'not found' },
    ]
    const res = await replay(withTools, { ...withTools.body!, messages })
    expect(res.status).toBe(200)
    expect(res.headers.get('warning')).toMatch(/tool_calls\[0\]\.function\.arguments was not a JSON object/)
    const call = lastJob().messages.findLast((m) => m.role === 'assistant')
    expect(call).toMatchObject({ tool_calls: [{ function: { arguments: '{"filePath":"/home/user/no"}' } }] })
  })

  it('refuses a tool result without its call with a 400 naming the message, never a 500', async () => {
    const messages = [...(withTools.body!.messages as unknown[]), { role: 'tool', tool_call_id: 'call_nowhere', content: 'x' }]
    const res = await replay(withTools, { ...withTools.body!, messages })
    expect(res.status).toBe(400)
    expect(res.json.error.param).toBe(`messages[${messages.length - 1}].tool_call_id`)
  })

  it('names the Anthropic block when a tool result answers no tool use', async () => {
    const claude = recording('claude').requests.find((r) => r.method === 'POST')!
    const messages = [...(claude.body!.messages as unknown[]), { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_gone', content: 'x' }] }]
    const res = await replay(claude, { ...claude.body!, messages })
    expect(res.status).toBe(400)
    expect(res.json.error.message).toMatch(/toolu_gone/)
  })
})

describe('docs/agents.md', () => {
  const doc = readFileSync(join(import.meta.dirname, '../..', 'docs', 'agents.md'), 'utf8')
  const named = (field: string) => ['`', ':', ' ', '.'].some((after) => doc.includes(`\`${field}${after}`))

  it.each(['claude', 'codex', 'opencode', 'qwen', 'continue', 'kilo', 'cline', 'aider'])('decides every field and header %s sends', (agent) => {
    const { requests } = recording(agent)
    const fields = new Set(requests.flatMap((r) => [...Object.keys(r.body ?? {}), ...Object.keys(r.headers)]))
    const undecided = [...fields].filter((f) => !['accept', 'content-type'].includes(f) && !named(f))
    expect(undecided, 'fields a recorded request sends that docs/agents.md does not decide').toEqual([])
  })

  it('names every field a route refuses or sets aside', () => {
    const fields = [refusedFields('messages'), refusedFields('responses'), refusedFields('chat'), setAsideFields('chat')].flatMap((table) => Object.keys(table))
    expect(fields.filter((f) => !named(f))).toEqual([])
  })
})
