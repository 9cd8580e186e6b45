/**
 * The (legacy) completions request, `POST /v1/completions`: text continued without a chat template,
 * as editors' autocomplete uses it, with fill-in-the-middle through `suffix`.
 */
import { z } from 'zod'
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import type { CompleteJob } from '../../../../engines/engine-jobs.ts'
import { invalidRequest, modelNotCompatible, unsupportedParameter } from '../../services/api-error.ts'
import { CHAT_DEFAULTS } from '../../services/chat/chat-request.ts'
import { samplingShape } from '../../services/chat/chat-request-schema.ts'
import { parseOrThrow } from '../../services/chat/validation.ts'

const MAX_PROMPTS = 16
const tokenIds = z.array(z.int().min(0)).min(1)

export const completionsRequestSchema = z.object({
  model: z.string().min(1),
  // Text, or token ids of the model's own vocabulary (checked against it by the engine), as
  // OpenAI takes them: one prompt, or up to 16 of either kind.
  prompt: z.union([z.string(), z.array(z.string()).min(1).max(MAX_PROMPTS), tokenIds, z.array(tokenIds).min(1).max(MAX_PROMPTS)]),
  suffix: z.string().nullish(),
  // OpenAI's default for this route is 16 tokens.
  max_tokens: z.int().min(1).nullish(),
  ...samplingShape,
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).nullish(),
  echo: z.boolean().nullish(),
  logprobs: z.int().min(0).max(5).nullish(),
  n: z.literal(1, { message: 'only n = 1 is supported' }).nullish(),
  best_of: z.literal(1, { message: 'only best_of = 1 is supported' }).nullish(),
  user: z.string().nullish(),
})

export type CompletionsRequest = z.infer<typeof completionsRequestSchema>

export interface CompletionsPlan {
  request: CompletionsRequest
  /** Each prompt's text where the client asked for it back (`echo`; refused with token ids). */
  echoed: string[] | undefined
  stream: boolean
  includeUsage: boolean
  /** One job per prompt, in order. */
  jobs: CompleteJob[]
}

const DEFAULT_MAX_TOKENS = 16

export function parseCompletionsRequest(body: unknown): CompletionsRequest {
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const { n, best_of: bestOf } = body as { n?: unknown; best_of?: unknown }
    if (Number.isInteger(n) && (n as number) > 1) throw unsupportedParameter('n', 'only n = 1 is supported (one answer per prompt)')
    if (Number.isInteger(bestOf) && (bestOf as number) > 1) throw unsupportedParameter('best_of', 'only best_of = 1 is supported')
    // Said before the schema: its kinds of prompt would each explain the list in their own way.
    const { prompt } = body as { prompt?: unknown }
    if (Array.isArray(prompt) && prompt.length > MAX_PROMPTS && typeof prompt[0] !== 'number') {
      throw invalidRequest(`'prompt' holds ${prompt.length} prompts; one request takes at most ${MAX_PROMPTS}`, 'prompt')
    }
  }
  const request = parseOrThrow(completionsRequestSchema, body)
  if (request.stream_options != null && request.stream !== true) {
    throw invalidRequest("'stream_options' is only allowed when 'stream' is true", 'stream_options')
  }
  if (request.echo === true && request.logprobs != null) {
    throw unsupportedParameter('logprobs', "'logprobs' together with 'echo' (log probabilities of the prompt) is not supported")
  }
  if (request.echo === true && request.suffix != null) throw invalidRequest("'echo' cannot be combined with 'suffix'", 'echo')
  const prompts = promptsOf(request.prompt)
  const tokenPrompt = prompts.some((p) => typeof p !== 'string')
  // The prompt's text would have to be made from its ids, which need not give them back.
  if (tokenPrompt && request.echo === true) throw unsupportedParameter('echo', "'echo' is not supported with a prompt of token ids; send the prompt as text")
  // llama.cpp fills in the middle of text only.
  if (tokenPrompt && request.suffix != null) throw unsupportedParameter('suffix', "'suffix' takes a text prompt, not token ids")
  if (request.stream === true && prompts.length > 1) {
    throw invalidRequest('Streaming takes one prompt; send the prompts as separate requests', 'prompt')
  }
  return request
}

export function planCompletions(request: CompletionsRequest, model: ModelRecord): CompletionsPlan {
  if (!model.capabilities.includes('chat')) throw modelNotCompatible(model.id, 'completions')
  const maxTokens = request.max_tokens ?? DEFAULT_MAX_TOKENS
  if (maxTokens > model.maxCompletionTokens) {
    throw invalidRequest(`'max_tokens' is too large: ${maxTokens}. This model supports at most ${model.maxCompletionTokens} completion tokens`, 'max_tokens')
  }
  const prompts = promptsOf(request.prompt)
  const stop = request.stop == null ? [] : typeof request.stop === 'string' ? [request.stop] : request.stop
  const logitBias = request.logit_bias == null ? undefined : Object.fromEntries(Object.entries(request.logit_bias).map(([id, bias]) => [Number(id), bias]))
  return {
    request,
    echoed: request.echo === true ? prompts.map((p) => (typeof p === 'string' ? p : '')) : undefined,
    stream: request.stream === true,
    includeUsage: request.stream_options?.include_usage === true,
    jobs: prompts.map((prompt) => ({
      type: 'complete',
      prompt,
      suffix: request.suffix ?? undefined,
      maxTokens,
      // Completions keep the chat route's defaults (greedy unless asked), so the same text gives the same answer.
      temperature: request.temperature ?? CHAT_DEFAULTS.temperature,
      topP: request.top_p ?? CHAT_DEFAULTS.topP,
      topK: request.top_k ?? CHAT_DEFAULTS.topK,
      presencePenalty: request.presence_penalty ?? 0,
      frequencyPenalty: request.frequency_penalty ?? 0,
      logitBias,
      stop,
      seed: request.seed ?? undefined,
      logprobs: request.logprobs ?? undefined,
    })),
  }
}

/** One prompt (text or one array of ids) or several, as a list. */
function promptsOf(prompt: CompletionsRequest['prompt']): Array<string | number[]> {
  if (typeof prompt === 'string') return [prompt]
  if (prompt.every((p) => typeof p === 'number')) return [prompt as number[]]
  return prompt as Array<string | number[]>
}
