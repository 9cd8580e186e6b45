/** Conversations in localStorage: tool turns, documents and sources survive a reload. */
import { describe, expect, it } from 'vitest'
import { MemoryStorage } from '../support/memory-storage.ts'
import { loadConversations, saveConversations, type Conversation } from '../../renderer/src/lib/services/conversation-storage.ts'

const conversation: Conversation = {
  id: 'c1',
  title: 'Secret',
  model: 'tiny-tools',
  updatedAt: 1,
  toolServers: ['test'],
  turns: [
    { id: '1', role: 'user', text: 'What is the secret word?', image: 'data:image/png;base64,AAAA', documents: [{ id: 'doc1', name: 'notes.txt', bytes: 20 }] },
    { id: '2', role: 'assistant', text: '', toolCalls: [{ id: 'call_1', name: 'secret_word', arguments: '{}' }] },
    { id: '3', role: 'tool', toolCallId: 'call_1', server: 'test', name: 'secret_word', text: 'The secret word is PERSIMMON.', isError: false, durationMs: 12 },
    { id: '4', role: 'assistant', text: 'PERSIMMON [1]', citations: [{ n: 1, name: 'notes.txt', text: 'excerpt' }], toolRoundLimit: 10 },
  ],
}

describe('conversation storage', () => {
  it('keeps tool calls, tool turns, documents, sources and the chosen servers', () => {
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
})
