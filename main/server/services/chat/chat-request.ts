/**
 * The chat completions request as the contract defines it: schema, checks against the model, and
 * the conversion into an engine job. No HTTP and no engine here.
 */
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import type { ChatContentPart, ChatJob, ChatMessage, ToolDefinition } from '../../../../engines/engine-jobs.ts'
import { imageErrorAt } from '../../../../media/images/invalid-image-error.ts'
import { normalizeImageDataUrl } from '../../../../media/images/normalize-image.ts'
import { DEFAULT_PROJECTOR_INPUT, readProjectorInput } from '../../../../media/images/projector-input.ts'
import { invalidRequest, modelNotCompatible, unsupportedParameter } from '../api-error.ts'
import { Notices } from '../pipeline/request-notices.ts'
import type { ChatRequest, ChatRequestMessage } from './chat-request-schema.ts'
import { repairedArguments } from './tool-arguments.ts'

export type { ChatRequest } from './chat-request-schema.ts'

export interface ChatPlan {
  request: ChatRequest
  stream: boolean
  includeUsage: boolean
  job: ChatJob
}

/** Where an image sits in the request. */
export interface ImageRef {
  url: string
  messageIndex: number
  partIndex: number
  /** The field a 400 names: `messages[0].content[1].image_url.url`. */
  param: string
}

export const CHAT_DEFAULTS = { temperature: 0, topP: 0.9, topK: 50 } as const

/**
 * What a chat request needs checked beyond its schema: the fields that depend on each other, the
 * conversation's calls and results, the tools. Responses and Messages build their chat request
 * typed, from bodies their own schemas checked, and come straight here.
 */
export function checkChatRequest(parsed: ChatRequest, notices: Notices = new Notices()): ChatRequest {
  if (parsed.stream_options != null && parsed.stream !== true) {
    throw invalidRequest("'stream_options' is only allowed when 'stream' is true", 'stream_options')
  }
  const request = { ...parsed, messages: withReadableToolCalls(parsed.messages, notices) }
  checkConversation(request.messages)
  checkTools(request)
  if (request.top_logprobs != null && request.logprobs !== true) {
    throw invalidRequest("'top_logprobs' is only allowed when 'logprobs' is true", 'top_logprobs')
  }
  if (request.logprobs === true && request.tools?.length && request.tool_choice !== 'none') {
    throw unsupportedParameter('logprobs', "'logprobs' cannot be combined with 'tools' yet")
  }
  return request
}

/**
 * Earlier tool calls whose arguments are not a JSON object (a call cut off by `max_tokens`, or
 * written by another program) are mended rather than refused: the agent resends its history on
 * every turn, and one broken call would otherwise stop the session for good. OpenAI takes them too.
 */
function withReadableToolCalls(messages: ChatRequestMessage[], notices: Notices): ChatRequestMessage[] {
  return messages.map((m, i) => {
    if (m.role !== 'assistant' || !m.tool_calls?.length) return m
    const calls = m.tool_calls.map((call, j) => {
      const mended = repairedArguments(call.function.arguments)
      if (mended === call.function.arguments) return call
      notices.add(`messages[${i}].tool_calls[${j}].function.arguments was not a JSON object; the model saw ${mended}`)
      return { ...call, function: { ...call.function, arguments: mended } }
    })
    return { ...m, tool_calls: calls }
  })
}

/**
 * Assistant turns say something or call something; each tool result answers a call made before it;
 * and a conversation does not end on calls whose results never came (the model cannot go on from
 * there, as OpenAI and Anthropic also say).
 */
function checkConversation(messages: readonly ChatRequestMessage[]): void {
  const calls = new Set<string>()
  const last = messages.at(-1)
  if (last?.role === 'assistant' && last.tool_calls?.length) {
    throw invalidRequest(
      `The conversation ends with tool calls that have no results; send each result in a message with role 'tool' and its 'tool_call_id' ('${last.tool_calls[0]!.id}') after them`,
      `messages[${messages.length - 1}].tool_calls`,
    )
  }
  messages.forEach((m, i) => {
    if (m.role === 'assistant') {
      if (m.content == null && !m.tool_calls?.length) {
        throw invalidRequest(`An assistant message needs 'content' or 'tool_calls'`, `messages[${i}].content`)
      }
      m.tool_calls?.forEach((call) => calls.add(call.id))
    }
    if (m.role === 'tool' && !calls.has(m.tool_call_id)) {
      throw invalidRequest(
        `A message with role 'tool' must answer a call in an earlier assistant message's 'tool_calls'; no call has the id '${m.tool_call_id}'`,
        `messages[${i}].tool_call_id`,
      )
    }
  })
}

function checkTools(request: ChatRequest): void {
  const tools = request.tools ?? []
  const names = new Set<string>()
  tools.forEach((t, i) => {
    if (names.has(t.function.name)) throw invalidRequest(`Two tools are named '${t.function.name}'`, `tools[${i}].function.name`)
    names.add(t.function.name)
    const type = t.function.parameters?.type
    if (type !== undefined && type !== 'object') {
      throw invalidRequest(`A function's parameters must be a JSON Schema of type 'object', not '${String(type)}'`, `tools[${i}].function.parameters.type`)
    }
  })
  const choice = request.tool_choice
  if (choice != null && tools.length === 0) throw invalidRequest("'tool_choice' is only allowed when 'tools' are specified", 'tool_choice')
  if (typeof choice === 'object' && choice !== null && !names.has(choice.function.name)) {
    throw invalidRequest(`'tool_choice' names the function '${choice.function.name}', which is not among 'tools'`, 'tool_choice.function.name')
  }
  if (request.parallel_tool_calls != null && tools.length === 0) {
    throw invalidRequest("'parallel_tool_calls' is only allowed when 'tools' are specified", 'parallel_tool_calls')
  }
  const format = request.response_format
  if (format?.type === 'json_schema') {
    const type = format.json_schema.schema?.type
    if (type !== undefined && typeof type !== 'string' && !Array.isArray(type)) {
      throw invalidRequest("A schema's 'type' must be a string or a list of strings", 'response_format.json_schema.schema.type')
    }
  }
}

/**
 * The engine job for a request, checked against the model. The request's image is decoded,
 * checked and shrunk first and goes into the job as PNG bytes; a bad one is a 400 `invalid_image`
 * naming its part, and nothing unchecked ever reaches an engine.
 *
 * A `max_tokens` past what the model may write is served, capped (agents send 32000 whatever the
 * model): the answer stops at the cap, or where the context runs out, with finish reason `length`.
 * `conversationKey` names the conversation, to keep it on its engine slot (conversation-key.ts);
 * `images` keeps the normalised picture for a request planned again (the Responses tool loop plans each turn).
 */
export async function planChat(request: ChatRequest, model: ModelRecord, conversationKey?: string, images?: Map<string, Buffer>): Promise<ChatPlan> {
  if (!model.capabilities.includes('chat')) throw modelNotCompatible(model.id, 'chat completions')
  const requested = request.max_completion_tokens ?? request.max_tokens ?? undefined
  const maxTokens = requested === undefined ? undefined : Math.min(requested, model.maxCompletionTokens)
  const found = imagesOf(request)
  const misplaced = found.find((i) => request.messages[i.messageIndex]!.role !== 'user')
  if (misplaced) {
    const role = request.messages[misplaced.messageIndex]!.role
    throw invalidRequest(
      `Images are only allowed in messages with role 'user', but this message with role '${role}' has one`,
      `messages[${misplaced.messageIndex}].content[${misplaced.partIndex}]`,
    )
  }
  if (found.length > 0 && !model.capabilities.includes('vision')) throw modelNotCompatible(model.id, 'image input')
  if (found.length > 1) {
    throw invalidRequest(`At most one image per request is supported; this request has ${found.length}`, found[1]!.param, 'too_many_images')
  }
  const stop = request.stop == null ? [] : typeof request.stop === 'string' ? [request.stop] : request.stop
  const png = found[0] && (await normalisedImage(found[0], model, images))
  return {
    request,
    stream: request.stream === true,
    includeUsage: request.stream_options?.include_usage === true,
    job: {
      type: 'chat',
      messages: withModelPreamble(
        model,
        request.messages.map((m) => toEngineMessage(m, png)),
      ),
      maxTokens,
      maxCompletionTokens: model.maxCompletionTokens,
      temperature: request.temperature ?? CHAT_DEFAULTS.temperature,
      topP: request.top_p ?? CHAT_DEFAULTS.topP,
      topK: request.top_k ?? CHAT_DEFAULTS.topK,
      presencePenalty: request.presence_penalty ?? 0,
      frequencyPenalty: request.frequency_penalty ?? 0,
      logitBias: request.logit_bias == null ? undefined : Object.fromEntries(Object.entries(request.logit_bias).map(([id, bias]) => [Number(id), bias])),
      stop,
      seed: request.seed ?? undefined,
      ...toolsOf(request),
      jsonSchema: jsonSchemaOf(request),
      reasoningEffort: request.reasoning_effort ?? undefined,
      thinkingBudgetTokens: request.thinking_budget_tokens ?? undefined,
      topLogprobs: request.logprobs === true ? (request.top_logprobs ?? 0) : undefined,
      ...(conversationKey ? { conversationKey } : {}),
      ...(request.speculative === false ? { speculative: false } : {}),
    },
  }
}

/**
 * What the model's Modelfile puts before every conversation, on every API: its system prompt,
 * unless the request sends its own, then its opening messages (`MESSAGE`), after the system prompt.
 */
function withModelPreamble(model: ModelRecord, messages: ChatMessage[]): ChatMessage[] {
  const info = model.ollama
  if (!info?.system && !info?.messages?.length) return messages
  const [first, ...rest] = messages
  const sent = first?.role === 'system' ? first : undefined
  const system: ChatMessage[] = sent ? [sent] : info.system ? [{ role: 'system', content: info.system }] : []
  const opening = (info.messages ?? []).map((m): ChatMessage =>
    m.role === 'assistant' ? { role: 'assistant', content: m.content } : { role: m.role === 'system' ? 'system' : 'user', content: m.content },
  )
  return [...system, ...opening, ...(sent ? rest : messages)]
}

/** The tools the model sees and whether it must call one. */
function toolsOf(request: ChatRequest): Pick<ChatJob, 'tools' | 'toolChoice' | 'parallelToolCalls'> {
  const tools: ToolDefinition[] = (request.tools ?? []).map((t) => ({
    type: 'function',
    function: {
      name: t.function.name,
      ...(t.function.description !== undefined ? { description: t.function.description } : {}),
      // No parameters means a function without arguments.
      parameters: t.function.parameters ?? { type: 'object', properties: {} },
    },
  }))
  const choice = request.tool_choice ?? 'auto'
  const parallelToolCalls = request.parallel_tool_calls ?? true
  if (typeof choice === 'object') return { tools, toolChoice: { function: choice.function.name }, parallelToolCalls }
  return { tools, toolChoice: tools.length ? choice : 'none', parallelToolCalls }
}

function jsonSchemaOf(request: ChatRequest): Record<string, unknown> | undefined {
  const format = request.response_format
  if (format?.type === 'json_object') return {}
  if (format?.type === 'json_schema') return format.json_schema.schema ?? {}
  return undefined
}

/** The request's image as PNG, shrunk to what the model's projector can use; `made` keeps it for the next plan of the same request. */
async function normalisedImage(image: ImageRef, model: ModelRecord, made?: Map<string, Buffer>): Promise<Buffer> {
  const known = made?.get(image.url)
  if (known) return known
  const input = model.projectorPath ? await readProjectorInput(model.projectorPath) : DEFAULT_PROJECTOR_INPUT
  try {
    const { png } = await normalizeImageDataUrl(image.url, { maxSide: input.maxSide })
    made?.set(image.url, png)
    return png
  } catch (e) {
    throw imageErrorAt(e, image.param)
  }
}

function imagesOf(request: ChatRequest): ImageRef[] {
  const found: ImageRef[] = []
  request.messages.forEach((m, messageIndex) => {
    if (m.content == null || typeof m.content === 'string') return
    m.content.forEach((p, partIndex) => {
      if (p.type !== 'image_url' || !('image_url' in p)) return
      const param = `messages[${messageIndex}].content[${partIndex}].image_url.url`
      found.push({ url: p.image_url.url, messageIndex, partIndex, param })
    })
  })
  return found
}

/** A request message as the engine takes it; `png` is the request's one image, normalised. */
function toEngineMessage(m: ChatRequestMessage, png: Buffer | undefined): ChatMessage {
  switch (m.role) {
    case 'assistant':
      return {
        role: 'assistant',
        content: m.content == null ? null : joinText(m.content),
        ...(m.reasoning_content ? { reasoning_content: m.reasoning_content } : {}),
        ...(m.tool_calls?.length ? { tool_calls: m.tool_calls } : {}),
      }
    case 'tool':
      return { role: 'tool', content: joinText(m.content), tool_call_id: m.tool_call_id }
    case 'system':
    case 'developer':
      return { role: 'system', content: joinText(m.content) }
    case 'user': {
      if (typeof m.content === 'string') return { role: 'user', content: m.content }
      const parts: ChatContentPart[] = m.content.map((p) => (p.type === 'text' ? { type: 'text', text: p.text } : { type: 'image', png: png! }))
      // Templates written for plain strings break on part arrays, so text-only content is joined.
      if (parts.every((p) => p.type === 'text')) return { role: 'user', content: parts.map((p) => p.text).join('\n') }
      return { role: 'user', content: parts }
    }
  }
}

/** Text-only content as one string (images outside user messages were refused by planChat). */
function joinText(content: string | ReadonlyArray<{ type: string; text?: string }>): string {
  return typeof content === 'string' ? content : content.map((p) => p.text ?? '').join('\n')
}
