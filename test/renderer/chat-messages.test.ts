/** Building /v1/responses requests from the UI's conversation: one image at most, documents as files, MCP tools run by the server. */
import { describe, expect, it } from 'vitest'
import {
  buildResponsesRequest,
  cleanStopSequences,
  conversationTitle,
  DEFAULT_PARAMETERS,
  DENIED_TEXT,
  parseTools,
  STOPPED_TEXT,
  type ChatTurn,
} from '../../renderer/src/lib/services/chat-messages.ts'

const PNG = 'data:image/png;base64,iVBORw0KGgo='
const JPEG = 'data:image/jpeg;base64,/9j/4AAQ'
let n = 0
const user = (text: string, image?: string, extra: Partial<ChatTurn> = {}): ChatTurn => ({ id: String(n++), role: 'user', text, ...(image ? { image } : {}), ...extra })
const assistant = (text: string, extra: Partial<ChatTurn> = {}): ChatTurn => ({ id: String(n++), role: 'assistant', text, ...extra })
const said = (text: string) => ({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text }] })
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
    const body = buildResponsesRequest('m', [user('What is the code?', undefined, { documents: [{ id: 'file-a', name: 'notes.txt' }, { id: 'file-b', name: 'b.pdf' }] })], DEFAULT_PARAMETERS)
    expect(body.input).toEqual([asked(words('What is the code?'), { type: 'input_file', file_id: 'file-a' }, { type: 'input_file', file_id: 'file-b' })])
  })

  it('leaves out failed answers and keeps stopped ones', () => {
    const turns = [user('hi'), assistant('', { error: 'engine crashed' }), user('hi again'), assistant('partial', { stopped: true }), user('go on')]
    expect(buildResponsesRequest('m', turns, DEFAULT_PARAMETERS).input).toEqual([asked(words('hi')), asked(words('hi again')), said('partial'), asked(words('go on'))])
  })

  it('sends the system prompt as instructions, and max_output_tokens, stop and thinking off only when set', () => {
    const body = buildResponsesRequest('m', [user('hi')], { ...DEFAULT_PARAMETERS, systemPrompt: 'Be brief.', maxTokens: 64, stop: ['\n\n', '', 'END', 'a', 'b', 'c'], temperature: 0, topP: 1, topK: 1, thinking: false })
    expect(body).toMatchObject({ instructions: 'Be brief.', max_output_tokens: 64, stop: ['\n\n', 'END', 'a', 'b'], temperature: 0, top_p: 1, top_k: 1, reasoning: { effort: 'none' } })
    const plain = buildResponsesRequest('m', [user('hi')], { ...DEFAULT_PARAMETERS, systemPrompt: '   ' })
    for (const field of ['instructions', 'max_output_tokens', 'stop', 'reasoning', 'tools', 'tool_choice']) expect(plain).not.toHaveProperty(field)
  })
})

describe('tools in the request', () => {
  const typed = '[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]'
  const mcpCall = (id: string) => assistant('', { toolCalls: [{ id, name: 'add', arguments: '{"a":2,"b":3}', server: 'test' }] })
  const result = (id: string, text: string, isError = false): ChatTurn => ({ id: String(n++), role: 'tool', toolCallId: id, server: 'test', name: 'add', text, isError })

  it("offers the typed functions in the Responses API's shape and the tool servers as mcp tools, forcing a call only on a question's first request", () => {
    const parameters = { ...DEFAULT_PARAMETERS, tools: typed, toolChoice: 'required' as const }
    const servers = [{ name: 'test', alwaysAllowed: [] }, { name: 'files', alwaysAllowed: ['read', 'list'] }]
    const first = buildResponsesRequest('m', [user('2+3?')], parameters, true, { toolServers: servers, forceToolCall: true })
    expect(first.tools).toEqual([
      { type: 'function', name: 'f', parameters: { type: 'object' } },
      { type: 'mcp', server_label: 'test', require_approval: 'always' },
      { type: 'mcp', server_label: 'files', require_approval: { never: { tool_names: ['read', 'list'] } } },
    ])
    expect(first.tool_choice).toBe('required')
    expect(buildResponsesRequest('m', [user('2+3?')], parameters, true, { toolServers: servers })).not.toHaveProperty('tool_choice')
  })

  it('sends a call the server ran with its result as the mcp_call it came as; a failed or stopped one with its error', () => {
    const turns = [user('2+3?'), mcpCall('mcp_1'), result('mcp_1', '5'), assistant('It is 5.'), user('and 3+3?'), mcpCall('mcp_2'), user('never mind')]
    const body = buildResponsesRequest('m', turns, DEFAULT_PARAMETERS)
    expect(body.input[1]).toEqual({ type: 'mcp_call', id: 'mcp_1', server_label: 'test', name: 'add', arguments: '{"a":2,"b":3}', output: '5', error: null })
    expect(body.input[2]).toEqual(said('It is 5.'))
    expect(body.input[4]).toMatchObject({ type: 'mcp_call', id: 'mcp_2', output: null, error: STOPPED_TEXT })
  })

  it("answers the calls waiting for approval as OpenAI's approval request and response, and the denied one's local result is not sent twice", () => {
    const turns = [user('2+3?'), { ...mcpCall('mcpr_1'), toolCalls: [{ id: 'mcpr_1', name: 'add', arguments: '{}', server: 'test' }, { id: 'mcpr_2', name: 'add', arguments: '{"x":1}', server: 'test' }] }, result('mcpr_2', DENIED_TEXT, true)]
    const calls = turns[1]!.toolCalls!
    const body = buildResponsesRequest('m', turns, DEFAULT_PARAMETERS, true, { toolServers: [{ name: 'test', alwaysAllowed: [] }], approvals: [{ call: calls[0]!, approve: true }, { call: calls[1]!, approve: false }] })
    expect(body.input.slice(1)).toEqual([
      { type: 'mcp_approval_request', id: 'mcpr_1', server_label: 'test', name: 'add', arguments: '{}' },
      { type: 'mcp_approval_response', approval_request_id: 'mcpr_1', approve: true },
      { type: 'mcp_approval_request', id: 'mcpr_2', server_label: 'test', name: 'add', arguments: '{"x":1}' },
      { type: 'mcp_approval_response', approval_request_id: 'mcpr_2', approve: false },
    ])
  })

  it('sends a call kept before the server ran the tools (its server named on the result only) as an mcp_call', () => {
    const old = assistant('', { toolCalls: [{ id: 'call_7', name: 'add', arguments: '{}' }] })
    const body = buildResponsesRequest('m', [user('2+3?'), old, result('call_7', '5'), assistant('5.'), user('ok')], DEFAULT_PARAMETERS)
    expect(body.input[1]).toEqual({ type: 'mcp_call', id: 'call_7', server_label: 'test', name: 'add', arguments: '{}', output: '5', error: null })
  })

  it('sends a call to a typed function as a function_call', () => {
    const turns = [user('weather?'), assistant('', { toolCalls: [{ id: 'call_1', name: 'f', arguments: '{}' }] }), user('thanks')]
    expect(buildResponsesRequest('m', turns, { ...DEFAULT_PARAMETERS, tools: typed }).input[1]).toEqual({ type: 'function_call', call_id: 'call_1', name: 'f', arguments: '{}' })
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
