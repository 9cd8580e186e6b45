/**
 * Anthropic's Messages request: its schema and what Hearth does with each field (see
 * docs/agents.md, "Which fields are honoured"). Errors name Anthropic's fields
 * (`messages[1].content[0].tool_use_id`). The conversion into a chat request lives in
 * messages-conversion.ts.
 */
import { z } from 'zod'
import { refuseRefusedFields } from '../field-decisions.ts'
import { functionName } from '../../services/chat/chat-request-schema.ts'
import { parseOrThrow } from '../../services/chat/validation.ts'

/**
 * Tool types Anthropic runs on its own servers. Hearth cannot run them: they are left out of what
 * the model sees, and the answer says so in its `Warning` header.
 */
export const HOSTED_TOOL_TYPES = /^(web_search|web_fetch|code_execution|tool_search_tool_(regex|bm25)|mcp_toolset)(_\d+)?$/

const cacheControl = z.unknown().optional()

const base64Image = z.object({
  type: z.literal('base64'),
  media_type: z.enum(['image/jpeg', 'image/png', 'image/gif', 'image/webp']),
  data: z.string(),
})
const imageBlock = z.object({
  type: z.literal('image'),
  source: z.discriminatedUnion('type', [
    base64Image,
    z.object({ type: z.literal('url'), url: z.string() }),
    z.object({ type: z.literal('file'), file_id: z.string() }),
  ]),
  cache_control: cacheControl,
})
const textBlock = z.object({ type: z.literal('text'), text: z.string(), cache_control: cacheControl, citations: z.unknown().optional() })
/**
 * A document: plain text or text blocks are read as text; a PDF (base64), a file uploaded to
 * `/v1/files` (`file_id`) and any document whose citations are asked for go through the documents
 * pipeline (messages-conversion.ts); URLs are refused there.
 */
const documentBlock = z.object({
  type: z.literal('document'),
  source: z.looseObject({
    type: z.string(),
    media_type: z.string().optional(),
    data: z.string().optional(),
    content: z.unknown().optional(),
    file_id: z.string().optional(),
  }),
  title: z.string().nullish(),
  context: z.string().nullish(),
  cache_control: cacheControl,
  citations: z.unknown().optional(),
})
const searchResultBlock = z.object({
  type: z.literal('search_result'),
  source: z.string(),
  title: z.string(),
  content: z.array(textBlock),
  cache_control: cacheControl,
  citations: z.unknown().optional(),
})
/** What a tool search returned: the named deferred tool is loaded for the model from then on. */
const toolReferenceBlock = z.object({ type: z.literal('tool_reference'), tool_name: z.string().min(1), cache_control: cacheControl })
const toolUseBlock = z.object({
  type: z.literal('tool_use'),
  id: z.string().min(1),
  name: z.string().min(1),
  input: z.unknown(),
  cache_control: cacheControl,
  caller: z.unknown().optional(),
})
export const toolResultContent = z.discriminatedUnion('type', [textBlock, imageBlock, documentBlock, searchResultBlock, toolReferenceBlock])
const toolResultBlock = z.object({
  type: z.literal('tool_result'),
  tool_use_id: z.string().min(1),
  content: z.union([z.string(), z.array(toolResultContent)]).optional(),
  is_error: z.boolean().optional(),
  cache_control: cacheControl,
})
/** A call Hearth ran on an MCP server (Anthropic's MCP connector), as the answer gave it and the client sends it back. */
const mcpToolUseBlock = z.object({
  type: z.literal('mcp_tool_use'),
  id: z.string().min(1),
  name: z.string().min(1),
  server_name: z.string().min(1),
  input: z.unknown(),
  cache_control: cacheControl,
})
const mcpToolResultBlock = z.object({
  type: z.literal('mcp_tool_result'),
  tool_use_id: z.string().min(1),
  is_error: z.boolean().optional(),
  content: z.union([z.string(), z.array(textBlock)]).optional(),
  cache_control: cacheControl,
})
const thinkingBlock = z.object({ type: z.literal('thinking'), thinking: z.string(), signature: z.string().optional(), cache_control: cacheControl })
const redactedThinkingBlock = z.object({ type: z.literal('redacted_thinking'), data: z.string(), cache_control: cacheControl })
export const contentBlock = z.discriminatedUnion('type', [
  textBlock,
  imageBlock,
  documentBlock,
  searchResultBlock,
  toolUseBlock,
  toolResultBlock,
  thinkingBlock,
  redactedThinkingBlock,
  mcpToolUseBlock,
  mcpToolResultBlock,
])
export type ContentBlock = z.infer<typeof contentBlock>

const message = z.object({
  // Claude Code puts `system` messages between turns; they stay where they are as far as the template allows.
  role: z.enum(['user', 'assistant', 'system']),
  content: z.union([z.string(), z.array(contentBlock)]),
})
export type AnthropicMessage = z.infer<typeof message>

const customTool = z.object({
  name: functionName,
  description: z.string().optional(),
  input_schema: z.record(z.string(), z.unknown()),
  type: z.literal('custom').optional(),
  cache_control: cacheControl,
  /** Loaded only once a tool search names it (a `tool_reference` in a tool result). */
  defer_loading: z.boolean().optional(),
  strict: z.boolean().optional(),
  input_examples: z.array(z.unknown()).optional(),
  eager_input_streaming: z.boolean().optional(),
})
/** Anthropic's own tool types (`web_search_20250305`, `bash_20250124`, …): judged by type in the conversion. */
const typedTool = z.looseObject({ type: z.string().min(1), name: z.string().min(1) })
const tool = z.union([customTool, typedTool])
export type AnthropicTool = z.infer<typeof tool>

const toolChoice = z.discriminatedUnion('type', [
  z.object({ type: z.literal('auto'), disable_parallel_tool_use: z.boolean().optional() }),
  z.object({ type: z.literal('any'), disable_parallel_tool_use: z.boolean().optional() }),
  z.object({ type: z.literal('tool'), name: z.string(), disable_parallel_tool_use: z.boolean().optional() }),
  z.object({ type: z.literal('none') }),
])

/** `omitted`: the thinking text is left out of the answer (its signature still carries it, sealed). */
const thinkingDisplay = z.enum(['summarized', 'omitted']).optional()

const jsonSchemaFormat = z.object({ type: z.literal('json_schema'), schema: z.record(z.string(), z.unknown()) })

const clearThinking = z.object({
  type: z.literal('clear_thinking_20251015'),
  keep: z.union([z.literal('all'), z.object({ type: z.literal('thinking_turns'), value: z.int().min(0) })]).optional(),
})
const tokenCount = z.object({ type: z.literal('input_tokens'), value: z.int().min(0) })
const clearToolUses = z.object({
  type: z.literal('clear_tool_uses_20250919'),
  trigger: z.union([tokenCount, z.object({ type: z.literal('tool_uses'), value: z.int().min(0) })]).optional(),
  keep: z.object({ type: z.literal('tool_uses'), value: z.int().min(0) }).optional(),
  clear_at_least: tokenCount.optional(),
  exclude_tools: z.array(z.string()).optional(),
  clear_tool_inputs: z.boolean().optional(),
})
export type ContextEdit = z.infer<typeof clearThinking> | z.infer<typeof clearToolUses>

/**
 * Anthropic's MCP connector: a server the request names, which Hearth runs the tools of. It must be
 * one the user configured (by `name`); `url` must be the one configured for it, and credentials
 * come from the user's settings, never from the request.
 */
const mcpServer = z.looseObject({
  type: z.literal('url'),
  url: z.string().min(1),
  name: z.string().min(1),
  authorization_token: z.string().nullish(),
  tool_configuration: z.object({ enabled: z.boolean().nullish(), allowed_tools: z.array(z.string()).nullish() }).nullish(),
})
export type AnthropicMcpServer = z.infer<typeof mcpServer>

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
  // Hearth's own: false decodes every token alone (no speculative decoding).
  speculative: z.boolean().optional(),
  tools: z.array(tool).max(512).optional(),
  mcp_servers: z.array(mcpServer).max(20).optional(),
  tool_choice: toolChoice.optional(),
  thinking: z
    .discriminatedUnion('type', [
      z.object({ type: z.literal('enabled'), budget_tokens: z.int().min(1), display: thinkingDisplay }),
      z.object({ type: z.literal('disabled') }),
      z.object({ type: z.literal('adaptive'), display: thinkingDisplay }),
    ])
    .optional(),
  output_config: z
    .object({
      effort: z.enum(['low', 'medium', 'high', 'xhigh', 'max']).optional(),
      format: jsonSchemaFormat.nullish(),
    })
    .optional(),
  /** The structured-outputs beta's first name for `output_config.format`. */
  output_format: jsonSchemaFormat.nullish(),
  context_management: z.object({ edits: z.array(z.discriminatedUnion('type', [clearThinking, clearToolUses])).optional() }).nullish(),
  metadata: z.object({ user_id: z.string().nullish() }).optional(),
  service_tier: z.string().optional(),
  inference_geo: z.string().nullish(),
  cache_control: cacheControl,
  speed: z.enum(['standard', 'fast']).nullish(),
  diagnostics: z.looseObject({ previous_message_id: z.string().nullish() }).nullish(),
})

export type MessagesRequest = z.infer<typeof messagesRequestSchema>

export function parseMessagesRequest(body: unknown): MessagesRequest {
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    refuseRefusedFields('messages', body as Record<string, unknown>)
  }
  return parseOrThrow(messagesRequestSchema, body)
}
