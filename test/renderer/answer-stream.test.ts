/** Reading a streamed /v1/responses answer into the conversation: the answer's items, model turns, the server's tool calls and their results, approvals, sources, failures. */
import { describe, expect, it } from 'vitest'
import type { AnswerItem } from '../../renderer/src/lib/services/answer-items.ts'
import { readResponse } from '../../renderer/src/lib/services/answer-stream.ts'
import type { ChatTurn } from '../../renderer/src/lib/services/chat-messages.ts'
import type { McpCallItem, ResponseEvent, ResponseItem } from '../../main/server/wire-types.ts'

async function* from(events: ResponseEvent[], fail?: Error): AsyncGenerator<ResponseEvent> {
  for (const e of events) yield e
  if (fail) throw fail
}

let ids = 0
const hooks = { newId: () => `t${ids++}`, model: 'm', showEveryMs: 0 }
const added = (item: ResponseItem): ResponseEvent => ({ type: 'response.output_item.added', item })
const done = (item: ResponseItem): ResponseEvent => ({ type: 'response.output_item.done', item })
const text = (delta: string): ResponseEvent => ({ type: 'response.output_text.delta', delta })
const completed = (reason?: string): ResponseEvent => ({
  type: reason ? 'response.incomplete' : 'response.completed',
  response: { status: reason ? 'incomplete' : 'completed', incomplete_details: reason ? { reason } : null, usage: { input_tokens: 9, output_tokens: 3 } },
})
const message: ResponseItem = { type: 'message', id: 'msg_1', content: [] }
const call = (id: string, status: McpCallItem['status'] = 'completed', approval: string | null = null): ResponseItem => ({
  type: 'mcp_call',
  id,
  server_label: 'test',
  name: 'secret_word',
  arguments: '{}',
  output: status === 'completed' ? 'PERSIMMON' : null,
  error: status === 'completed' ? null : 'it broke',
  approval_request_id: approval,
  status,
})
const start = (): ChatTurn[] => [
  { id: 'q', role: 'user', text: 'hi' },
  { id: 'a', role: 'assistant', text: '', model: 'm' },
]

describe('readResponse', () => {
  it('puts the tool the server ran under the call, and the model turn after it in a new answer, with usage at the end', async () => {
    const turns = start()
    const running: Array<string | undefined> = []
    const outcome = await readResponse(
      turns,
      [],
      from([
        { type: 'response.output_item.added', item: { type: 'mcp_list_tools', id: 'l' } },
        added(call('mcp_1', 'in_progress')),
        done(call('mcp_1')),
        added(message),
        text('It is '),
        text('PERSIMMON.'),
        completed(),
      ]),
      new AbortController().signal,
      { ...hooks, onRunning: (id) => running.push(id) },
    )
    expect(outcome).toEqual({ approvals: [], ended: false })
    expect(turns.map((t) => t.role)).toEqual(['user', 'assistant', 'tool', 'assistant'])
    expect(turns[1]!.toolCalls).toEqual([{ id: 'mcp_1', name: 'secret_word', arguments: '{}', server: 'test' }])
    expect(turns[2]).toMatchObject({ role: 'tool', toolCallId: 'mcp_1', server: 'test', text: 'PERSIMMON', isError: false, durationMs: expect.any(Number) })
    expect(turns[3]).toMatchObject({ text: 'It is PERSIMMON.', usage: { promptTokens: 9, completionTokens: 3 }, finishReason: 'stop', model: 'm' })
    expect(running).toEqual(['mcp_1', undefined])
  })

  it('hands back the calls that wait for approval, and puts an approved call run later under the call that asked', async () => {
    const turns = start()
    const approval: ResponseItem = { type: 'mcp_approval_request', id: 'mcpr_1', server_label: 'test', name: 'secret_word', arguments: '{}' }
    const first = await readResponse(turns, [], from([added(approval), done(approval), completed()]), new AbortController().signal, hooks)
    expect(first.approvals).toEqual([{ id: 'mcpr_1', name: 'secret_word', arguments: '{}', server: 'test' }])
    expect(turns[1]!.toolCalls).toEqual(first.approvals)
    await readResponse(
      turns,
      [],
      from([added(call('mcp_9', 'in_progress', 'mcpr_1')), done(call('mcp_9', 'failed', 'mcpr_1')), added(message), text('Sorry.'), completed()]),
      new AbortController().signal,
      hooks,
    )
    expect(turns[1]!.toolCalls).toHaveLength(1)
    expect(turns[2]).toMatchObject({ role: 'tool', toolCallId: 'mcpr_1', text: 'it broke', isError: true })
    expect(turns[3]).toMatchObject({ role: 'assistant', text: 'Sorry.' })
  })

  it("keeps the documents' texts as the answer's sources, and says where the answer stopped short", async () => {
    const turns = start()
    const search: ResponseItem = {
      type: 'file_search_call',
      id: 'fs',
      results: [{ file_id: 'file-a', filename: 'notes.txt', text: 'The code is 4711.', score: null, attributes: { citation: 1 } }],
    }
    await readResponse(
      turns,
      [],
      from([added(search), done(search), added(message), text('4711 [1]'), completed('max_output_tokens')]),
      new AbortController().signal,
      hooks,
    )
    expect(turns[1]).toMatchObject({ text: '4711 [1]', finishReason: 'length', citations: [{ n: 1, name: 'notes.txt', text: 'The code is 4711.' }] })
  })

  it("marks where the server's citations point, by the number of the source they quote", async () => {
    const turns = start()
    const results = ['The code is 4711.', 'The door is red.'].map((t, i) => ({
      file_id: 'file-a',
      filename: 'notes.txt',
      text: t,
      score: 0.5,
      attributes: { citation: i + 1 },
    }))
    const search: ResponseItem = { type: 'file_search_call', id: 'fs', results }
    const cite = (index: number, quote: string): ResponseEvent => ({
      type: 'response.output_text.annotation.added',
      annotation: { type: 'file_citation', index, file_id: 'file-a', quote },
    })
    await readResponse(
      turns,
      [],
      from([added(search), done(search), added(message), text('It is red.'), cite(10, 'The door is red.'), cite(10, 'not a source'), completed()]),
      new AbortController().signal,
      hooks,
    )
    expect(turns[1]!.citationMarks).toEqual([{ at: 10, n: 2 }])
  })

  it('keeps each item the server sent, once done, in order: what the next request sends back', async () => {
    const items: AnswerItem[] = [{ type: 'mcp_approval_response', approval_request_id: 'mcpr_0', approve: false }]
    const list: ResponseItem = { type: 'mcp_list_tools', id: 'l' }
    const search: ResponseItem = {
      type: 'file_search_call',
      id: 'fs',
      results: [{ file_id: 'file-a', filename: 'notes.txt', text: 'The code is 4711.', score: null, attributes: { citation: 1 } }],
    }
    const thought: ResponseItem = { type: 'reasoning', id: 'rs_1', content: [{ type: 'reasoning_text', text: 'Hm.' }] }
    const said: ResponseItem = {
      type: 'message',
      id: 'msg_1',
      role: 'assistant',
      status: 'completed',
      content: [{ type: 'output_text', text: 'It is PERSIMMON.' }],
    }
    const events = [
      added(search),
      done(search),
      added(list),
      done(list),
      added(call('mcp_1', 'in_progress')),
      done(call('mcp_1')),
      added(thought),
      done(thought),
      added(message),
      text('It is PERSIMMON.'),
      done(said),
      completed(),
    ]
    await readResponse(start(), items, from(events), new AbortController().signal, hooks)
    // The documents' texts stay with the answer's sources only: the model reads nothing of a file search.
    expect(items).toEqual([items[0], { ...search, results: null }, list, call('mcp_1'), thought, said])
  })

  it('keeps what a stopped answer said in its items: the text so far, and a call cut off while it ran', async () => {
    const controller = new AbortController()
    controller.abort()
    const cut: AnswerItem[] = []
    await readResponse(start(), cut, from([added(message), text('Hal')], new Error('aborted')), controller.signal, hooks)
    expect(cut).toEqual([{ type: 'message', id: 'msg_1', status: 'incomplete', content: [{ type: 'output_text', text: 'Hal' }] }])
    const running: AnswerItem[] = []
    await readResponse(start(), running, from([added(call('mcp_2', 'in_progress'))], new Error('aborted')), controller.signal, hooks)
    expect(running).toEqual([call('mcp_2', 'in_progress')])
    // A message opened but never written is left out.
    const empty: AnswerItem[] = []
    await readResponse(start(), empty, from([added(message)], new Error('aborted')), controller.signal, hooks)
    expect(empty).toEqual([])
  })

  it('keeps a failure on the turn, with what was said before it; a stop is no failure', async () => {
    const failed = start()
    await readResponse(failed, [], from([added(message), text('Hal')], new Error('The model crashed')), new AbortController().signal, hooks)
    expect(failed[1]).toMatchObject({ text: 'Hal', error: 'The model crashed' })
    const controller = new AbortController()
    controller.abort()
    const stopped = start()
    const outcome = await readResponse(stopped, [], from([added(message), text('Hal')], new Error('aborted')), controller.signal, hooks)
    expect(outcome.ended).toBe(true)
    expect(stopped[1]).not.toHaveProperty('error')
  })
})
