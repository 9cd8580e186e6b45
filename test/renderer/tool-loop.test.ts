/** The chat's tool loop with fake steps: approvals, results as tool turns, the round limit, Stop. */
import { describe, expect, it } from 'vitest'
import { buildChatRequest, DEFAULT_PARAMETERS, type ChatTurn, type ToolCallView } from '../../renderer/src/lib/services/chat-messages.ts'
import type { OfferedTool } from '../../renderer/src/lib/services/mcp-tools.ts'
import {
  boundedResult,
  DENIED_TEXT,
  MAX_RESULT_CHARACTERS,
  STOPPED_TEXT,
  MAX_TOOL_ROUNDS,
  parseArguments,
  runToolLoop,
  untilStopped,
  type Approval,
  type ToolLoopSteps,
  type ToolResult,
} from '../../renderer/src/lib/services/tool-loop.ts'

const secret: OfferedTool = { server: 'test', tool: 'secret_word', name: 'secret_word' }
const add: OfferedTool = { server: 'test', tool: 'add', name: 'add' }

interface Script {
  /** Each answer of the model: its calls (none: a text answer). */
  answers: Array<ToolCallView[]>
  approval?: Approval | (() => Promise<Approval>)
  run?: (tool: OfferedTool, args: Record<string, unknown>, signal: AbortSignal) => Promise<ToolResult>
  controller?: AbortController
}

function loop(script: Script) {
  let n = 0
  const turns: ChatTurn[] = [{ id: 'q', role: 'user', text: 'What is the secret word?' }]
  const requests: ReturnType<typeof buildChatRequest>[] = []
  const approvals: string[] = []
  const ran: Array<{ tool: string; args: Record<string, unknown> }> = []
  const controller = script.controller ?? new AbortController()
  const steps: ToolLoopSteps = {
    turns,
    offered: new Map([
      ['secret_word', secret],
      ['add', add],
    ]),
    signal: controller.signal,
    newId: () => `id${n++}`,
    async answer() {
      requests.push(buildChatRequest('m', turns, { ...DEFAULT_PARAMETERS, toolChoice: 'required' }, true, { tools: [{ type: 'function' }] }))
      const calls = script.answers.shift() ?? []
      const turn: ChatTurn = { id: `a${n++}`, role: 'assistant', text: calls.length ? '' : 'PERSIMMON', ...(calls.length ? { toolCalls: structuredClone(calls) } : {}) }
      turns.push(turn)
      return turn
    },
    approve(call) {
      approvals.push(call.name)
      const a = script.approval ?? 'once'
      return typeof a === 'function' ? a() : Promise.resolve(a)
    },
    async run(tool, args, signal) {
      ran.push({ tool: tool.tool, args })
      return script.run ? script.run(tool, args, signal) : { text: 'The secret word is PERSIMMON.', isError: false, durationMs: 3 }
    },
  }
  return { turns, requests, approvals, ran, controller, done: runToolLoop(steps) }
}

const call = (name: string, args = '{}', id = `call_${name}`): ToolCallView => ({ id, name, arguments: args })

describe('runToolLoop', () => {
  it('asks, runs the allowed tool, and sends its result as a tool message with the choice back to auto', async () => {
    const l = loop({ answers: [[call('secret_word')], []] })
    await l.done
    expect(l.turns.map((t) => t.role)).toEqual(['user', 'assistant', 'tool', 'assistant'])
    expect(l.turns[2]).toMatchObject({ role: 'tool', toolCallId: 'call_secret_word', server: 'test', name: 'secret_word', text: 'The secret word is PERSIMMON.', isError: false, durationMs: 3 })
    expect(l.requests[0]!.tool_choice).toBe('required')
    expect(l.requests[1]!.tool_choice).toBeUndefined()
    expect(l.requests[1]!.messages.slice(1)).toEqual([
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_secret_word', type: 'function', function: { name: 'secret_word', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'call_secret_word', content: 'The secret word is PERSIMMON.' },
    ])
    expect(l.turns.at(-1)!.text).toBe('PERSIMMON')
  })

  it('tells the model when the person denied a call, and does not run it', async () => {
    const l = loop({ answers: [[call('add', '{"a": 2, "b": 3}')], []], approval: 'deny' })
    await l.done
    expect(l.ran).toEqual([])
    expect(l.turns[2]).toMatchObject({ role: 'tool', text: DENIED_TEXT, isError: true })
  })

  it('turns a failed call into an error result the model can read, and goes on', async () => {
    const l = loop({ answers: [[call('add', '{"a": 2, "b": 3}')], []], run: () => Promise.reject(new Error('The tool server "test" stopped: boom')) })
    await l.done
    expect(l.ran).toEqual([{ tool: 'add', args: { a: 2, b: 3 } }])
    expect(l.turns[2]).toMatchObject({ text: 'The tool server "test" stopped: boom', isError: true })
    expect(l.turns.at(-1)).toMatchObject({ role: 'assistant', text: 'PERSIMMON' })
  })

  it('answers every call of an answer: bad arguments and unknown names get error results without asking', async () => {
    const l = loop({ answers: [[call('add', '{"a": 2', 'c1'), call('nope', '{}', 'c2'), call('secret_word', '', 'c3')], []] })
    await l.done
    expect(l.approvals).toEqual(['secret_word'])
    const results = l.turns.filter((t) => t.role === 'tool')
    expect(results.map((t) => [t.toolCallId, t.isError])).toEqual([
      ['c1', true],
      ['c2', true],
      ['c3', false],
    ])
    expect(results[0]!.text).toMatch(/not valid JSON/)
    expect(results[1]!.text).toBe('There is no tool named "nope".')
  })

  it('gives a call without an id one, so its result can refer to it', async () => {
    const l = loop({ answers: [[call('secret_word', '{}', '')], []] })
    await l.done
    const id = l.turns[1]!.toolCalls![0]!.id
    expect(id).toMatch(/^call_/)
    expect(l.turns[2]!.toolCallId).toBe(id)
  })

  it('leaves calls to functions typed in the parameters alone', async () => {
    const l = loop({ answers: [[call('get_weather')]] })
    await l.done
    expect(l.turns.map((t) => t.role)).toEqual(['user', 'assistant'])
    expect(l.approvals).toEqual([])
  })

  it(`stops after ${MAX_TOOL_ROUNDS} rounds and marks the last answer`, async () => {
    const l = loop({ answers: Array.from({ length: 20 }, () => [call('secret_word')]) })
    await l.done
    expect(l.requests).toHaveLength(MAX_TOOL_ROUNDS)
    expect(l.turns.filter((t) => t.role === 'tool')).toHaveLength(MAX_TOOL_ROUNDS)
    expect(l.turns.findLast((t) => t.role === 'assistant')!.toolRoundLimit).toBe(MAX_TOOL_ROUNDS)
  })

  it('ends at once when stopped while waiting for approval, answering every call of the answer as stopped', async () => {
    const controller = new AbortController()
    const l = loop({ answers: [[call('secret_word', '{}', 'c1'), call('add', '{}', 'c2')], []], approval: () => new Promise<Approval>(() => undefined), controller })
    await new Promise((r) => setTimeout(r, 10))
    controller.abort()
    await l.done
    expect(l.turns.map((t) => [t.role, t.toolCallId, t.text])).toEqual([
      ['user', undefined, 'What is the secret word?'],
      ['assistant', undefined, ''],
      ['tool', 'c1', STOPPED_TEXT],
      ['tool', 'c2', STOPPED_TEXT],
    ])
    expect(l.ran).toEqual([])
    expect(l.requests).toHaveLength(1)
  })

  it('ends at once when stopped while a tool runs, and aborts the call', async () => {
    const controller = new AbortController()
    let aborted = false
    const l = loop({
      answers: [[call('secret_word')], []],
      controller,
      run: (_t, _a, signal) =>
        new Promise<ToolResult>(() => signal.addEventListener('abort', () => (aborted = true))),
    })
    await new Promise((r) => setTimeout(r, 10))
    controller.abort()
    await l.done
    expect(aborted).toBe(true)
    expect(l.turns.map((t) => t.role)).toEqual(['user', 'assistant', 'tool'])
    expect(l.turns[2]).toMatchObject({ text: STOPPED_TEXT, isError: true })
    expect(l.requests).toHaveLength(1)
  })
})

describe('helpers', () => {
  it('reads arguments: empty is {}, an array or bad JSON is an error', () => {
    expect(parseArguments('')).toEqual({ args: {} })
    expect(parseArguments('{"a": 1}')).toEqual({ args: { a: 1 } })
    expect(parseArguments('[1]').error).toMatch(/JSON object/)
    expect(parseArguments('{').error).toMatch(/not valid JSON/)
  })

  it('keeps a long result up to its bound, saying how much was cut', () => {
    expect(boundedResult('short')).toBe('short')
    const long = boundedResult('x'.repeat(MAX_RESULT_CHARACTERS + 123))
    expect(long.startsWith('x'.repeat(MAX_RESULT_CHARACTERS))).toBe(true)
    expect(long).toMatch(/cut here: 123 more characters\)$/)
  })

  it('untilStopped rejects as soon as the signal fires', async () => {
    const controller = new AbortController()
    const waiting = untilStopped(new Promise(() => undefined), controller.signal)
    controller.abort()
    await expect(waiting).rejects.toMatchObject({ name: 'AbortError' })
    await expect(untilStopped(Promise.resolve(5), new AbortController().signal)).resolves.toBe(5)
  })
})
