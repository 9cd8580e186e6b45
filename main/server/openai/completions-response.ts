/** OpenAI's text_completion shapes, built from completion results. Pure functions, no HTTP. */
import type { CompleteResult, TokenLogprob } from '../../../native-models/engine/engine-protocol.ts'
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

export function textCompletion(who: CompletionIdentity, prompts: readonly string[], results: readonly CompleteResult[], echo: boolean) {
  return {
    id: who.id,
    object: 'text_completion' as const,
    created: who.created,
    model: who.model,
    choices: results.map((r, index) => ({
      text: echo ? prompts[index]! + r.text : r.text,
      index,
      logprobs: r.logprobs ? legacyLogprobs(r.logprobs, echo ? prompts[index]!.length : 0) : null,
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
