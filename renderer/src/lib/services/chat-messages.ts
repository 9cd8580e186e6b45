/**
 * A conversation as the UI keeps it, and the /v1/responses request made from it: the person's
 * questions, and each answer as the Responses items it came as (answer-items.ts), sent back as
 * they are. The API takes one image per request, so only the newest picture in the conversation
 * travels; older pictures stay on screen and their words still go along. The answer's turns (its
 * text, calls and tool results, role 'tool') are what the screen shows.
 */
import type { AnswerItem } from './answer-items.ts'
import type { CitationMark } from './citation-marks.ts'

export interface Usage {
  promptTokens: number
  completionTokens: number
}

export interface ChatTurn {
  id: string
  role: 'user' | 'assistant' | 'tool'
  /** For a tool turn: the tool's result (or why the call failed, or that the person denied it), as shown. */
  text: string
  /** A data URL (user turns only). */
  image?: string
  model?: string
  usage?: Usage
  /** Decoding speed reported by the server. */
  tokensPerSecond?: number
  finishReason?: string
  /** What a thinking model thought before answering (assistant turns only). */
  reasoning?: string
  /** Functions the model asked to call (when the chat offers tools). */
  toolCalls?: ToolCallView[]
  /** The person pressed stop before the answer finished. */
  stopped?: boolean
  error?: string
  /** Documents attached to this question (user turns); their text is stored by the server. */
  documents?: DocumentRef[]
  /** The excerpts this answer was given (assistant turns), shown as its sources. */
  citations?: Citation[]
  /** Where the answer cites them (the server's file citations), by source number. */
  citationMarks?: CitationMark[]
  /** What the server said it set aside or did differently for this answer (assistant turns). */
  notices?: string[]
  /** The server's tool loop ended here at its limit, after this many tool rounds (assistant turns). */
  toolRoundLimit?: number
  /** Tool turns: the call this answers, and which server's tool ran. */
  toolCallId?: string
  server?: string
  name?: string
  isError?: boolean
  durationMs?: number
  /**
   * The assistant turn that opens an answer: the answer as the server sent it (every request's
   * output items) with the person's approval responses, in order. What the model reads of the
   * answer; the answer's other turns are for the screen.
   */
  items?: AnswerItem[]
}

export interface DocumentRef {
  id: string
  name: string
  bytes?: number
}

export interface Citation {
  n: number
  name: string
  text: string
}

export interface ToolCallView {
  id: string
  name: string
  /** JSON text, as the model wrote it. */
  arguments: string
  /** The MCP server whose tool this is; absent for functions typed in the parameters (only shown). */
  server?: string
}

export interface ChatParameters {
  temperature: number
  topP: number
  topK: number
  /** Undefined: as long as the model allows. */
  maxTokens: number | undefined
  stop: string[]
  systemPrompt: string
  /** Thinking models think before they answer; off sends `reasoning_effort: "none"`. */
  thinking: boolean
  /** Functions offered to the model: a JSON array in OpenAI's `tools` shape; empty offers none. */
  tools: string
  /** With tools: `auto` lets the model choose, `required` makes it call one. */
  toolChoice: 'auto' | 'required'
}

export const DEFAULT_PARAMETERS: ChatParameters = {
  temperature: 0.7,
  topP: 0.9,
  topK: 40,
  maxTokens: undefined,
  stop: [],
  systemPrompt: '',
  thinking: true,
  tools: '',
  toolChoice: 'auto',
}

/** The tools text as the request's `tools`, or why it cannot be (shown under the box). */
export function parseTools(text: string): { tools?: unknown[]; error?: string } {
  if (!text.trim()) return {}
  try {
    const value: unknown = JSON.parse(text)
    if (!Array.isArray(value)) return { error: 'Tools must be a JSON array: [{"type": "function", "function": {…}}]' }
    return { tools: value }
  } catch (e) {
    return { error: `Not valid JSON: ${(e as Error).message}` }
  }
}

/** One item of a /v1/responses request's `input`: a question, or an item of an answer. */
export type InputItem = { role: 'user'; content: InputPart[] } | AnswerItem

type InputPart = { type: 'input_text'; text: string } | { type: 'input_image'; image_url: string } | { type: 'input_file'; file_id: string }

export interface ResponsesRequestBody {
  model: string
  input: InputItem[]
  stream: true
  /** The conversation lives in the browser; the server keeps nothing of it. */
  store: false
  /** The documents' texts the model was given come back, to show as the answer's sources. */
  include: ['file_search_call.results']
  instructions?: string
  temperature: number
  top_p: number
  top_k: number
  max_output_tokens?: number
  stop?: string[]
  reasoning?: { effort: 'none' }
  tools?: unknown[]
  tool_choice?: 'required'
}

/** A tool server the conversation uses, with the tools the person said to always allow. */
export interface ToolServerUse {
  name: string
  alwaysAllowed: string[]
}

/** What a send adds to the conversation's own request. */
export interface RequestOptions {
  toolServers?: readonly ToolServerUse[]
  /** The first request of a question, where the parameters ask for a tool call. */
  forceToolCall?: boolean
}

/** At most 4 non-empty stop sequences, as the API takes them. */
export function cleanStopSequences(stop: readonly string[]): string[] {
  return stop.filter((s) => s !== '').slice(0, 4)
}

/** What the person sees under a call they denied (the model reads the server's own words for it). */
export const DENIED_TEXT = 'The person did not allow this tool call.'

/**
 * The conversation as a /v1/responses request: the server runs the MCP tools, asks for approvals
 * and reads the documents; the page sends what was said. `sees` says whether the model takes
 * pictures: an earlier picture is then left out for a model that does not (switching models
 * mid-conversation stays possible); a picture in the question being sent always goes, so the
 * server can say why it cannot be answered.
 */
export function buildResponsesRequest(
  model: string,
  turns: readonly ChatTurn[],
  parameters: ChatParameters,
  sees = true,
  options: RequestOptions = {},
): ResponsesRequestBody {
  const newestImage = turns.findLastIndex((t) => t.role === 'user' && t.image)
  const question = turns.findLastIndex((t) => t.role === 'user')
  const lastImageIndex = sees || newestImage === question ? newestImage : -1
  const input: InputItem[] = []
  turns.forEach((turn, index) => {
    if (turn.role !== 'user') {
      // An answer is its items, as they came: the same bytes in every request.
      input.push(...(turn.items ?? []))
      return
    }
    const content: InputPart[] = []
    if (turn.text) content.push({ type: 'input_text', text: turn.text })
    if (index === lastImageIndex && turn.image) content.push({ type: 'input_image', image_url: turn.image })
    else if (turn.image && !turn.text) content.push({ type: 'input_text', text: '(a picture)' })
    for (const d of turn.documents ?? []) content.push({ type: 'input_file', file_id: d.id })
    if (content.length === 0) content.push({ type: 'input_text', text: '' })
    input.push({ role: 'user', content })
  })
  const body: ResponsesRequestBody = {
    model,
    input,
    stream: true,
    store: false,
    include: ['file_search_call.results'],
    temperature: parameters.temperature,
    top_p: parameters.topP,
    top_k: parameters.topK,
  }
  if (parameters.systemPrompt.trim()) body.instructions = parameters.systemPrompt
  if (parameters.maxTokens !== undefined) body.max_output_tokens = parameters.maxTokens
  const stop = cleanStopSequences(parameters.stop)
  if (stop.length > 0) body.stop = stop
  if (!parameters.thinking) body.reasoning = { effort: 'none' }
  const tools = [...(parseTools(parameters.tools).tools ?? []).map(responsesTool), ...(options.toolServers ?? []).map(mcpTool)]
  if (tools.length) {
    body.tools = tools
    // Only a question's first request is forced: after a tool's result the model must be free to answer.
    if (parameters.toolChoice === 'required' && options.forceToolCall) body.tool_choice = 'required'
  }
  return body
}

/** A function typed in chat completions' shape (`function: {…}`) as the Responses API takes it. */
function responsesTool(tool: unknown): unknown {
  const t = tool as { type?: string; function?: Record<string, unknown> }
  return t.type === 'function' && t.function ? { type: 'function', ...t.function } : tool
}

/** A configured MCP server: every call asks the person first, but for the tools always allowed. */
function mcpTool(server: ToolServerUse): unknown {
  return {
    type: 'mcp',
    server_label: server.name,
    require_approval: server.alwaysAllowed.length ? { never: { tool_names: server.alwaysAllowed } } : 'always',
  }
}

/** A short title for the conversation list: the first words of the first question. */
export function conversationTitle(turns: readonly ChatTurn[]): string {
  const first = turns.find((t) => t.role === 'user')
  if (!first) return 'New chat'
  const text = first.text.replace(/\s+/g, ' ').trim()
  if (!text) return first.image ? 'A picture' : (first.documents?.[0]?.name ?? 'New chat')
  return text.length > 40 ? `${text.slice(0, 39)}…` : text
}
