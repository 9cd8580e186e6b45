/** Building /v1/responses requests from the UI's conversation: answers as their items, one image at most, documents as files, MCP tools run by the server. */
import { describe, expect, it } from 'vitest'
import type { AnswerItem } from '../../renderer/src/lib/services/answer-items.ts'
import {
  buildResponsesRequest,
  cleanStopSequences,
  conversationTitle,
  DEFAULT_PARAMETERS,
  DENIED_TEXT,
  parseTools,
  type ChatTurn,
} from '../../renderer/src/lib/services/chat-messages.ts'

const PNG = 'data:image/png;base64,iVBORw0KGgo='
const JPEG = 'data:image/jpeg;base64,/9j/4AAQ'
let n = 0
const user = (text: string, image?: string, extra: Partial<ChatTurn> = {}): ChatTurn => ({
  id: String(n++),
  role: 'user',
  text,
  ...(image ? { image } : {}),
  ...extra,
})
const said = (text: string): AnswerItem => ({
  type: 'message',
  id: `msg_${text}`,
  role: 'assistant',
  status: 'completed',
  content: [{ type: 'output_text', text }],
})
/** An answer's opening turn: what it said is its item. */
const assistant = (text: string, extra: Partial<ChatTurn> = {}): ChatTurn => ({
  id: String(n++),
  role: 'assistant',
  text,
  items: text ? [said(text)] : [],
  ...extra,
})
const asked = (...content: unknown[]) => ({ role: 'user', content })
const words = (text: string) => ({ type: 'input_text', text })

describe('buildResponsesRequest', () => {
  it('sends a picture as an input_image after the words, streamed, kept nowhere, with the documents read', () => {
    const body = buildResponsesRequest('vision', [user('What is this?', PNG)], DEFAULT_PARAMETERS)
    expect(body).toEqual({
      model: 'vision',
      input: [asked(words('What is this?'), { type: 'input_image', image_url: PNG })],
      stream: true,
      store: false,
      include: ['file_search_call.results'],
      temperature: DEFAULT_PARAMETERS.temperature,
      top_p: DEFAULT_PARAMETERS.topP,
      top_k: DEFAULT_PARAMETERS.topK,
    })
  })

  it('sends only the newest picture of the conversation, keeping the older turns as words', () => {
    const turns = [user('first picture', PNG), assistant('a cat'), user('and this one?', JPEG), assistant('a dog'), user('compare them')]
    const body = buildResponsesRequest('vision', turns, DEFAULT_PARAMETERS)
    expect(JSON.stringify(body).match(/input_image/g)).toHaveLength(1)
    expect(body.input).toEqual([
      asked(words('first picture')),
      said('a cat'),
      asked(words('and this one?'), { type: 'input_image', image_url: JPEG }),
      said('a dog'),
      asked(words('compare them')),
    ])
  })

  it('leaves earlier pictures out for a model that cannot see, but always sends a new one; a word-less one is a placeholder', () => {
    const earlier = buildResponsesRequest('text-only', [user('look', PNG), assistant('nice'), user('now in words')], DEFAULT_PARAMETERS, false)
    expect(JSON.stringify(earlier)).not.toContain('input_image')
    const fresh = buildResponsesRequest('text-only', [user('and this?', JPEG)], DEFAULT_PARAMETERS, false)
    expect(fresh.input[0]).toEqual(asked(words('and this?'), { type: 'input_image', image_url: JPEG }))
    const body = buildResponsesRequest('vision', [user('', PNG), assistant('ok'), user('again', JPEG)], DEFAULT_PARAMETERS)
    expect(body.input[0]).toEqual(asked(words('(a picture)')))
  })

  it('names the documents of each question as input_file, after its words', () => {
    const body = buildResponsesRequest(
      'm',
      [
        user('What is the code?', undefined, {
          documents: [
            { id: 'file-a', name: 'notes.txt' },
            { id: 'file-b', name: 'b.pdf' },
          ],
        }),
      ],
      DEFAULT_PARAMETERS,
    )
    expect(body.input).toEqual([asked(words('What is the code?'), { type: 'input_file', file_id: 'file-a' }, { type: 'input_file', file_id: 'file-b' })])
  })

  it('leaves out failed answers (no items) and keeps what stopped ones said', () => {
    const turns = [user('hi'), assistant('', { error: 'engine crashed' }), user('hi again'), assistant('partial', { stopped: true }), user('go on')]
    expect(buildResponsesRequest('m', turns, DEFAULT_PARAMETERS).input).toEqual([
      asked(words('hi')),
      asked(words('hi again')),
      said('partial'),
      asked(words('go on')),
    ])
  })

  it('sends the system prompt as instructions, and max_output_tokens, stop and thinking off only when set', () => {
    const body = buildResponsesRequest('m', [user('hi')], {
      ...DEFAULT_PARAMETERS,
      systemPrompt: 'Be brief.',
      maxTokens: 64,
      stop: ['\n\n', '', 'END', 'a', 'b', 'c'],
      temperature: 0,
      topP: 1,
      topK: 1,
      thinking: false,
    })
    expect(body).toMatchObject({
      instructions: 'Be brief.',
      max_output_tokens: 64,
      stop: ['\n\n', 'END', 'a', 'b'],
      temperature: 0,
      top_p: 1,
      top_k: 1,
      reasoning: { effort: 'none' },
    })
    const plain = buildResponsesRequest('m', [user('hi')], { ...DEFAULT_PARAMETERS, systemPrompt: '   ' })
    for (const field of ['instructions', 'max_output_tokens', 'stop', 'reasoning', 'tools', 'tool_choice']) expect(plain).not.toHaveProperty(field)
  })
})

describe('tools in the request', () => {
  const typed = '[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]'
  const result = (id: string, text: string): ChatTurn => ({ id: String(n++), role: 'tool', toolCallId: id, server: 'test', name: 'add', text, isError: false })

  it("offers the typed functions in the Responses API's shape and the tool servers as mcp tools, forcing a call only on a question's first request", () => {
    const parameters = { ...DEFAULT_PARAMETERS, tools: typed, toolChoice: 'required' as const }
    const servers = [
      { name: 'test', alwaysAllowed: [] },
      { name: 'files', alwaysAllowed: ['read', 'list'] },
    ]
    const first = buildResponsesRequest('m', [user('2+3?')], parameters, true, { toolServers: servers, forceToolCall: true })
    expect(first.tools).toEqual([
      { type: 'function', name: 'f', parameters: { type: 'object' } },
      { type: 'mcp', server_label: 'test', require_approval: 'always' },
      { type: 'mcp', server_label: 'files', require_approval: { never: { tool_names: ['read', 'list'] } } },
    ])
    expect(first.tool_choice).toBe('required')
    expect(buildResponsesRequest('m', [user('2+3?')], parameters, true, { toolServers: servers })).not.toHaveProperty('tool_choice')
  })

  it('sends each answer as its items, as they came, after its question: the turns on screen add nothing', () => {
    const request: AnswerItem = { type: 'mcp_approval_request', id: 'mcpr_1', server_label: 'test', name: 'add', arguments: '{"a":2,"b":3}' }
    const ran: AnswerItem = {
      type: 'mcp_call',
      id: 'mcp_1',
      server_label: 'test',
      name: 'add',
      arguments: '{}',
      output: '5',
      error: null,
      approval_request_id: null,
      status: 'completed',
    }
    const items: AnswerItem[] = [
      { type: 'mcp_list_tools', id: 'mcpl_1' },
      { type: 'reasoning', id: 'rs_1', content: [{ type: 'reasoning_text', text: 'Add them.' }] },
      ran,
      said('Let me ask.'),
      request,
      { type: 'mcp_approval_response', approval_request_id: 'mcpr_1', approve: false },
      said('It did not run.'),
    ]
    const turns: ChatTurn[] = [
      user('2+3?'),
      { ...assistant('Let me ask.'), items, toolCalls: [{ id: 'mcp_1', name: 'add', arguments: '{}', server: 'test' }] },
      result('mcp_1', '5'),
      { id: 'x', role: 'tool', toolCallId: 'mcpr_1', server: 'test', name: 'add', text: DENIED_TEXT, isError: true },
      { id: 'y', role: 'assistant', text: 'It did not run.' },
      user('and 3+3?'),
    ]
    const body = buildResponsesRequest('m', turns, DEFAULT_PARAMETERS, true, { toolServers: [{ name: 'test', alwaysAllowed: [] }] })
    expect(body.input).toEqual([asked(words('2+3?')), ...items, asked(words('and 3+3?'))])
    // A denial is the API's approval response: the server alone words what the model reads of it.
    expect(JSON.stringify(body)).not.toContain(DENIED_TEXT)
  })

  it('sends the same bytes for an answer in every later request', () => {
    const turns: ChatTurn[] = [user('2+3?'), assistant('5.')]
    const first = JSON.stringify(buildResponsesRequest('m', [...turns, user('and 3+3?')], DEFAULT_PARAMETERS).input)
    const later = JSON.stringify(buildResponsesRequest('m', [...turns, user('and 3+3?'), assistant('6.'), user('thanks')], DEFAULT_PARAMETERS).input)
    expect(later.startsWith(first.slice(0, -1))).toBe(true)
  })

  it('says what is wrong with the tools text', () => {
    expect(parseTools('')).toEqual({})
    expect(parseTools('{"type": "function"}').error).toMatch(/JSON array/)
    expect(parseTools('[{').error).toMatch(/Not valid JSON/)
    expect(parseTools(typed).tools).toHaveLength(1)
  })
})

describe('cleanStopSequences', () => {
  it('keeps at most four non-empty sequences, as the API takes', () => {
    expect(cleanStopSequences(['', 'a', 'b', '', 'c', 'd', 'e'])).toEqual(['a', 'b', 'c', 'd'])
  })
})

describe('conversationTitle', () => {
  it('is the first question, shortened, or its picture or first document', () => {
    expect(conversationTitle([])).toBe('New chat')
    expect(conversationTitle([user('', PNG)])).toBe('A picture')
    expect(conversationTitle([user('  Why   is the sky blue?  ')])).toBe('Why is the sky blue?')
    expect(conversationTitle([user('x'.repeat(100))])).toHaveLength(40)
    expect(conversationTitle([user('', undefined, { documents: [{ id: 'd', name: 'report.pdf' }] })])).toBe('report.pdf')
  })
})
