/**
 * Anthropic's Messages request: its schema, and its conversion into the chat completions request
 * Hearth already checks and plans (roles, tools, images and context rules are the same ones).
 * Errors name Anthropic's fields (`messages[1].content[0].tool_use_id`).
 */
import { z } from 'zod'
import { invalidRequest, unsupportedParameter } from '../http-errors.ts'
import { functionName } from '../openai/chat-request-schema.ts'
import { parseChatRequest, type ChatRequest } from '../openai/chat-request.ts'
import { parseOrThrow } from '../openai/validation.ts'

const UNSUPPORTED: Readonly<Record<string, string>> = {
  container: 'code execution containers are not supported',
  mcp_servers: 'MCP servers are not supported; run the tools in your client',
  context_management: 'context management is not supported',
}

const base64Image = z.object({
  type: z.literal('base64'),
  media_type: z.enum(['image/jpeg', 'image/png', 'image/gif', 'image/webp']),
  data: z.string(),
})
const imageBlock = z.object({
  type: z.literal('image'),
  source: z.discriminatedUnion('type', [base64Image, z.object({ type: z.literal('url'), url: z.string() })]),
  cache_control: z.unknown().optional(),
})
const textBlock = z.object({ type: z.literal('text'), text: z.string(), cache_control: z.unknown().optional(), citations: z.unknown().optional() })
const toolUseBlock = z.object({ type: z.literal('tool_use'), id: z.string().min(1), name: z.string().min(1), input: z.record(z.string(), z.unknown()) })
const toolResultBlock = z.object({
  type: z.literal('tool_result'),
  tool_use_id: z.string().min(1),
  content: z.union([z.string(), z.array(z.discriminatedUnion('type', [textBlock, imageBlock]))]).optional(),
  is_error: z.boolean().optional(),
  cache_control: z.unknown().optional(),
})
const thinkingBlock = z.object({ type: z.literal('thinking'), thinking: z.string(), signature: z.string().optional() })
const redactedThinkingBlock = z.object({ type: z.literal('redacted_thinking'), data: z.string() })
const contentBlock = z.discriminatedUnion('type', [textBlock, imageBlock, toolUseBlock, toolResultBlock, thinkingBlock, redactedThinkingBlock])

const message = z.object({
  role: z.enum(['user', 'assistant']),
  content: z.union([z.string(), z.array(contentBlock)]),
})

const tool = z.object({
  name: functionName,
  description: z.string().optional(),
  input_schema: z.record(z.string(), z.unknown()),
  type: z.literal('custom').optional(),
  cache_control: z.unknown().optional(),
})

const toolChoice = z.discriminatedUnion('type', [
  z.object({ type: z.literal('auto'), disable_parallel_tool_use: z.boolean().optional() }),
  z.object({ type: z.literal('any'), disable_parallel_tool_use: z.boolean().optional() }),
  z.object({ type: z.literal('tool'), name: z.string(), disable_parallel_tool_use: z.boolean().optional() }),
  z.object({ type: z.literal('none') }),
])

export const messagesRequestSchema = z.object({
  model: z.string().min(1),
  max_tokens: z.int().min(1),
  messages: z.array(message).min(1),
  system: z.union([z.string(), z.array(textBlock)]).optional(),
  stop_sequences: z.array(z.string().min(1)).max(4).optional(),
  stream: z.boolean().optional(),
  temperature: z.number().min(0).max(1).optional(),
  top_p: z.number().min(0).max(1).optional(),
  top_k: z.int().min(1).max(100).optional(),
  tools: z.array(tool).max(128).optional(),
  tool_choice: toolChoice.optional(),
  thinking: z
    .discriminatedUnion('type', [
      z.object({ type: z.literal('enabled'), budget_tokens: z.int().min(1) }),
      z.object({ type: z.literal('disabled') }),
      z.object({ type: z.literal('adaptive') }),
    ])
    .optional(),
  metadata: z.object({ user_id: z.string().nullish() }).optional(),
  service_tier: z.string().optional(),
})

export type MessagesRequest = z.infer<typeof messagesRequestSchema>

export function parseMessagesRequest(body: unknown): MessagesRequest {
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const refused = Object.keys(body).find((key) => key in UNSUPPORTED)
    if (refused) throw unsupportedParameter(refused, UNSUPPORTED[refused]!)
  }
  return parseOrThrow(messagesRequestSchema, body)
}

type OpenAiMessage = Record<string, unknown>

/**
 * The same conversation as a chat completions request. Tool results, which Anthropic puts in a
 * user turn, become `tool` messages (before the turn's other content); tool uses become the
 * assistant's `tool_calls`; thinking in the history becomes `reasoning_content`.
 */
export function toChatRequest(request: MessagesRequest): ChatRequest {
  const messages: OpenAiMessage[] = []
  if (request.system !== undefined) {
    const text = typeof request.system === 'string' ? request.system : request.system.map((b) => b.text).join('\n')
    if (text) messages.push({ role: 'system', content: text })
  }
  request.messages.forEach((m, i) => {
    const blocks = typeof m.content === 'string' ? [{ type: 'text' as const, text: m.content }] : m.content
    if (m.role === 'assistant') {
      messages.push(assistantMessage(blocks, i))
      return
    }
    const parts: OpenAiMessage[] = []
    blocks.forEach((block, j) => {
      const where = `messages[${i}].content[${j}]`
      switch (block.type) {
        case 'tool_result':
          messages.push({ role: 'tool', tool_call_id: block.tool_use_id, content: toolResultText(block, where) })
          break
        case 'text':
          parts.push({ type: 'text', text: block.text })
          break
        case 'image':
          parts.push({ type: 'image_url', image_url: { url: imageUrl(block.source, where) } })
          break
        default:
          throw invalidRequest(`A user message cannot hold a '${block.type}' block`, `${where}.type`)
      }
    })
    if (parts.length > 0) messages.push({ role: 'user', content: parts.every((p) => p.type === 'text') ? parts.map((p) => p.text).join('\n') : parts })
  })

  const tools = request.tools?.map((t) => ({
    type: 'function',
    function: { name: t.name, ...(t.description !== undefined ? { description: t.description } : {}), parameters: t.input_schema },
  }))
  const choice = request.tool_choice
  const body: Record<string, unknown> = {
    model: request.model,
    messages,
    max_tokens: request.max_tokens,
    temperature: request.temperature,
    top_p: request.top_p,
    top_k: request.top_k,
    stop: request.stop_sequences?.length ? request.stop_sequences : undefined,
    // Anthropic's sampling default is temperature 1; Hearth's contract keeps its own (0) unless asked.
    ...(tools?.length ? { tools } : {}),
    ...(tools?.length && choice ? { tool_choice: openAiToolChoice(choice) } : {}),
    ...(tools?.length && choice && 'disable_parallel_tool_use' in choice && choice.disable_parallel_tool_use ? { parallel_tool_calls: false } : {}),
    ...(request.thinking?.type === 'disabled' ? { reasoning_effort: 'none' } : {}),
    ...(request.thinking?.type === 'enabled' ? { thinking_budget_tokens: request.thinking.budget_tokens } : {}),
  }
  return parseChatRequest(body)
}

function assistantMessage(blocks: z.infer<typeof contentBlock>[], i: number): OpenAiMessage {
  const text: string[] = []
  const calls: Array<Record<string, unknown>> = []
  let reasoning = ''
  blocks.forEach((block, j) => {
    switch (block.type) {
      case 'text':
        text.push(block.text)
        break
      case 'tool_use':
        calls.push({ id: block.id, type: 'function', function: { name: block.name, arguments: JSON.stringify(block.input) } })
        break
      case 'thinking':
        reasoning += block.thinking
        break
      case 'redacted_thinking':
        break // opaque to every model but the one that wrote it
      default:
        throw invalidRequest(`An assistant message cannot hold a '${block.type}' block`, `messages[${i}].content[${j}].type`)
    }
  })
  return {
    role: 'assistant',
    content: text.length ? text.join('') : calls.length ? null : '',
    ...(calls.length ? { tool_calls: calls } : {}),
    ...(reasoning ? { reasoning_content: reasoning } : {}),
  }
}

function toolResultText(block: z.infer<typeof toolResultBlock>, where: string): string {
  const content = block.content ?? ''
  const text =
    typeof content === 'string'
      ? content
      : content
          .map((part, k) => {
            if (part.type === 'image') throw invalidRequest('Images in tool results are not supported; send the image in a user text block', `${where}.content[${k}]`)
            return part.text
          })
          .join('\n')
  return block.is_error ? `Error: ${text}` : text
}

function imageUrl(source: z.infer<typeof imageBlock>['source'], where: string): string {
  if (source.type === 'url') throw invalidRequest('Images must be sent as base64 data; this server fetches nothing from the network', `${where}.source.type`)
  return `data:${source.media_type};base64,${source.data}`
}

function openAiToolChoice(choice: NonNullable<MessagesRequest['tool_choice']>): unknown {
  switch (choice.type) {
    case 'auto':
      return 'auto'
    case 'any':
      return 'required'
    case 'none':
      return 'none'
    case 'tool':
      return { type: 'function', function: { name: choice.name } }
  }
}
