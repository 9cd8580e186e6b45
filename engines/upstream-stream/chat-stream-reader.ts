/**
 * Reads a streamed chat answer (llama-server's, or a remote OpenAI-style server's) into Hearth's
 * result and progress: text, thinking, tool calls (with ids of our own, `call_…`, the same in every
 * piece and in the result) and log probabilities in OpenAI's shape.
 */
import { randomBytes } from 'node:crypto'
import type { ChatResult, FinishReason, JobProgress, TokenLogprob, ToolCall } from '../engine-jobs.ts'

export interface UpstreamTimings {
  cache_n?: number
  draft_n?: number
  draft_n_accepted?: number
  draft_paused_n?: number
  draft_steps?: number
  prompt_ms?: number
  prompt_per_second?: number
  predicted_ms?: number
  predicted_per_second?: number
}

interface UpstreamLogprob {
  token: string
  logprob: number
  bytes?: number[]
  top_logprobs?: Array<{ token: string; logprob: number; bytes?: number[] }>
}

interface UpstreamToolCallDelta {
  index?: number
  id?: string
  function?: { name?: string; arguments?: string }
}

export interface UpstreamUsage {
  prompt_tokens: number
  completion_tokens: number
  prompt_tokens_details?: { cached_tokens?: number } | null
  completion_tokens_details?: { reasoning_tokens?: number } | null
}

export interface UpstreamChunk {
  choices?: Array<{
    /** Thinking is `reasoning_content` on llama-server and Hearth, `reasoning` on newer vLLM. */
    delta?: { content?: string | null; reasoning_content?: string | null; reasoning?: string | null; tool_calls?: UpstreamToolCallDelta[] }
    finish_reason?: string | null
    logprobs?: { content?: UpstreamLogprob[] | null } | null
  }>
  usage?: UpstreamUsage
  timings?: UpstreamTimings
  prompt_progress?: { total: number; cache: number; processed: number }
  error?: { message?: string; type?: string }
}

export class ChatStreamReader {
  text = ''
  reasoning = ''
  readonly toolCalls: ToolCall[] = []
  logprobs: TokenLogprob[] | undefined
  finishReason: FinishReason = 'stop'
  usage: UpstreamUsage | undefined
  timings: UpstreamTimings | undefined

  constructor(
    private readonly emit: ((progress: JobProgress) => void) | undefined,
    /** Candidates per token the client asked for; undefined = no log probabilities. */
    private readonly topLogprobs: number | undefined,
  ) {
    if (topLogprobs !== undefined) this.logprobs = []
  }

  read(event: UpstreamChunk): void {
    const choice = event.choices?.[0]
    const delta = choice?.delta
    const thinking = delta?.reasoning_content || delta?.reasoning
    if (thinking) {
      this.reasoning += thinking
      this.emit?.({ type: 'reasoning', text: thinking })
    }
    const logprobs = this.logprobsOf(choice?.logprobs?.content)
    if (delta?.content) {
      this.text += delta.content
      this.emit?.({ type: 'text', text: delta.content, ...(logprobs ? { logprobs } : {}) })
    }
    for (const call of delta?.tool_calls ?? []) this.readToolCall(call)
    if (choice?.finish_reason) this.finishReason = finishReasonOf(choice.finish_reason)
    if (event.usage) this.usage = event.usage
    if (event.timings) this.timings = event.timings
  }

  result(reasoningTokens: number, cachedTokens: number): ChatResult {
    const usage = this.usage ?? { prompt_tokens: 0, completion_tokens: 0 }
    const t = this.timings
    return {
      type: 'chat',
      text: this.text,
      reasoning: this.reasoning,
      toolCalls: this.toolCalls,
      logprobs: this.logprobs,
      // A call cut off by the token limit is still an answer that ran out of room.
      finishReason: this.finishReason === 'length' ? 'length' : this.toolCalls.length > 0 ? 'tool_calls' : this.finishReason,
      promptTokens: usage.prompt_tokens,
      completionTokens: usage.completion_tokens,
      reasoningTokens,
      cachedTokens,
      timings: {
        promptMs: t?.prompt_ms ?? 0,
        promptPerSecond: t?.prompt_per_second ?? 0,
        predictedMs: t?.predicted_ms ?? 0,
        predictedPerSecond: t?.predicted_per_second ?? 0,
        ...(t?.draft_n !== undefined
          ? { draftTokens: t.draft_n, draftAccepted: t.draft_n_accepted ?? 0, draftPaused: t.draft_paused_n ?? 0, draftSteps: t.draft_steps ?? 0 }
          : {}),
      },
    }
  }

  private readToolCall(delta: UpstreamToolCallDelta): void {
    const index = delta.index ?? this.toolCalls.length - 1
    let call = this.toolCalls[index]
    const name = delta.function?.name
    const piece = delta.function?.arguments ?? ''
    if (!call) {
      call = { id: `call_${randomBytes(12).toString('base64url')}`, type: 'function', function: { name: name ?? '', arguments: '' } }
      this.toolCalls[index] = call
      call.function.arguments += piece
      this.emit?.({ type: 'tool_call', index, id: call.id, name: call.function.name, arguments: piece })
      return
    }
    if (!piece) return
    call.function.arguments += piece
    this.emit?.({ type: 'tool_call', index, arguments: piece })
  }

  private logprobsOf(content: UpstreamLogprob[] | null | undefined): TokenLogprob[] | undefined {
    if (this.topLogprobs === undefined || !content?.length) return undefined
    const entries = content.map((entry) => ({
      token: entry.token,
      logprob: entry.logprob,
      bytes: entry.bytes ?? [...Buffer.from(entry.token)],
      top_logprobs: (entry.top_logprobs ?? [])
        .slice(0, this.topLogprobs)
        .map((top) => ({ token: top.token, logprob: top.logprob, bytes: top.bytes ?? [...Buffer.from(top.token)] })),
    }))
    this.logprobs!.push(...entries)
    return entries
  }
}

function finishReasonOf(upstream: string): FinishReason {
  if (upstream === 'length') return 'length'
  if (upstream === 'tool_calls') return 'tool_calls'
  return 'stop'
}
