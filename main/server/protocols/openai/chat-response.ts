/** OpenAI's chat completion shapes, built from engine results. Pure functions, no HTTP. */
import type { ChatResult, FinishReason, JobProgress, TokenLogprob } from '../../../../engines/engine-jobs.ts'

export interface ChatUsage {
  prompt_tokens: number
  completion_tokens: number
  total_tokens: number
  /** How much of the prompt the engine's cache already held (the earlier turns of a conversation). */
  prompt_tokens_details: { cached_tokens: number }
  /** How much of the completion was thinking (counted in completion_tokens too, as OpenAI does). */
  completion_tokens_details: { reasoning_tokens: number }
}

export interface ChatTimings {
  prompt_ms: number
  prompt_per_second: number
  predicted_ms: number
  predicted_per_second: number
  /** With speculative decoding (on by default for chat models; absent where a request turned it off). */
  draft_n?: number
  draft_n_accepted?: number
  draft_acceptance_rate?: number
  /** Tokens decoded while drafting was paused, its drafts no longer accepted (Hearth's own). */
  draft_paused_n?: number
  /** Verification passes that carried a draft: each gave its accepted tokens and one more (Hearth's own). */
  draft_steps?: number
}

/** Identifies one completion across its response or all its stream chunks. */
export interface CompletionIdentity {
  id: string
  created: number
  model: string
}

export function usageOf(result: ChatResult): ChatUsage {
  return {
    prompt_tokens: result.promptTokens,
    completion_tokens: result.completionTokens,
    total_tokens: result.promptTokens + result.completionTokens,
    prompt_tokens_details: { cached_tokens: result.cachedTokens ?? 0 },
    completion_tokens_details: { reasoning_tokens: result.reasoningTokens },
  }
}

export function timingsOf(result: ChatResult): ChatTimings {
  const t = result.timings
  return {
    prompt_ms: round(t.promptMs),
    prompt_per_second: round(t.promptPerSecond),
    predicted_ms: round(t.predictedMs),
    predicted_per_second: round(t.predictedPerSecond),
    ...(t.draftTokens !== undefined
      ? {
          draft_n: t.draftTokens,
          draft_n_accepted: t.draftAccepted ?? 0,
          draft_acceptance_rate: round(t.draftTokens ? (t.draftAccepted ?? 0) / t.draftTokens : 0),
          draft_paused_n: t.draftPaused ?? 0,
          draft_steps: t.draftSteps ?? 0,
        }
      : {}),
  }
}

export function chatCompletion(who: CompletionIdentity, result: ChatResult) {
  const calls = result.toolCalls.length > 0
  return {
    id: who.id,
    object: 'chat.completion' as const,
    created: who.created,
    model: who.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant' as const,
          // OpenAI's answers that call tools have no content unless the model also wrote some.
          content: calls && !result.text ? null : result.text,
          ...(result.reasoning ? { reasoning_content: result.reasoning } : {}),
          ...(calls ? { tool_calls: result.toolCalls } : {}),
          refusal: null,
        },
        logprobs: result.logprobs ? { content: result.logprobs, refusal: null } : null,
        finish_reason: result.finishReason,
      },
    ],
    usage: usageOf(result),
    timings: timingsOf(result),
  }
}

type ToolCallDelta = { index: number; id?: string; type?: 'function'; function: { name?: string; arguments: string } }
type Delta = { role?: 'assistant'; content?: string; reasoning_content?: string; tool_calls?: ToolCallDelta[] }

/** What one piece of progress adds to the answer, as a chunk's delta (and its log probabilities). */
export function deltaOf(progress: JobProgress): { delta: Delta; logprobs?: TokenLogprob[] } | undefined {
  switch (progress.type) {
    case 'text':
      return { delta: { content: progress.text }, ...(progress.logprobs ? { logprobs: progress.logprobs } : {}) }
    case 'reasoning':
      return { delta: { reasoning_content: progress.text } }
    case 'tool_call': {
      // The call's first piece names it; the rest only carry more of its arguments.
      const call: ToolCallDelta =
        progress.id !== undefined
          ? { index: progress.index, id: progress.id, type: 'function', function: { name: progress.name, arguments: progress.arguments } }
          : { index: progress.index, function: { arguments: progress.arguments } }
      return { delta: { tool_calls: [call] } }
    }
    default:
      return undefined
  }
}

/** One `chat.completion.chunk`; `usage: null` on every chunk when the client asked for usage. */
export function chatChunk(
  who: CompletionIdentity,
  delta: Delta,
  finishReason: FinishReason | null,
  withUsageField: boolean,
  extra: { timings?: ChatTimings; logprobs?: TokenLogprob[] } = {},
) {
  return {
    id: who.id,
    object: 'chat.completion.chunk' as const,
    created: who.created,
    model: who.model,
    choices: [{ index: 0, delta, logprobs: extra.logprobs ? { content: extra.logprobs, refusal: null } : null, finish_reason: finishReason }],
    ...(withUsageField ? { usage: null } : {}),
    ...(extra.timings ? { timings: extra.timings } : {}),
  }
}

/** The extra chunk that ends a stream when `include_usage` is set: no choices, just usage. */
export function usageChunk(who: CompletionIdentity, result: ChatResult) {
  return {
    id: who.id,
    object: 'chat.completion.chunk' as const,
    created: who.created,
    model: who.model,
    choices: [],
    usage: usageOf(result),
  }
}

function round(n: number): number {
  return Math.round(n * 1000) / 1000
}

export type ChatChunk = ReturnType<typeof chatChunk> | ReturnType<typeof usageChunk>

/**
 * The order of a streamed chat answer, as OpenAI sends it: the role first (with the first piece,
 * or just before the finish when nothing came), then each piece, the finish reason in a chunk of
 * its own (with Hearth's timings), then the usage chunk when the client asked for it. The route
 * ends the stream with `[DONE]`.
 */
export class ChatStreamWriter {
  private started = false

  constructor(
    private readonly who: CompletionIdentity,
    private readonly includeUsage: boolean,
  ) {}

  progress(progress: JobProgress): ChatChunk[] {
    const piece = deltaOf(progress)
    if (!piece) return []
    return [...this.opening(), chatChunk(this.who, piece.delta, null, this.includeUsage, { logprobs: piece.logprobs })]
  }

  finish(result: ChatResult): ChatChunk[] {
    return [
      ...this.opening(),
      chatChunk(this.who, {}, result.finishReason, this.includeUsage, { timings: timingsOf(result) }),
      ...(this.includeUsage ? [usageChunk(this.who, result)] : []),
    ]
  }

  private opening(): ChatChunk[] {
    if (this.started) return []
    this.started = true
    return [chatChunk(this.who, { role: 'assistant', content: '' }, null, this.includeUsage)]
  }
}
