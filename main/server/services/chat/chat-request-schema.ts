/**
 * The shape of a chat completions request, field by field, as OpenAI's API defines it: what Hearth
 * implements, and what it accepts and ignores because it cannot change the answer (the fields it
 * refuses by name are in field-decisions.ts). Checks that need more than one field (or the model)
 * live in chat-request.ts.
 */
import { z } from 'zod'

/**
 * Fields that never change what the model says: accepted. `prompt_cache_key` (and `user` where
 * it is missing) keeps a conversation on its engine slot; the rest are not used.
 */
const HARMLESS_FIELDS = {
  user: z.string().nullish(),
  metadata: z.record(z.string(), z.string()).nullish(),
  store: z.boolean().nullish(),
  service_tier: z.string().nullish(),
  prompt_cache_key: z.string().nullish(),
  prompt_cache_retention: z.string().nullish(),
  safety_identifier: z.string().nullish(),
  prompt_cache_options: z.looseObject({}).nullish(),
}

/** OpenAI's rule for function and schema names. */
export const functionName = z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'must be 1 to 64 letters, digits, underscores or dashes')

const textPart = z.object({ type: z.literal('text'), text: z.string() })
const imagePart = z.object({
  type: z.literal('image_url'),
  // An empty url is an invalid image (400 invalid_image), not a schema error.
  image_url: z.object({ url: z.string(), detail: z.enum(['auto', 'low', 'high']).optional() }),
})
/** A document (`/v1/files` id, or the file itself as base64), read into text before the model sees it (documents/document-inputs.ts). */
const filePart = z.object({
  type: z.literal('file'),
  file: z.object({ file_id: z.string().min(1).optional(), file_data: z.string().min(1).optional(), filename: z.string().max(255).optional() }),
})
const contentPart = z.discriminatedUnion('type', [textPart, imagePart, filePart])
const textContent = z.union([z.string(), z.array(textPart).min(1)])
// Images are parsed in every role so the answer can say they belong in a user message (chat-request.ts).
const anyContent = z.union([z.string(), z.array(contentPart).min(1)])

const toolCall = z.object({
  id: z.string().min(1),
  type: z.literal('function'),
  function: z.object({ name: z.string().min(1), arguments: z.string() }),
})

const systemMessage = z.object({ role: z.literal('system'), content: anyContent, name: z.string().optional() })
const developerMessage = z.object({ role: z.literal('developer'), content: anyContent, name: z.string().optional() })
const userMessage = z.object({
  role: z.literal('user'),
  content: z.union([z.string(), z.array(contentPart).min(1)]),
  name: z.string().optional(),
})
const assistantMessage = z.object({
  role: z.literal('assistant'),
  content: anyContent.nullish(),
  name: z.string().optional(),
  tool_calls: z.array(toolCall).min(1).nullish(),
  refusal: z.string().nullish(),
  /** What the model thought before this answer (llama.cpp's and DeepSeek's field), for templates that show it again. */
  reasoning_content: z.string().nullish(),
})
const toolMessage = z.object({ role: z.literal('tool'), content: textContent, tool_call_id: z.string().min(1) })

export const chatMessage = z.discriminatedUnion('role', [systemMessage, developerMessage, userMessage, assistantMessage, toolMessage])

const jsonSchemaObject = z.record(z.string(), z.unknown())

const tool = z.object({
  type: z.literal('function'),
  function: z.object({
    name: functionName,
    description: z.string().optional(),
    parameters: jsonSchemaObject.optional(),
    strict: z.boolean().nullish(),
  }),
})

const toolChoice = z.union([z.enum(['none', 'auto', 'required']), z.object({ type: z.literal('function'), function: z.object({ name: z.string() }) })])

const responseFormat = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text') }),
  z.object({ type: z.literal('json_object') }),
  z.object({
    type: z.literal('json_schema'),
    json_schema: z.object({
      name: functionName,
      description: z.string().optional(),
      schema: jsonSchemaObject.optional(),
      strict: z.boolean().nullish(),
    }),
  }),
])

const tokenCount = z.int().min(1).nullish()
const penalty = z.number().min(-2).max(2).nullish()

/** The sampling fields chat and (legacy) completions share, with the same limits. */
export const samplingShape = {
  temperature: z.number().min(0).max(1).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  top_k: z.int().min(1).max(100).nullish(),
  presence_penalty: penalty,
  frequency_penalty: penalty,
  logit_bias: z.record(z.string().regex(/^\d+$/, 'keys must be token ids'), z.number().min(-100).max(100)).nullish(),
  stop: z.union([z.string().min(1), z.array(z.string().min(1)).max(4)]).nullish(),
  seed: z.int().nullish(),
}

// Other fields are ignored, as the contract says (clients send many of their own).
export const chatRequestSchema = z.object({
  model: z.string().min(1),
  messages: z.array(chatMessage).min(1),
  max_tokens: tokenCount,
  max_completion_tokens: tokenCount,
  ...samplingShape,
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().optional(), include_obfuscation: z.boolean().optional() }).nullish(),
  n: z.literal(1, { message: 'only n = 1 is supported' }).nullish(),
  tools: z.array(tool).max(128).nullish(),
  tool_choice: toolChoice.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  response_format: responseFormat.nullish(),
  reasoning_effort: z.enum(['none', 'minimal', 'low', 'medium', 'high', 'xhigh']).nullish(),
  // Not OpenAI's: llama-server's name for a cap on thinking (Anthropic's `thinking.budget_tokens`).
  thinking_budget_tokens: z.int().min(0).max(1_000_000).nullish(),
  // Hearth's own: false decodes every token alone (no speculative decoding); the answer is the same.
  speculative: z.boolean().nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: z.int().min(0).max(20).nullish(),
  ...HARMLESS_FIELDS,
})

export type ChatRequest = z.infer<typeof chatRequestSchema>
export type ChatRequestMessage = ChatRequest['messages'][number]
