/** Reading a streamed answer into its turn: text, tool calls, and failures kept on the turn. */
import { describe, expect, it } from 'vitest'
import { streamInto } from '../../renderer/src/lib/services/answer-stream.ts'
import { conversationTitle, type ChatTurn } from '../../renderer/src/lib/services/chat-messages.ts'
import type { ChatChunk } from '../../main/server/wire-types.ts'

const chunk = (delta: Record<string, unknown>, finish: string | null = null): ChatChunk =>
  ({ id: 'c', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] }) as unknown as ChatChunk

async function* from(chunks: ChatChunk[], fail?: Error): AsyncGenerator<ChatChunk> {
  for (const c of chunks) yield c
  if (fail) throw fail
}

describe('streamInto', () => {
  it('adds text and whole tool calls to the turn', async () => {
    const turn: ChatTurn = { id: 'a', role: 'assistant', text: '' }
    await streamInto(
      turn,
      from([
        chunk({ content: 'Let me look.' }),
        chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'secret_word', arguments: '{' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '}' } }] }, 'tool_calls'),
      ]),
      new AbortController().signal,
    )
    expect(turn).toMatchObject({ text: 'Let me look.', finishReason: 'tool_calls', toolCalls: [{ id: 'call_1', name: 'secret_word', arguments: '{}' }] })
  })

  it('keeps a failure on the turn, with what was said before it; a stop is no failure', async () => {
    const failed: ChatTurn = { id: 'a', role: 'assistant', text: '' }
    await streamInto(failed, from([chunk({ content: 'Hal' })], new Error('The model crashed')), new AbortController().signal)
    expect(failed).toMatchObject({ text: 'Hal', error: 'The model crashed' })
    const controller = new AbortController()
    controller.abort()
    const stopped: ChatTurn = { id: 'b', role: 'assistant', text: '' }
    await streamInto(stopped, from([chunk({ content: 'Hal' })], new Error('aborted')), controller.signal)
    expect(stopped).not.toHaveProperty('error')
  })
})

describe('conversationTitle', () => {
  it('is the first document when the question has no words', () => {
    expect(conversationTitle([{ id: '1', role: 'user', text: '', documents: [{ id: 'd', name: 'report.pdf' }] }])).toBe('report.pdf')
  })
})
