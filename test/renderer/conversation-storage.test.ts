/** Conversations in localStorage: answers' items, tool turns, documents and sources survive a reload; answers kept before items get them once. */
import { describe, expect, it } from 'vitest'
import { MemoryStorage } from '../support/memory-storage.ts'
import { STOPPED_TEXT } from '../../renderer/src/lib/services/answer-items.ts'
import { buildResponsesRequest, DEFAULT_PARAMETERS, DENIED_TEXT, type ChatTurn } from '../../renderer/src/lib/services/chat-messages.ts'
import { loadConversations, saveConversations, type Conversation } from '../../renderer/src/lib/services/conversation-storage.ts'

const conversation: Conversation = {
  id: 'c1',
  title: 'Secret',
  model: 'tiny-tools',
  updatedAt: 1,
  toolServers: ['test'],
  turns: [
    { id: '1', role: 'user', text: 'What is the secret word?', image: 'data:image/png;base64,AAAA', documents: [{ id: 'doc1', name: 'notes.txt', bytes: 20 }] },
    {
      id: '2',
      role: 'assistant',
      text: '',
      toolCalls: [{ id: 'mcp_1', name: 'secret_word', arguments: '{}', server: 'test' }],
      items: [
        {
          type: 'mcp_call',
          id: 'mcp_1',
          server_label: 'test',
          name: 'secret_word',
          arguments: '{}',
          output: 'The secret word is PERSIMMON.',
          error: null,
          approval_request_id: null,
          status: 'completed',
        },
        { type: 'message', id: 'msg_1', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'PERSIMMON [1]' }] },
      ],
    },
    { id: '3', role: 'tool', toolCallId: 'mcp_1', server: 'test', name: 'secret_word', text: 'The secret word is PERSIMMON.', isError: false, durationMs: 12 },
    { id: '4', role: 'assistant', text: 'PERSIMMON [1]', citations: [{ n: 1, name: 'notes.txt', text: 'excerpt' }], toolRoundLimit: 10 },
  ],
}

describe('conversation storage', () => {
  it("keeps answers' items, tool calls, tool turns, documents, sources and the chosen servers", () => {
    const storage = new MemoryStorage()
    expect(saveConversations([conversation], storage)).toBe(true)
    expect(loadConversations(storage)).toEqual([conversation])
  })

  it('drops pictures before tool turns when storage is full', () => {
    const storage = new MemoryStorage(JSON.stringify([conversation]).length - 1)
    expect(saveConversations([conversation], storage)).toBe(true)
    const [saved] = loadConversations(storage)
    expect(saved!.turns[0]).not.toHaveProperty('image')
    expect(saved!.turns[2]).toEqual(conversation.turns[2])
  })

  it('gives answers kept before items their items once, as the page used to send them', () => {
    const turns: ChatTurn[] = [
      { id: '1', role: 'user', text: 'The secret word?' },
      // Kept before the server ran the tools: the server is named on the result only.
      { id: '2', role: 'assistant', text: '', toolCalls: [{ id: 'call_1', name: 'secret_word', arguments: '{}' }] },
      { id: '3', role: 'tool', toolCallId: 'call_1', server: 'test', name: 'secret_word', text: 'PERSIMMON', isError: false },
      { id: '4', role: 'assistant', text: 'It is PERSIMMON.' },
      { id: '5', role: 'user', text: 'Add 2 and 3' },
      {
        id: '6',
        role: 'assistant',
        text: 'Asking.',
        toolCalls: [
          { id: 'mcpr_1', name: 'add', arguments: '{}', server: 'test' },
          { id: 'mcpr_2', name: 'add', arguments: '{}', server: 'test' },
        ],
      },
      { id: '7', role: 'tool', toolCallId: 'mcpr_1', server: 'test', name: 'add', text: DENIED_TEXT, isError: true },
      { id: '8', role: 'user', text: 'Call f' },
      { id: '9', role: 'assistant', text: '', toolCalls: [{ id: 'call_f', name: 'f', arguments: '{}' }] },
    ]
    const storage = new MemoryStorage()
    storage.setItem('hearth.conversations.v1', JSON.stringify([{ ...conversation, turns }]))
    const [loaded] = loadConversations(storage)
    const call = (id: string, output: string | null, error: string | null) => ({
      type: 'mcp_call',
      id,
      server_label: 'test',
      arguments: '{}',
      output,
      error,
      approval_request_id: null,
      status: error ? 'failed' : 'completed',
    })
    expect(loaded!.turns.map((t) => t.items)).toEqual([
      undefined,
      [
        { ...call('call_1', 'PERSIMMON', null), name: 'secret_word' },
        { type: 'message', id: 'msg_4', role: 'assistant', content: [{ type: 'output_text', text: 'It is PERSIMMON.' }] },
      ],
      undefined,
      undefined,
      undefined,
      [
        { type: 'message', id: 'msg_6', role: 'assistant', content: [{ type: 'output_text', text: 'Asking.' }] },
        { ...call('mcpr_1', null, DENIED_TEXT), name: 'add' },
        { ...call('mcpr_2', null, STOPPED_TEXT), name: 'add' },
      ],
      undefined,
      undefined,
      [{ type: 'function_call', id: 'fc_call_f', call_id: 'call_f', name: 'f', arguments: '{}' }],
    ])
    // Kept with its items, it loads as it was saved.
    saveConversations([loaded!], storage)
    expect(loadConversations(storage)).toEqual([loaded])
    expect(buildResponsesRequest('m', loaded!.turns, DEFAULT_PARAMETERS).input).toHaveLength(3 + 2 + 3 + 1)
  })
})
