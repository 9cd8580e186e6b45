/**
 * A chat job's messages as a model's template needs them (engines/chat-request-body.ts): system
 * messages after the first turn, for templates that take one system message at the start. What a
 * template does with them is found by rendering a probe at load.
 */
import { describe, expect, it } from 'vitest'
import type { ChatMessage } from '../../engines/engine-jobs.ts'
import { keepsSystemMessagesInPlace, withSystemMessagesFolded } from '../../engines/chat-request-body.ts'

describe('system messages between turns', () => {
  it('are kept in place where the template writes them after the answer and before the next turn', () => {
    expect(keepsSystemMessagesInPlace('<s>hearth-probe-first hearth-probe-user hearth-probe-answer hearth-probe-later hearth-probe-next')).toBe(true)
    // Moved to the start with the first, dropped, or the template refused the conversation.
    expect(keepsSystemMessagesInPlace('hearth-probe-first hearth-probe-later hearth-probe-user hearth-probe-answer hearth-probe-next')).toBe(false)
    expect(keepsSystemMessagesInPlace('hearth-probe-first hearth-probe-user hearth-probe-answer hearth-probe-next')).toBe(false)
    expect(keepsSystemMessagesInPlace(undefined)).toBe(false)
  })

  it('otherwise join the leading system message, or the nearest user turn, in the order they were said', () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'You are an agent.' },
      { role: 'system', content: 'Tools are below.' },
      { role: 'user', content: 'Fix the bug' },
      { role: 'system', content: 'The cwd is /src' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'read', arguments: '{}' } }] },
      { role: 'tool', content: 'code', tool_call_id: 'c' },
      { role: 'system', content: 'Mind the tests' },
      { role: 'user', content: 'Go on' },
      { role: 'system', content: 'Be brief' },
    ]
    expect(withSystemMessagesFolded(messages)).toEqual([
      { role: 'system', content: 'You are an agent.\n\nTools are below.' },
      { role: 'user', content: 'Fix the bug\n\n<system>\nThe cwd is /src\n</system>' },
      messages[4],
      messages[5],
      { role: 'user', content: '<system>\nMind the tests\n</system>\n\nGo on\n\n<system>\nBe brief\n</system>' },
    ])
  })

  it('become a user turn of their own where no user turn is near', () => {
    const folded = withSystemMessagesFolded([
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: 'Hello' },
      { role: 'system', content: 'Wrap up' },
    ])
    expect(folded.at(-1)).toEqual({ role: 'user', content: '<system>\nWrap up\n</system>' })
  })
})
