/**
 * The chat completions request as the contract defines it: schema, checks against the model, and
 * the conversion into an engine job. No HTTP and no engine here.
 */
import { z } from 'zod'
import type { ModelRecord } from '../../../native-models/catalog/model-folder.ts'
import type { ChatContentPart, ChatJob, ChatMessage } from '../../../native-models/engine/engine-protocol.ts'
import { isInvalidImageError } from '../../../native-models/images/invalid-image-error.ts'
import { normalizeImageDataUrl } from '../../../native-models/images/normalize-image.ts'
import { DEFAULT_PROJECTOR_INPUT, readProjectorInput } from '../../../native-models/images/projector-input.ts'
import { invalidRequest, modelNotCompatible } from '../http-errors.ts'
import { parseOrThrow } from './validation.ts'

const textPart = z.object({ type: z.literal('text'), text: z.string() })
const imagePart = z.object({
  type: z.literal('image_url'),
  // An empty url is an invalid image (400 invalid_image), not a schema error.
  image_url: z.object({ url: z.string(), detail: z.enum(['auto', 'low', 'high']).optional() }),
})
const contentPart = z.discriminatedUnion('type', [textPart, imagePart])

const message = z.object({
  role: z.enum(['system', 'developer', 'user', 'assistant']),
  content: z.union([z.string(), z.array(contentPart).min(1)]),
  name: z.string().optional(),
})

const tokenCount = z.int().min(1).nullish()

export const chatRequestSchema = z.object({
  model: z.string().min(1),
  messages: z.array(message).min(1),
  max_tokens: tokenCount,
  max_completion_tokens: tokenCount,
  temperature: z.number().min(0).max(1).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  top_k: z.int().min(1).max(100).nullish(),
  stop: z.union([z.string().min(1), z.array(z.string().min(1)).max(4)]).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).nullish(),
  seed: z.int().nullish(),
  n: z.literal(1, { message: 'only n = 1 is supported' }).nullish(),
})

export type ChatRequest = z.infer<typeof chatRequestSchema>

export interface ChatPlan {
  request: ChatRequest
  stream: boolean
  includeUsage: boolean
  job: ChatJob
  /** The request's one image, still as the client sent it; prepareChatImage() normalises it. */
  image: ImageRef | undefined
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

export function parseChatRequest(body: unknown): ChatRequest {
  const request = parseOrThrow(chatRequestSchema, body)
  if (request.stream_options != null && request.stream !== true) {
    throw invalidRequest("'stream_options' is only allowed when 'stream' is true", 'stream_options')
  }
  return request
}

/** Checks the request against what the model can do and builds the engine job. */
export function planChat(request: ChatRequest, model: ModelRecord): ChatPlan {
  if (!model.capabilities.includes('chat')) throw modelNotCompatible(model.id, 'chat completions')
  const maxTokensParam = request.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens'
  const maxTokens = request.max_completion_tokens ?? request.max_tokens ?? undefined
  if (maxTokens !== undefined && maxTokens > model.maxCompletionTokens) {
    throw invalidRequest(
      `'${maxTokensParam}' is too large: ${maxTokens}. This model supports at most ${model.maxCompletionTokens} completion tokens`,
      maxTokensParam,
    )
  }
  const images = imagesOf(request)
  const misplaced = images.find((i) => request.messages[i.messageIndex]!.role !== 'user')
  if (misplaced) {
    const role = request.messages[misplaced.messageIndex]!.role
    throw invalidRequest(
      `Images are only allowed in messages with role 'user', but this message with role '${role}' has one`,
      `messages[${misplaced.messageIndex}].content[${misplaced.partIndex}]`,
    )
  }
  if (images.length > 0 && !model.capabilities.includes('vision')) throw modelNotCompatible(model.id, 'image input')
  if (images.length > 1) {
    throw invalidRequest(
      `At most one image per request is supported; this request has ${images.length}`,
      images[1]!.param,
      'too_many_images',
    )
  }
  const stop = request.stop == null ? [] : typeof request.stop === 'string' ? [request.stop] : request.stop
  return {
    request,
    stream: request.stream === true,
    includeUsage: request.stream_options?.include_usage === true,
    job: {
      type: 'chat',
      messages: request.messages.map(toEngineMessage),
      maxTokens,
      maxCompletionTokens: model.maxCompletionTokens,
      temperature: request.temperature ?? CHAT_DEFAULTS.temperature,
      topP: request.top_p ?? CHAT_DEFAULTS.topP,
      topK: request.top_k ?? CHAT_DEFAULTS.topK,
      stop,
      seed: request.seed ?? undefined,
    },
    image: images[0],
  }
}

/**
 * Decodes the request's image and checks it, then puts the normalised PNG (shrunk to what the
 * model's projector can use) into the engine job in place of the client's data. Bad images become
 * 400 `invalid_image` naming the part; nothing unchecked is ever queued for an engine.
 */
export async function prepareChatImage(plan: ChatPlan, model: ModelRecord): Promise<void> {
  const image = plan.image
  if (!image) return
  const input = model.projectorPath ? await readProjectorInput(model.projectorPath) : DEFAULT_PROJECTOR_INPUT
  let dataUrl: string
  try {
    dataUrl = (await normalizeImageDataUrl(image.url, { maxSide: input.maxSide })).dataUrl
  } catch (e) {
    if (isInvalidImageError(e)) throw invalidRequest(e.message, image.param, 'invalid_image')
    throw e
  }
  const content = plan.job.messages[image.messageIndex]?.content
  const part = Array.isArray(content) ? content[image.partIndex] : undefined
  if (part?.type !== 'image_url') throw new Error('the engine job lost track of the image part')
  part.image_url = { url: dataUrl }
}

function imagesOf(request: ChatRequest): ImageRef[] {
  const found: ImageRef[] = []
  request.messages.forEach((m, messageIndex) => {
    if (typeof m.content === 'string') return
    m.content.forEach((p, partIndex) => {
      if (p.type !== 'image_url') return
      const param = `messages[${messageIndex}].content[${partIndex}].image_url.url`
      found.push({ url: p.image_url.url, messageIndex, partIndex, param })
    })
  })
  return found
}

function toEngineMessage(m: ChatRequest['messages'][number]): ChatMessage {
  const role = m.role === 'developer' ? 'system' : m.role
  if (typeof m.content === 'string') return { role, content: m.content }
  const parts: ChatContentPart[] = m.content.map((p) =>
    p.type === 'text' ? { type: 'text', text: p.text } : { type: 'image_url', image_url: { url: p.image_url.url } },
  )
  // Templates written for plain strings break on part arrays, so text-only content is joined.
  if (parts.every((p) => p.type === 'text')) return { role, content: parts.map((p) => p.text).join('\n') }
  return { role, content: parts }
}
