/** Building /v1/chat/completions requests from the UI's conversation, one image at most. */
import { describe, expect, it } from 'vitest'
import {
  buildChatRequest,
  cleanStopSequences,
  conversationTitle,
  DEFAULT_PARAMETERS,
  parseTools,
  readChunk,
  addToolCallPieces,
  type ChatTurn,
  type ToolCallView,
} from '../../renderer/src/lib/services/chat-messages.ts'
import type { ChatChunk } from '../../main/server/wire-types.ts'

const PNG = 'data:image/png;base64,iVBORw0KGgo='
const JPEG = 'data:image/jpeg;base64,/9j/4AAQ'
let n = 0
const user = (text: string, image?: string): ChatTurn => ({ id: String(n++), role: 'user', text, ...(image ? { image } : {}) })
const assistant = (text: string, extra: Partial<ChatTurn> = {}): ChatTurn => ({ id: String(n++), role: 'assistant', text, ...extra })

describe('buildChatRequest', () => {
  it('sends a picture as an image_url part after the words, streamed with usage', () => {
    const body = buildChatRequest('vision', [user('What is this?', PNG)], DEFAULT_PARAMETERS)
    expect(body).toEqual({
      model: 'vision',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is this?' },
            { type: 'image_url', image_url: { url: PNG } },
          ],
        },
      ],
      stream: true,
      stream_options: { include_usage: true },
      temperature: DEFAULT_PARAMETERS.temperature,
      top_p: DEFAULT_PARAMETERS.topP,
      top_k: DEFAULT_PARAMETERS.topK,
    })
  })

  it('sends a picture alone when there are no words', () => {
    const body = buildChatRequest('vision', [user('', PNG)], DEFAULT_PARAMETERS)
    expect(body.messages[0]!.content).toEqual([{ type: 'image_url', image_url: { url: PNG } }])
  })

  it('sends only the newest picture of the conversation, keeping the older turns as words', () => {
    const turns = [user('first picture', PNG), assistant('a cat'), user('and this one?', JPEG), assistant('a dog'), user('compare them')]
    const body = buildChatRequest('vision', turns, DEFAULT_PARAMETERS)
    const images = JSON.stringify(body).match(/image_url/g) ?? []
    expect(images).toHaveLength(2) // the part's type and its key: one image
    expect(body.messages).toEqual([
      { role: 'user', content: 'first picture' },
      { role: 'assistant', content: 'a cat' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'and this one?' },
          { type: 'image_url', image_url: { url: JPEG } },
        ],
      },
      { role: 'assistant', content: 'a dog' },
      { role: 'user', content: 'compare them' },
    ])
  })

  it('leaves earlier pictures out for a model that cannot see, but always sends a new one', () => {
    const earlier = buildChatRequest('text-only', [user('look', PNG), assistant('nice'), user('now in words')], DEFAULT_PARAMETERS, false)
    expect(JSON.stringify(earlier)).not.toContain('image_url')
    expect(earlier.messages[0]).toEqual({ role: 'user', content: 'look' })
    const fresh = buildChatRequest('text-only', [user('and this?', JPEG)], DEFAULT_PARAMETERS, false)
    expect(fresh.messages[0]!.content).toContainEqual({ type: 'image_url', image_url: { url: JPEG } })
  })

  it('puts an older word-less picture as a placeholder, so no message is empty', () => {
    const body = buildChatRequest('vision', [user('', PNG), assistant('ok'), user('again', JPEG)], DEFAULT_PARAMETERS)
    expect(body.messages[0]).toEqual({ role: 'user', content: '(a picture)' })
  })

  it('leaves out failed answers and keeps stopped ones', () => {
    const turns = [user('hi'), assistant('', { error: 'engine crashed' }), user('hi again'), assistant('partial', { stopped: true }), user('go on')]
    const body = buildChatRequest('m', turns, DEFAULT_PARAMETERS)
    expect(body.messages.map((m) => [m.role, m.content])).toEqual([
      ['user', 'hi'],
      ['user', 'hi again'],
      ['assistant', 'partial'],
      ['user', 'go on'],
    ])
  })

  it('adds the system prompt first, and max_tokens and stop only when set', () => {
    const body = buildChatRequest('m', [user('hi')], {
      ...DEFAULT_PARAMETERS,
      systemPrompt: 'Be brief.',
      maxTokens: 64,
      stop: ['\n\n', '', 'END', 'a', 'b', 'c'],
      temperature: 0,
      topP: 1,
      topK: 1,
    })
    expect(body.messages[0]).toEqual({ role: 'system', content: 'Be brief.' })
    expect(body).toMatchObject({ max_tokens: 64, stop: ['\n\n', 'END', 'a', 'b'], temperature: 0, top_p: 1, top_k: 1 })
    const plain = buildChatRequest('m', [user('hi')], { ...DEFAULT_PARAMETERS, systemPrompt: '   ' })
    expect(plain.messages).toHaveLength(1)
    expect(plain).not.toHaveProperty('max_tokens')
    expect(plain).not.toHaveProperty('stop')
  })
})

describe('cleanStopSequences', () => {
  it('keeps at most four non-empty sequences, as the API takes', () => {
    expect(cleanStopSequences(['', 'a', 'b', '', 'c', 'd', 'e'])).toEqual(['a', 'b', 'c', 'd'])
  })
})

describe('readChunk', () => {
  const nothing = { text: '', reasoning: '', toolCalls: [] }
  const who = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 0, model: 'm' } as const
  type Delta = Extract<ChatChunk, { usage?: null }>['choices'][number]['delta']
  const chunk = (delta: Delta, finishReason: 'stop' | 'length' | null = null, extra: object = {}): ChatChunk => ({
    ...who,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    ...extra,
  })

  it('reads content, the finish reason, usage and speed from streamed chunks', () => {
    expect(readChunk(chunk({ role: 'assistant', content: '' }))).toEqual(nothing)
    expect(readChunk(chunk({ content: 'Hel' }, null, { usage: null }))).toEqual({ ...nothing, text: 'Hel' })
    const timings = { prompt_ms: 1, prompt_per_second: 1, predicted_ms: 1, predicted_per_second: 42.5 }
    expect(readChunk(chunk({}, 'length', { timings }))).toEqual({ ...nothing, finishReason: 'length', tokensPerSecond: 42.5 })
    const usage = { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12, prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } }
    expect(readChunk({ ...who, choices: [], usage })).toEqual({ ...nothing, usage: { promptTokens: 9, completionTokens: 3 } })
  })

  it('reads thinking and the pieces of tool calls, which add up to whole calls', () => {
    expect(readChunk(chunk({ reasoning_content: 'hmm' }))).toEqual({ ...nothing, reasoning: 'hmm' })
    const calls: ToolCallView[] = []
    addToolCallPieces(calls, readChunk(chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'f', arguments: '{"a"' } }] })).toolCalls)
    addToolCallPieces(calls, readChunk(chunk({ tool_calls: [{ index: 0, function: { arguments: ': 1}' } }] })).toolCalls)
    addToolCallPieces(calls, readChunk(chunk({ tool_calls: [{ index: 1, id: 'call_b', function: { name: 'g', arguments: '{}' } }] })).toolCalls)
    expect(calls).toEqual([
      { id: 'call_a', name: 'f', arguments: '{"a": 1}' },
      { id: 'call_b', name: 'g', arguments: '{}' },
    ])
  })
})

describe('tools and thinking in the request', () => {
  const tools = '[{"type": "function", "function": {"name": "f"}}]'
  it('offers the tools, makes a call required when asked, and turns thinking off', () => {
    const body = buildChatRequest('m', [user('hi')], { ...DEFAULT_PARAMETERS, tools, toolChoice: 'required', thinking: false })
    expect(body.tools).toEqual([{ type: 'function', function: { name: 'f' } }])
    expect(body.tool_choice).toBe('required')
    expect(body.reasoning_effort).toBe('none')
    const plain = buildChatRequest('m', [user('hi')], DEFAULT_PARAMETERS)
    expect(plain).not.toHaveProperty('tools')
    expect(plain).not.toHaveProperty('tool_choice')
    expect(plain).not.toHaveProperty('reasoning_effort')
  })

  it('sends an earlier answer that called tools with its calls', () => {
    const turns = [user('weather?'), assistant('', { toolCalls: [{ id: 'call_1', name: 'f', arguments: '{}' }] }), user('thanks')]
    const body = buildChatRequest('m', turns, { ...DEFAULT_PARAMETERS, tools })
    expect(body.messages[1]).toEqual({ role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } }] })
  })

  it('says what is wrong with the tools text', () => {
    expect(parseTools('')).toEqual({})
    expect(parseTools('{"type": "function"}').error).toMatch(/JSON array/)
    expect(parseTools('[{').error).toMatch(/Not valid JSON/)
    expect(parseTools(tools).tools).toHaveLength(1)
  })
})

describe('conversationTitle', () => {
  it('is the first question, shortened', () => {
    expect(conversationTitle([])).toBe('New chat')
    expect(conversationTitle([user('', PNG)])).toBe('A picture')
    expect(conversationTitle([user('  Why   is the sky blue?  ')])).toBe('Why is the sky blue?')
    expect(conversationTitle([user('x'.repeat(100))])).toHaveLength(40)
  })
})

describe('tool turns, MCP tools and documents in the request', () => {
  const calling = () => assistant('', { toolCalls: [{ id: 'call_1', name: 'add', arguments: '{"a":2,"b":3}' }] })
  const result = (): ChatTurn => ({ id: String(n++), role: 'tool', toolCallId: 'call_1', server: 'test', name: 'add', text: '5', isError: false })
  const mcpTools = [{ type: 'function', function: { name: 'add', parameters: { type: 'object' } } }]

  it('sends a tool turn as a role "tool" message after the call it answers', () => {
    const body = buildChatRequest('m', [user('2+3?'), calling(), result(), assistant('It is 5.'), user('thanks')], DEFAULT_PARAMETERS)
    expect(body.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant', 'user'])
    expect(body.messages[2]).toEqual({ role: 'tool', tool_call_id: 'call_1', content: '5' })
  })

  it('offers MCP tools beside those typed in the parameters, forcing a call only before any result', () => {
    const parameters = { ...DEFAULT_PARAMETERS, tools: '[{"type": "function", "function": {"name": "f"}}]', toolChoice: 'required' as const }
    const first = buildChatRequest('m', [user('2+3?')], parameters, true, { tools: mcpTools })
    expect(first.tools).toEqual([{ type: 'function', function: { name: 'f' } }, ...mcpTools])
    expect(first.tool_choice).toBe('required')
    const next = buildChatRequest('m', [user('2+3?'), calling(), result()], parameters, true, { tools: mcpTools })
    expect(next).not.toHaveProperty('tool_choice')
  })

  it("sends the question with the documents' excerpts, keeping earlier questions as typed", () => {
    const body = buildChatRequest('m', [user('first'), assistant('ok'), user('What is the code?', PNG)], DEFAULT_PARAMETERS, true, {
      questionText: '[1] notes.txt\n4711\n\nQuestion: What is the code?',
    })
    expect(body.messages[0]!.content).toBe('first')
    expect(body.messages[2]!.content).toEqual([
      { type: 'text', text: '[1] notes.txt\n4711\n\nQuestion: What is the code?' },
      { type: 'image_url', image_url: { url: PNG } },
    ])
  })
})
