/**
 * Ollama's chat, generate and embed requests, checked and turned into Hearth's engine jobs, on
 * the same path as chat completions (planChat: the same checks, images, tools and schemas). No
 * HTTP here. What each field becomes is field-decisions.ts's Ollama table.
 */
import { z } from 'zod'
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import type { ChatJob, CompleteJob, EmbedJob } from '../../../../engines/engine-jobs.ts'
import { ollamaSetAsideWarnings, refuseOllamaFields, type OllamaRequestKind } from '../field-decisions.ts'
import { checkChatRequest, planChat, type ChatRequest } from '../../services/chat/chat-request.ts'
import type { ChatRequestMessage } from '../../services/chat/chat-request-schema.ts'
import { planEmbeddings, parseEmbeddingsRequest } from '../openai/embeddings-request.ts'
import { Notices } from '../../services/pipeline/request-notices.ts'
import { OllamaError } from './ollama-errors.ts'
import { keepAliveMs } from './ollama-keep-alive.ts'
import { ollamaEmbedOptions, ollamaSampling } from './ollama-options.ts'

const options = z.record(z.string(), z.unknown()).nullish()
const keepAlive = z.union([z.string(), z.number()]).nullish()
const think = z.union([z.boolean(), z.enum(['low', 'medium', 'high', 'max'])]).nullish()
const format = z.union([z.string(), z.record(z.string(), z.unknown())]).nullish()
const images = z.array(z.string()).nullish()

const toolCall = z.object({
  id: z.string().nullish(),
  function: z.object({
    index: z.number().nullish(),
    name: z.string().min(1),
    // Ollama sends an object; some clients a JSON text.
    arguments: z.union([z.record(z.string(), z.unknown()), z.string()]).nullish(),
  }),
})

const message = z.object({
  role: z
    .string()
    .transform((r) => r.toLowerCase())
    .pipe(z.enum(['system', 'user', 'assistant', 'tool'])),
  content: z.string().nullish(),
  thinking: z.string().nullish(),
  images,
  tool_calls: z.array(toolCall).nullish(),
  tool_name: z.string().nullish(),
  tool_call_id: z.string().nullish(),
})

const tool = z.object({
  type: z.literal('function').default('function'),
  function: z.object({
    name: z.string().min(1),
    description: z.string().nullish(),
    parameters: z.record(z.string(), z.unknown()).nullish(),
  }),
})

/** Where a client puts sampling at the top level (the AI SDK's provider), read as the options it means. */
const topLevelSampling = {
  temperature: z.number().nullish(),
  top_p: z.number().nullish(),
  max_output_tokens: z.int().nullish(),
}

const toolChoice = z.union([z.enum(['none', 'auto', 'required']), z.object({ type: z.literal('function'), function: z.object({ name: z.string() }) })])

export const ollamaChatSchema = z.looseObject({
  model: z.string(),
  messages: z.array(message).nullish(),
  stream: z.boolean().nullish(),
  format,
  tools: z.array(tool).nullish(),
  tool_choice: toolChoice.nullish(),
  ...topLevelSampling,
  think,
  options,
  keep_alive: keepAlive,
  logprobs: z.boolean().nullish(),
  top_logprobs: z.int().min(0).max(20).nullish(),
})

export const ollamaGenerateSchema = z.looseObject({
  model: z.string(),
  prompt: z.string().nullish(),
  suffix: z.string().nullish(),
  system: z.string().nullish(),
  images,
  format,
  stream: z.boolean().nullish(),
  raw: z.boolean().nullish(),
  think,
  options,
  keep_alive: keepAlive,
  logprobs: z.boolean().nullish(),
  top_logprobs: z.int().min(0).max(20).nullish(),
  stop: z.union([z.string(), z.array(z.string())]).nullish(),
})

export const ollamaEmbedSchema = z.looseObject({
  model: z.string(),
  input: z.unknown(),
  truncate: z.boolean().nullish(),
  dimensions: z.int().min(0).nullish(),
  options,
  keep_alive: keepAlive,
})

export type OllamaChatBody = z.infer<typeof ollamaChatSchema>
export type OllamaGenerateBody = z.infer<typeof ollamaGenerateSchema>

/** What a chat or generate request asks of the engine, and how to answer it. */
export interface OllamaPlan {
  job: ChatJob | CompleteJob
  stream: boolean
  /** Undefined: the model's idle time to live. */
  keepAliveMs: number | undefined
  /** The client asked for thinking apart (or said nothing, on a model that thinks). */
  showThinking: boolean
}

/** The body checked against its schema, as Ollama would answer a bad one: 400 with the reason. */
export function parseOllamaBody<T extends z.ZodType>(kind: OllamaRequestKind, schema: T, body: unknown, notices: Notices): z.infer<T> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new OllamaError(400, 'the request body must be a JSON object')
  refuseOllamaFields(kind, body as Record<string, unknown>)
  for (const warning of ollamaSetAsideWarnings(kind, body as Record<string, unknown>)) notices.add(warning)
  const parsed = schema.safeParse(body)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!
    throw new OllamaError(400, `invalid ${issue.path.join('.') || 'request'}: ${issue.message}`)
  }
  return parsed.data
}

export async function planOllamaChat(body: OllamaChatBody, model: ModelRecord, notices: Notices, conversationKey?: string): Promise<OllamaPlan> {
  // The Modelfile's system prompt and opening messages come in planChat, as on every API.
  return planOllamaConversation(body, body.tools ?? [], model, toChatMessages(body.messages ?? []), notices, conversationKey)
}

/**
 * `/api/generate`: a prompt in the model's template (its system prompt before it), or with `raw`
 * the prompt as it is, or with `suffix` the gap between the two filled in.
 */
export async function planOllamaGenerate(body: OllamaGenerateBody, model: ModelRecord, notices: Notices): Promise<OllamaPlan> {
  const prompt = body.prompt ?? ''
  if (body.raw === true || (body.suffix ?? '') !== '') {
    if (body.images?.length) throw new OllamaError(400, "images need the model's chat template: leave out 'raw' and 'suffix'")
    if (body.format) throw new OllamaError(400, "'format' needs the model's chat template: leave out 'raw' and 'suffix'")
    if (body.logprobs) throw new OllamaError(400, "'logprobs' is not supported with 'raw' or 'suffix'")
    if (!model.capabilities.includes('chat')) throw new OllamaError(400, `"${model.id}" does not support generate`)
    const { sampling, maxTokens } = ollamaSampling(requestOptions(body), model.ollama?.parameters, notices)
    const job: CompleteJob = {
      type: 'complete',
      prompt,
      suffix: body.suffix || undefined,
      maxTokens: Math.min(maxTokens ?? model.maxCompletionTokens, model.maxCompletionTokens),
      ...sampling,
      logprobs: undefined,
    }
    return { job, stream: body.stream !== false, keepAliveMs: keepAliveMs(body.keep_alive), showThinking: false }
  }
  const system = body.system
  const user: ChatRequestMessage = { role: 'user', content: withImages(prompt, body.images ?? [], 'images') }
  const messages: ChatRequestMessage[] = system ? [{ role: 'system', content: system }, user] : [user]
  return planOllamaConversation(body, [], model, messages, notices)
}

async function planOllamaConversation(
  body: OllamaChatBody | OllamaGenerateBody,
  tools: NonNullable<OllamaChatBody['tools']>,
  model: ModelRecord,
  messages: ChatRequestMessage[],
  notices: Notices,
  conversationKey?: string,
): Promise<OllamaPlan> {
  if (!model.capabilities.includes('chat')) throw new OllamaError(400, `"${model.id}" does not support chat`)
  if (
    model.remote &&
    body.options &&
    Object.keys(body.options).some((k) => ['min_p', 'typical_p', 'repeat_penalty', 'repeat_last_n', 'mirostat'].includes(k))
  ) {
    throw new OllamaError(400, `"${model.id}" runs on another machine, which takes no min_p, typical_p, repeat or mirostat options`)
  }
  const { sampling, maxTokens } = ollamaSampling(requestOptions(body), model.ollama?.parameters, notices)
  const toolChoice = 'tool_choice' in body && tools.length > 0 ? body.tool_choice : undefined
  const chat: ChatRequest = {
    model: model.id,
    messages,
    ...(maxTokens !== undefined ? { max_tokens: maxTokens } : {}),
    ...(tools.length > 0
      ? {
          tools: tools.map((t) => ({
            type: 'function' as const,
            function: {
              name: t.function.name,
              ...(t.function.description ? { description: t.function.description } : {}),
              ...(t.function.parameters ? { parameters: t.function.parameters } : {}),
            },
          })),
        }
      : {}),
    ...(toolChoice ? { tool_choice: toolChoice as ChatRequest['tool_choice'] } : {}),
    ...responseFormatOf(body.format),
    ...reasoningOf(body.think),
    ...(body.logprobs ? { logprobs: true, top_logprobs: body.top_logprobs ?? 0 } : {}),
  }
  // Hearth's own checks answer in Ollama's shape too: the error's message is its `error`.
  const plan = await planChat(checkChatRequest(chat, notices), model, conversationKey)
  return {
    job: { ...plan.job, ...sampling },
    stream: body.stream !== false,
    keepAliveMs: keepAliveMs(body.keep_alive),
    showThinking: body.think !== false,
  }
}

/** The request's options, with what a client put at the top level where `options` does not say it. */
function requestOptions(body: OllamaChatBody | OllamaGenerateBody): Record<string, unknown> | undefined {
  const top: Record<string, unknown> = {}
  if ('temperature' in body && body.temperature != null) top.temperature = body.temperature
  if ('top_p' in body && body.top_p != null) top.top_p = body.top_p
  if ('max_output_tokens' in body && body.max_output_tokens != null) top.num_predict = body.max_output_tokens
  if ('stop' in body && body.stop != null) top.stop = body.stop
  if (Object.keys(top).length === 0) return body.options ?? undefined
  return { ...top, ...(body.options ?? {}) }
}

function responseFormatOf(format: OllamaChatBody['format']): Pick<ChatRequest, 'response_format'> {
  if (format == null || format === '') return {}
  if (format === 'json') return { response_format: { type: 'json_object' } }
  if (typeof format === 'string') throw new OllamaError(400, `invalid format: "${format}" (expected "json" or a JSON schema)`)
  return { response_format: { type: 'json_schema', json_schema: { name: 'output', schema: format } } }
}

/** `think`: false turns thinking off, a level sets its effort ("max" is Hearth's "xhigh"), true leaves the model's own. */
function reasoningOf(value: OllamaChatBody['think']): Pick<ChatRequest, 'reasoning_effort'> {
  if (value === false) return { reasoning_effort: 'none' }
  if (value === 'max') return { reasoning_effort: 'xhigh' }
  if (typeof value === 'string') return { reasoning_effort: value }
  return {}
}

type OllamaMessage = z.infer<typeof message>

/**
 * Ollama's messages as chat completions' messages. Its tool calls need no ids and its tool results
 * may name only the tool: each result answers the oldest open call of that name (or the oldest
 * open call), and calls without an id get one, so the template sees them paired.
 */
export function toChatMessages(messages: readonly OllamaMessage[]): ChatRequestMessage[] {
  const open: Array<{ id: string; name: string }> = []
  return messages.map((m, i): ChatRequestMessage => {
    const content = m.content ?? ''
    switch (m.role) {
      case 'system':
        if (m.images?.length) throw new OllamaError(400, `messages[${i}]: images are only allowed in messages with role 'user'`)
        return { role: 'system', content }
      case 'user':
        return { role: 'user', content: withImages(content, m.images ?? [], `messages[${i}].images`) }
      case 'assistant': {
        if (m.images?.length) throw new OllamaError(400, `messages[${i}]: images are only allowed in messages with role 'user'`)
        const calls = (m.tool_calls ?? []).map((call, j) => {
          const id = call.id || `call_${i}_${j}`
          open.push({ id, name: call.function.name })
          const args = call.function.arguments
          return {
            id,
            type: 'function' as const,
            function: { name: call.function.name, arguments: typeof args === 'string' ? args : JSON.stringify(args ?? {}) },
          }
        })
        return {
          role: 'assistant',
          // An answer that only calls tools says nothing.
          content: content === '' && calls.length > 0 ? null : content,
          ...(m.thinking ? { reasoning_content: m.thinking } : {}),
          ...(calls.length > 0 ? { tool_calls: calls } : {}),
        }
      }
      case 'tool': {
        const at =
          [open.findIndex((c) => c.id === m.tool_call_id), open.findIndex((c) => c.name === m.tool_name), open.length > 0 ? 0 : -1].find((k) => k >= 0) ?? -1
        if (at < 0) throw new OllamaError(400, `messages[${i}]: a message with role 'tool' must follow an assistant message with 'tool_calls'`)
        const [call] = open.splice(at, 1)
        return { role: 'tool', content, tool_call_id: call!.id }
      }
    }
  })
}

/** Text with Ollama's base64 images (bare, or as data URLs) after it, as chat completions' parts. */
function withImages(text: string, images: readonly string[], param: string): Extract<ChatRequestMessage, { role: 'user' }>['content'] {
  if (images.length === 0) return text
  return [
    ...(text ? [{ type: 'text' as const, text }] : []),
    ...images.map((image, k) => {
      const url = image.startsWith('data:') ? image : `data:image/png;base64,${image}`
      if (url.length <= 'data:image/png;base64,'.length) throw new OllamaError(400, `${param}[${k}] is empty`)
      return { type: 'image_url' as const, image_url: { url } }
    }),
  ]
}

export interface OllamaEmbedPlan {
  job: EmbedJob
  keepAliveMs: number | undefined
}

/** `/api/embed` (input: a text or a list) and the older `/api/embeddings` (prompt: one text, read as `input`). */
export function planOllamaEmbed(body: z.infer<typeof ollamaEmbedSchema>, model: ModelRecord, notices: Notices): OllamaEmbedPlan {
  ollamaEmbedOptions(body.options, notices)
  if (!model.capabilities.includes('embeddings')) throw new OllamaError(400, `"${model.id}" does not support embeddings`)
  const request = parseEmbeddingsRequest({ model: model.id, input: body.input, ...(body.dimensions ? { dimensions: body.dimensions } : {}) })
  const plan = planEmbeddings(request, model)
  return { job: plan.job, keepAliveMs: keepAliveMs(body.keep_alive) }
}
