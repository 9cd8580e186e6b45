/**
 * A conversation as the UI keeps it, and the /v1/chat/completions request made from it. The API
 * takes one image per request, so only the newest picture in the conversation travels; older
 * pictures stay on screen and their words still go along. Tool results are turns of their own
 * (role 'tool'), sent back as OpenAI's `role: "tool"` messages.
 */
import type { ChatChunk } from '../../../../main/server/wire-types.ts'

export interface Usage {
  promptTokens: number
  completionTokens: number
}

export interface ChatTurn {
  id: string
  role: 'user' | 'assistant' | 'tool'
  /** For a tool turn: the tool's result (or why the call failed), as the model is told it. */
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
  /** The tool loop ended here because it reached its round limit (assistant turns). */
  toolRoundLimit?: number
  /** Tool turns: the call this answers, and which server's tool ran. */
  toolCallId?: string
  server?: string
  name?: string
  isError?: boolean
  durationMs?: number
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

type ContentPart = { type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } }

export interface ChatRequestMessage {
  role: 'system' | 'user' | 'assistant' | 'tool'
  content: string | ContentPart[] | null
  tool_calls?: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }>
  tool_call_id?: string
}

export interface ChatRequestBody {
  model: string
  messages: ChatRequestMessage[]
  stream: true
  stream_options: { include_usage: true }
  temperature: number
  top_p: number
  top_k: number
  max_tokens?: number
  stop?: string[]
  reasoning_effort?: 'none'
  tools?: unknown[]
  tool_choice?: 'required'
}

/** What a send adds to the conversation's own request: tools of MCP servers, documents' excerpts. */
export interface RequestExtras {
  /** Function tools offered besides those typed in the parameters. */
  tools?: unknown[]
  /** The question as sent (with the documents' excerpts); the turn keeps what the person typed. */
  questionText?: string
}

/** At most 4 non-empty stop sequences, as the API takes them. */
export function cleanStopSequences(stop: readonly string[]): string[] {
  return stop.filter((s) => s !== '').slice(0, 4)
}

/**
 * `sees` says whether the model takes pictures. An earlier picture is then left out for a model
 * that does not (switching models mid-conversation stays possible); a picture in the question being
 * sent always goes, so the server can say why it cannot be answered.
 */
export function buildChatRequest(
  model: string,
  turns: readonly ChatTurn[],
  parameters: ChatParameters,
  sees = true,
  extras: RequestExtras = {},
): ChatRequestBody {
  const newestImage = turns.findLastIndex((t) => t.role === 'user' && t.image)
  const question = turns.findLastIndex((t) => t.role === 'user')
  const lastImageIndex = sees || newestImage === question ? newestImage : -1
  const messages: ChatRequestMessage[] = []
  if (parameters.systemPrompt.trim()) messages.push({ role: 'system', content: parameters.systemPrompt })
  turns.forEach((turn, index) => {
    if (turn.role === 'tool') {
      messages.push({ role: 'tool', tool_call_id: turn.toolCallId ?? '', content: turn.text })
      return
    }
    if (turn.role === 'assistant') {
      // Failed answers have nothing to say; a stopped one said what it said.
      const calls = turn.toolCalls?.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } }))
      if (calls?.length) messages.push({ role: 'assistant', content: turn.text || null, tool_calls: calls })
      else if (turn.text) messages.push({ role: 'assistant', content: turn.text })
      return
    }
    const text = index === question && extras.questionText !== undefined ? extras.questionText : turn.text
    if (index === lastImageIndex && turn.image) {
      const parts: ContentPart[] = []
      if (text) parts.push({ type: 'text', text })
      parts.push({ type: 'image_url', image_url: { url: turn.image } })
      messages.push({ role: 'user', content: parts })
    } else {
      messages.push({ role: 'user', content: text || (turn.image ? '(a picture)' : '') })
    }
  })
  const body: ChatRequestBody = {
    model,
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: parameters.temperature,
    top_p: parameters.topP,
    top_k: parameters.topK,
  }
  if (parameters.maxTokens !== undefined) body.max_tokens = parameters.maxTokens
  const stop = cleanStopSequences(parameters.stop)
  if (stop.length > 0) body.stop = stop
  if (!parameters.thinking) body.reasoning_effort = 'none'
  const tools = [...(parseTools(parameters.tools).tools ?? []), ...(extras.tools ?? [])]
  if (tools.length) {
    body.tools = tools
    // Only the first round is forced: after a tool's result the model must be free to answer.
    if (parameters.toolChoice === 'required' && turns.at(-1)?.role === 'user') body.tool_choice = 'required'
  }
  return body
}

/** What one streamed chunk adds to the answer being shown. */
export interface ChunkUpdate {
  text: string
  reasoning: string
  /** Pieces of tool calls: the first piece of a call has its id and name. */
  toolCalls: Array<{ index: number; id?: string; name?: string; arguments: string }>
  finishReason?: string
  usage?: Usage
  tokensPerSecond?: number
}

export function readChunk(c: ChatChunk): ChunkUpdate {
  const choice = c.choices[0]
  const update: ChunkUpdate = {
    text: choice?.delta.content ?? '',
    reasoning: choice?.delta.reasoning_content ?? '',
    toolCalls: (choice?.delta.tool_calls ?? []).map((call) => ({
      index: call.index,
      ...(call.id !== undefined ? { id: call.id } : {}),
      ...(call.function.name !== undefined ? { name: call.function.name } : {}),
      arguments: call.function.arguments,
    })),
  }
  if (choice?.finish_reason) update.finishReason = choice.finish_reason
  if (c.usage) update.usage = { promptTokens: c.usage.prompt_tokens, completionTokens: c.usage.completion_tokens }
  if ('timings' in c && c.timings) update.tokensPerSecond = c.timings.predicted_per_second
  return update
}

/** A short title for the conversation list: the first words of the first question. */
export function conversationTitle(turns: readonly ChatTurn[]): string {
  const first = turns.find((t) => t.role === 'user')
  if (!first) return 'New chat'
  const text = first.text.replace(/\s+/g, ' ').trim()
  if (!text) return first.image ? 'A picture' : (first.documents?.[0]?.name ?? 'New chat')
  return text.length > 40 ? `${text.slice(0, 39)}…` : text
}

/** Adds streamed pieces of tool calls to the calls shown so far. */
export function addToolCallPieces(calls: ToolCallView[], pieces: ChunkUpdate['toolCalls']): void {
  for (const piece of pieces) {
    const call = (calls[piece.index] ??= { id: piece.id ?? '', name: piece.name ?? '', arguments: '' })
    if (piece.id) call.id = piece.id
    if (piece.name) call.name = piece.name
    call.arguments += piece.arguments
  }
}
