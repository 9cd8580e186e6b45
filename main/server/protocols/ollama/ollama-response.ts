/**
 * Ollama's answers to chat and generate, built from engine results: whole, or as a stream of JSON
 * lines whose last one (`done: true`) carries the reason and the counts, durations in nanoseconds.
 * Pure functions, no HTTP.
 */
import type { ChatResult, CompleteResult, EmbedResult, JobProgress, TokenLogprob, ToolCall } from '../../../../engines/engine-jobs.ts'

/** What every line of one answer shares. */
export interface OllamaAnswerIdentity {
  /** The model's name as the client asked for it (Ollama echoes it). */
  model: string
  /** `/api/chat` answers in `message`, `/api/generate` in `response`. */
  api: 'chat' | 'generate'
  /** Whether thinking goes out apart (`think` not false). */
  showThinking: boolean
}

/** When the request began (performance.now()), and the model's load time if this request loaded it. */
export interface OllamaTiming {
  startedAt: number
  loadMs: number
}

const ns = (ms: number) => Math.max(0, Math.round(ms * 1e6))

interface OllamaToolCall {
  id: string
  function: { index: number; name: string; arguments: unknown }
}

/** A call as Ollama gives it: its arguments an object, not a JSON text. */
export function ollamaToolCall(call: ToolCall, index: number): OllamaToolCall {
  let args: unknown
  try {
    args = JSON.parse(call.function.arguments || '{}')
  } catch {
    args = call.function.arguments
  }
  return { id: call.id, function: { index, name: call.function.name, arguments: args } }
}

function ollamaLogprobs(logprobs: readonly TokenLogprob[]) {
  return logprobs.map((l) => ({ token: l.token, logprob: l.logprob, bytes: l.bytes, ...(l.top_logprobs.length ? { top_logprobs: l.top_logprobs } : {}) }))
}

function metrics(result: ChatResult | CompleteResult, timing: OllamaTiming) {
  const chat = result.type === 'chat' ? result : undefined
  const total = performance.now() - timing.startedAt
  return {
    total_duration: ns(total),
    load_duration: ns(timing.loadMs),
    prompt_eval_count: result.promptTokens,
    ...(chat?.cachedTokens !== undefined ? { prompt_eval_cached_count: chat.cachedTokens } : {}),
    prompt_eval_duration: ns(chat ? chat.timings.promptMs : 0),
    eval_count: result.completionTokens,
    eval_duration: ns(chat ? chat.timings.predictedMs : Math.max(0, total - timing.loadMs)),
  }
}

/** Ollama says "stop" for an answer that called tools. */
function doneReason(result: ChatResult | CompleteResult): 'stop' | 'length' {
  return result.finishReason === 'length' ? 'length' : 'stop'
}

function line(who: OllamaAnswerIdentity, content: string, thinking: string, toolCalls: OllamaToolCall[], done: boolean) {
  const base = { model: who.model, created_at: new Date().toISOString() }
  if (who.api === 'chat') {
    return {
      ...base,
      message: { role: 'assistant' as const, content, ...(thinking ? { thinking } : {}), ...(toolCalls.length ? { tool_calls: toolCalls } : {}) },
      done,
    }
  }
  return { ...base, response: content, ...(thinking ? { thinking } : {}), ...(toolCalls.length ? { tool_calls: toolCalls } : {}), done }
}

/** The whole answer in one object. */
export function ollamaAnswer(who: OllamaAnswerIdentity, result: ChatResult | CompleteResult, timing: OllamaTiming) {
  const chat = result.type === 'chat' ? result : undefined
  const calls = chat?.toolCalls.map(ollamaToolCall) ?? []
  return {
    ...line(who, result.text, who.showThinking ? (chat?.reasoning ?? '') : '', calls, true),
    done_reason: doneReason(result),
    ...metrics(result, timing),
    ...(result.logprobs?.length ? { logprobs: ollamaLogprobs(result.logprobs) } : {}),
  }
}

/**
 * The stream's lines: one per piece of text or thinking as it comes, the tool calls whole once
 * the engine has them (Ollama's clients read a call in one line), then the closing line.
 */
export class OllamaStreamWriter {
  constructor(
    private readonly who: OllamaAnswerIdentity,
    private readonly timing: OllamaTiming,
  ) {}

  progress(progress: JobProgress): object[] {
    switch (progress.type) {
      case 'text':
        if (!progress.text) return []
        return [{ ...line(this.who, progress.text, '', [], false), ...(progress.logprobs?.length ? { logprobs: ollamaLogprobs(progress.logprobs) } : {}) }]
      case 'reasoning':
        return this.who.showThinking && progress.text ? [line(this.who, '', progress.text, [], false)] : []
      default:
        return []
    }
  }

  finish(result: ChatResult | CompleteResult): object[] {
    const calls = result.type === 'chat' ? result.toolCalls.map(ollamaToolCall) : []
    return [
      ...(calls.length ? [line(this.who, '', '', calls, false)] : []),
      { ...line(this.who, '', '', [], true), done_reason: doneReason(result), ...metrics(result, this.timing) },
    ]
  }
}

/** The answer to a request that only loads (`done_reason: "load"`) or unloads (`"unload"`) its model. */
export function ollamaLoadAnswer(who: OllamaAnswerIdentity, reason: 'load' | 'unload') {
  return { ...line(who, '', '', [], true), done_reason: reason }
}

/** The result's vectors (L2-normalised, as Ollama's `/api/embed` gives them), one list per input. */
export function embeddingsOf(result: EmbedResult): number[][] {
  const { vectors, dimensions } = result
  const out: number[][] = []
  for (let i = 0; dimensions > 0 && i < vectors.length / dimensions; i++) out.push(Array.from(vectors.subarray(i * dimensions, (i + 1) * dimensions)))
  return out
}
