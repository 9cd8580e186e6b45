/** OpenAI's text_completion shapes, built from completion results. Pure functions, no HTTP. */
import type { CompleteResult, JobProgress, TokenLogprob } from '../../../../engines/engine-jobs.ts'
import type { CompletionIdentity } from './chat-response.ts'

/** The legacy logprobs shape: parallel lists, and each token's candidates as a map. */
export interface LegacyLogprobs {
  tokens: string[]
  token_logprobs: number[]
  top_logprobs: Array<Record<string, number>>
  text_offset: number[]
}

export function legacyLogprobs(entries: TokenLogprob[], startOffset: number): LegacyLogprobs {
  const out: LegacyLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] }
  let offset = startOffset
  for (const e of entries) {
    out.tokens.push(e.token)
    out.token_logprobs.push(e.logprob)
    out.top_logprobs.push(Object.fromEntries(e.top_logprobs.map((t) => [t.token, t.logprob])))
    out.text_offset.push(offset)
    offset += e.token.length
  }
  return out
}

export function completionsUsage(results: readonly CompleteResult[]) {
  const prompt = results.reduce((n, r) => n + r.promptTokens, 0)
  const completion = results.reduce((n, r) => n + r.completionTokens, 0)
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion }
}

/** `echoed`: each prompt's text, where the client asked for it back (`echo`). */
export function textCompletion(who: CompletionIdentity, results: readonly CompleteResult[], echoed: readonly string[] | undefined) {
  return {
    id: who.id,
    object: 'text_completion' as const,
    created: who.created,
    model: who.model,
    choices: results.map((r, index) => ({
      text: (echoed?.[index] ?? '') + r.text,
      index,
      logprobs: r.logprobs ? legacyLogprobs(r.logprobs, echoed?.[index]?.length ?? 0) : null,
      finish_reason: r.finishReason,
    })),
    usage: completionsUsage(results),
  }
}

/** One streamed piece: `usage: null` on every chunk when the client asked for usage. */
export function completionChunk(
  who: CompletionIdentity,
  text: string,
  finishReason: 'stop' | 'length' | null,
  withUsageField: boolean,
  logprobs: LegacyLogprobs | null = null,
) {
  return {
    id: who.id,
    object: 'text_completion' as const,
    created: who.created,
    model: who.model,
    choices: [{ text, index: 0, logprobs, finish_reason: finishReason }],
    ...(withUsageField ? { usage: null } : {}),
  }
}

export type CompletionStreamChunk = ReturnType<typeof completionChunk> | ReturnType<typeof completionsUsageChunk>

/** The chunk that ends a stream when `include_usage` is set: no choices, just usage. */
export function completionsUsageChunk(who: CompletionIdentity, result: CompleteResult) {
  return { id: who.id, object: 'text_completion' as const, created: who.created, model: who.model, choices: [], usage: completionsUsage([result]) }
}

/**
 * The order of a streamed completion: the prompt first when it is echoed, then each piece of text
 * (log probabilities counted from where the piece starts in the whole text, echo included), the
 * finish reason in a chunk of its own, then the usage chunk when asked. The route ends with `[DONE]`.
 */
export class CompletionStreamWriter {
  private offset: number

  constructor(
    private readonly who: CompletionIdentity,
    private readonly includeUsage: boolean,
    private readonly echoedPrompt: string | undefined,
  ) {
    this.offset = echoedPrompt?.length ?? 0
  }

  start(): CompletionStreamChunk[] {
    return this.echoedPrompt === undefined ? [] : [completionChunk(this.who, this.echoedPrompt, null, this.includeUsage)]
  }

  progress(progress: JobProgress): CompletionStreamChunk[] {
    if (progress.type !== 'text') return []
    const logprobs = progress.logprobs ? legacyLogprobs(progress.logprobs, this.offset) : null
    this.offset += progress.text.length
    return [completionChunk(this.who, progress.text, null, this.includeUsage, logprobs)]
  }

  finish(result: CompleteResult): CompletionStreamChunk[] {
    return [completionChunk(this.who, '', result.finishReason, this.includeUsage), ...(this.includeUsage ? [completionsUsageChunk(this.who, result)] : [])]
  }
}
