/**
 * OpenAI's Responses request (`POST /v1/responses`): its schema, its input items, and their
 * conversion (after any earlier response's items) into the chat completions request Hearth already
 * checks and plans. Errors name the Responses fields (`input[2].call_id`).
 */
import { z } from 'zod'
import { invalidRequest, unsupportedParameter } from '../http-errors.ts'
import { functionName } from '../openai/chat-request-schema.ts'
import { parseChatRequest, type ChatRequest } from '../openai/chat-request.ts'
import { parseOrThrow } from '../openai/validation.ts'

const UNSUPPORTED: Readonly<Record<string, string>> = {
  background: 'background responses are not supported; stream instead',
  conversation: "conversations are not supported; continue with 'previous_response_id'",
  prompt: 'stored prompt templates are not supported',
  include: "'include' is not supported",
  top_logprobs: "'top_logprobs' is not supported on this route; use /v1/chat/completions",
}

const inputText = z.object({ type: z.literal('input_text'), text: z.string() })
const outputText = z.object({ type: z.literal('output_text'), text: z.string(), annotations: z.array(z.unknown()).optional() })
const inputImage = z.object({ type: z.literal('input_image'), image_url: z.string(), detail: z.enum(['auto', 'low', 'high']).optional() })
const refusal = z.object({ type: z.literal('refusal'), refusal: z.string() })
const contentPart = z.discriminatedUnion('type', [inputText, outputText, inputImage, refusal])

const messageItem = z.object({
  type: z.literal('message').optional(),
  id: z.string().optional(),
  status: z.string().optional(),
  role: z.enum(['user', 'assistant', 'system', 'developer']),
  content: z.union([z.string(), z.array(contentPart)]),
})
const functionCallItem = z.object({
  type: z.literal('function_call'),
  id: z.string().optional(),
  call_id: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
  status: z.string().optional(),
})
const functionCallOutputItem = z.object({
  type: z.literal('function_call_output'),
  id: z.string().optional(),
  call_id: z.string().min(1),
  output: z.union([z.string(), z.array(z.union([inputText, outputText]))]),
  status: z.string().optional(),
})
const reasoningItem = z.object({
  type: z.literal('reasoning'),
  id: z.string().optional(),
  summary: z.array(z.object({ type: z.string(), text: z.string() })).optional(),
  content: z.array(z.object({ type: z.string(), text: z.string() })).optional(),
  encrypted_content: z.string().nullish(),
})

export const inputItem = z.union([functionCallItem, functionCallOutputItem, reasoningItem, messageItem])
export type InputItem = z.infer<typeof inputItem>

const tool = z.object({
  type: z.literal('function'),
  name: functionName,
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
})

const format = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text') }),
  z.object({ type: z.literal('json_object') }),
  z.object({ type: z.literal('json_schema'), name: functionName, schema: z.record(z.string(), z.unknown()), description: z.string().optional(), strict: z.boolean().nullish() }),
])

export const responsesRequestSchema = z.object({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(inputItem).min(1)]),
  instructions: z.string().nullish(),
  tools: z.array(tool).max(128).nullish(),
  tool_choice: z.union([z.enum(['none', 'auto', 'required']), z.object({ type: z.literal('function'), name: z.string() })]).nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  text: z.object({ format: format.optional(), verbosity: z.string().optional() }).nullish(),
  max_output_tokens: z.int().min(1).nullish(),
  temperature: z.number().min(0).max(1).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  stream: z.boolean().nullish(),
  store: z.boolean().nullish(),
  previous_response_id: z.string().nullish(),
  reasoning: z.object({ effort: z.enum(['none', 'minimal', 'low', 'medium', 'high', 'xhigh']).nullish(), summary: z.string().nullish() }).nullish(),
  metadata: z.record(z.string(), z.string()).nullish(),
  user: z.string().nullish(),
  safety_identifier: z.string().nullish(),
  prompt_cache_key: z.string().nullish(),
  service_tier: z.string().nullish(),
  truncation: z.enum(['disabled', 'auto']).nullish(),
})

export type ResponsesRequest = z.infer<typeof responsesRequestSchema>

export function parseResponsesRequest(body: unknown): ResponsesRequest {
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const refused = Object.keys(body).find((key) => key in UNSUPPORTED && (body as Record<string, unknown>)[key] != null)
    if (refused) throw unsupportedParameter(refused, UNSUPPORTED[refused]!)
    const tools = (body as { tools?: unknown }).tools
    if (Array.isArray(tools)) {
      const index = tools.findIndex((t) => t !== null && typeof t === 'object' && (t as { type?: unknown }).type !== 'function')
      if (index >= 0) throw unsupportedParameter(`tools[${index}].type`, 'only function tools are supported (no hosted tools such as web search or file search)')
    }
  }
  return parseOrThrow(responsesRequestSchema, body)
}

/** The request's input as items: a string is one user message. */
export function inputItemsOf(request: ResponsesRequest): InputItem[] {
  return typeof request.input === 'string' ? [{ role: 'user', content: request.input }] : request.input
}

/**
 * The conversation as a chat completions request: `instructions` as the system message, then the
 * earlier turns' items (from `previous_response_id`), then this request's input. Consecutive
 * function calls join one assistant message; thinking joins the assistant message after it.
 */
export function toChatRequest(request: ResponsesRequest, earlier: readonly InputItem[]): ChatRequest {
  const messages: Array<Record<string, unknown>> = []
  if (request.instructions) messages.push({ role: 'system', content: request.instructions })
  let assistant: { role: 'assistant'; content: string | null; tool_calls?: unknown[]; reasoning_content?: string } | undefined
  let reasoning = ''
  const flush = () => {
    if (assistant) messages.push(assistant)
    assistant = undefined
  }
  const items = [...earlier, ...inputItemsOf(request)]
  const offset = earlier.length
  items.forEach((item, n) => {
    const where = `input[${n - offset}]`
    if ('type' in item && item.type === 'reasoning') {
      reasoning += (item.content ?? item.summary ?? []).map((p) => p.text).join('')
      return
    }
    if ('type' in item && item.type === 'function_call') {
      assistant ??= { role: 'assistant', content: null, ...(reasoning ? { reasoning_content: reasoning } : {}) }
      reasoning = ''
      ;(assistant.tool_calls ??= []).push({ id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } })
      return
    }
    if ('type' in item && item.type === 'function_call_output') {
      flush()
      const output = typeof item.output === 'string' ? item.output : item.output.map((p) => p.text).join('\n')
      messages.push({ role: 'tool', tool_call_id: item.call_id, content: output })
      return
    }
    const message = item as z.infer<typeof messageItem>
    flush()
    if (message.role === 'assistant') {
      const text = typeof message.content === 'string' ? message.content : message.content.map((p) => ('text' in p ? p.text : 'refusal' in p ? p.refusal : '')).join('')
      assistant = { role: 'assistant', content: text, ...(reasoning ? { reasoning_content: reasoning } : {}) }
      reasoning = ''
      return
    }
    messages.push({ role: message.role, content: chatContent(message.content, where) })
  })
  flush()

  const tools = request.tools?.map((t) => ({
    type: 'function',
    function: { name: t.name, ...(t.description ? { description: t.description } : {}), ...(t.parameters ? { parameters: t.parameters } : {}) },
  }))
  const choice = request.tool_choice
  const textFormat = request.text?.format
  return parseChatRequest({
    model: request.model,
    messages,
    max_tokens: request.max_output_tokens ?? undefined,
    temperature: request.temperature ?? undefined,
    top_p: request.top_p ?? undefined,
    ...(tools?.length ? { tools } : {}),
    ...(tools?.length && choice ? { tool_choice: typeof choice === 'string' ? choice : { type: 'function', function: { name: choice.name } } } : {}),
    ...(tools?.length && request.parallel_tool_calls != null ? { parallel_tool_calls: request.parallel_tool_calls } : {}),
    ...(textFormat?.type === 'json_object' ? { response_format: { type: 'json_object' } } : {}),
    ...(textFormat?.type === 'json_schema' ? { response_format: { type: 'json_schema', json_schema: { name: textFormat.name, schema: textFormat.schema } } } : {}),
    ...(request.reasoning?.effort ? { reasoning_effort: request.reasoning.effort } : {}),
  })
}

function chatContent(content: string | z.infer<typeof contentPart>[], where: string): unknown {
  if (typeof content === 'string') return content
  return content.map((part, k) => {
    switch (part.type) {
      case 'input_text':
      case 'output_text':
        return { type: 'text', text: part.text }
      case 'input_image':
        return { type: 'image_url', image_url: { url: part.image_url } }
      default:
        throw invalidRequest(`A '${part.type}' part cannot be input`, `${where}.content[${k}].type`)
    }
  })
}
