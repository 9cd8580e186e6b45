/**
 * A Hearth chat job as the body of a llama-server `/v1/chat/completions` request (and a completion
 * job as one for `/completion` or `/infill`), field by field. Shared by both engines that talk to a
 * llama-server: ours (llama-server/) writes the whole body, and a remote one (remote/) the parts a
 * copy's chat template needs (its traits come from the copy's `/props`).
 * Sampling is stated in full (min_p 0, no DRY or XTC…), so llama-server's own defaults never change
 * what the contract promises.
 */
import { createHash } from 'node:crypto'
import type { ChatContentPart, ChatJob, ChatMessage, CompleteJob, Sampling, ToolDefinition } from './engine-jobs.ts'
import { openAiMessages } from './openai-messages.ts'
import { ModelError } from './errors.ts'

/** What the model's chat template demands beyond OpenAI's shapes. */
export interface TemplateQuirks {
  /** Mistral's templates refuse any tool call id but nine letters and digits. */
  nineCharacterToolCallIds: boolean
  /**
   * The template writes calls but never shows the model its tools (DeepSeek V3.1, the R1 Qwen
   * distill, firefunction v2, whose `functions` llama.cpp never fills): Hearth lists them in the
   * system message, as llama.cpp's template polyfill once did, or a call would be forced blind.
   */
  toolsInSystemMessage: boolean
  /**
   * The template writes a system message where it stands in the conversation (Qwen, ChatML…).
   * Where it does not (it refuses them, or moves them to the start), system messages after the
   * first turn go into the nearest user turn, so what they say still comes where it was said.
   */
  systemMessagesInPlace: boolean
}

/** What llama-server's `/props` says a template can do (`chat_template_caps`). */
export interface TemplateCaps {
  supports_tools?: boolean
  supports_tool_calls?: boolean
}

/** What a model's chat template can do and needs, worked out once from llama-server's `/props`. */
export interface ChatTemplateTraits {
  /** It takes part in tool calling at all: it shows the model its tools, or writes calls. */
  hasTools: boolean
  quirks: TemplateQuirks
}

export const NO_QUIRKS: TemplateQuirks = { nineCharacterToolCallIds: false, toolsInSystemMessage: false, systemMessagesInPlace: true }

export function templateTraits(chatTemplate: string | undefined, caps: TemplateCaps = {}, systemMessagesInPlace = true): ChatTemplateTraits {
  return {
    hasTools: caps.supports_tools === true || caps.supports_tool_calls === true,
    quirks: {
      nineCharacterToolCallIds: /alphanumeric strings with length 9/.test(chatTemplate ?? ''),
      toolsInSystemMessage: caps.supports_tool_calls === true && caps.supports_tools !== true,
      systemMessagesInPlace,
    },
  }
}

/** A conversation with a system message after its first turn, to see where a template writes it. */
export const MID_SYSTEM_PROBE = [
  { role: 'system', content: 'hearth-probe-first' },
  { role: 'user', content: 'hearth-probe-user' },
  { role: 'assistant', content: 'hearth-probe-answer' },
  { role: 'system', content: 'hearth-probe-later' },
  { role: 'user', content: 'hearth-probe-next' },
]

/** Whether the template wrote the probe's later system message where it stands: after the answer, before the next turn. */
export function keepsSystemMessagesInPlace(prompt: string | undefined): boolean {
  if (!prompt) return false
  const at = (text: string) => prompt.indexOf(text)
  return at('hearth-probe-answer') >= 0 && at('hearth-probe-answer') < at('hearth-probe-later') && at('hearth-probe-later') < at('hearth-probe-next')
}

/**
 * A template with no tool calling (Gemma 2, Phi 3.5, SmolLM3…) would have the tools ignored:
 * refused by name, as Ollama does, rather than answered as if there were none.
 */
export function refuseToolsWithoutTemplate(job: ChatJob, template: ChatTemplateTraits, modelId: string): void {
  if (job.tools.length > 0 && job.toolChoice !== 'none' && !template.hasTools) {
    throw new ModelError('model_not_compatible', `the chat template of model "${modelId}" has no tool calling; send the request without 'tools'`, 'tools')
  }
}

/** llama-server reports nothing at all for 0 candidates: one is asked for, and dropped again. */
export function candidatesToAsk(wanted: number): number {
  return Math.max(1, wanted)
}

/**
 * Tokens that come within this many milliseconds of the engine's last write leave in its next one
 * (Hearth's patch to llama-server; the first token after a pause never waits). Each write wakes
 * Hearth and costs a read, a write to the client and their wake-ups: on a model that makes
 * hundreds of tokens a second this saves most of Hearth's work per token (stories260K: 252 µs of
 * Node CPU per token at 2 ms, 167 at 8), and 8 ms is less than a 120 Hz screen's frame.
 */
const STREAM_INTERVAL_MS = 8

/** OpenAI's effort levels, as the templates that have a switch (gpt-oss: low, medium, high) know them. */
const TEMPLATE_EFFORT: Record<string, string> = { none: 'none', minimal: 'low', low: 'low', medium: 'medium', high: 'high', xhigh: 'high' }

/** llama-server's chat request: the messages, and whatever else the job asks for. */
export type ChatRequestBody = { messages: unknown[]; [field: string]: unknown }

export function chatRequestBody(job: ChatJob, quirks: TemplateQuirks = NO_QUIRKS): ChatRequestBody {
  const body: ChatRequestBody = {
    messages: openAiMessages(templateMessages(job, quirks)),
    stream: true,
    stream_options: { include_usage: true },
    // The first event reports the prompt's size before any work, for our context check.
    return_progress: true,
    stream_interval_ms: STREAM_INTERVAL_MS,
    max_tokens: job.maxTokens ?? job.maxCompletionTokens,
    ...samplingFields(job),
  }
  if (job.tools.length > 0) Object.assign(body, toolFields(job))
  if (job.jsonSchema) body.response_format = { type: 'json_schema', json_schema: { schema: job.jsonSchema } }
  if (job.reasoningEffort) body.reasoning_effort = TEMPLATE_EFFORT[job.reasoningEffort] ?? job.reasoningEffort
  // "none" means no thinking, switch or not: a zero budget closes the thinking the moment it opens.
  const budget = job.thinkingBudgetTokens ?? (job.reasoningEffort === 'none' ? 0 : undefined)
  if (budget !== undefined) body.thinking_budget_tokens = budget
  if (job.topLogprobs !== undefined) {
    body.logprobs = true
    body.top_logprobs = candidatesToAsk(job.topLogprobs)
  }
  return body
}

/** The job's messages as the model's template needs them. */
export function templateMessages(job: ChatJob, quirks: TemplateQuirks): readonly ChatMessage[] {
  let messages = quirks.nineCharacterToolCallIds ? job.messages.map(withNineCharacterIds) : job.messages
  if (!quirks.systemMessagesInPlace) messages = withSystemMessagesFolded(messages)
  return quirks.toolsInSystemMessage && job.tools.length > 0 && job.toolChoice !== 'none' ? withToolsListed(messages, job.tools) : messages
}

/**
 * For templates that take one system message, at the start: the leading ones joined into it, and
 * each later one written into the user turn before it (or after it, or a user turn of its own).
 */
export function withSystemMessagesFolded(messages: readonly ChatMessage[]): ChatMessage[] {
  const lead = messages.findIndex((m) => m.role !== 'system')
  const leading = lead < 0 ? messages.length : lead
  const out: ChatMessage[] =
    leading > 0
      ? [
          {
            role: 'system',
            content: messages
              .slice(0, leading)
              .map((m) => textOf(m.content))
              .join('\n\n'),
          },
        ]
      : []
  const rest = messages.slice(leading)
  rest.forEach((m, i) => {
    if (m.role !== 'system') {
      out.push(m)
      return
    }
    const note = `<system>\n${textOf(m.content)}\n</system>`
    const before = out.at(-1)
    const after = rest.slice(i + 1).find((n) => n.role !== 'system')
    if (before?.role === 'user') out[out.length - 1] = { role: 'user', content: joinText(before.content, note, 'after') }
    else if (after?.role === 'user') rest[rest.indexOf(after)] = { role: 'user', content: joinText(after.content, note, 'before') }
    else out.push({ role: 'user', content: note })
  })
  return out
}

function textOf(content: string | ChatContentPart[] | null): string {
  if (content == null) return ''
  return typeof content === 'string' ? content : content.map((p) => (p.type === 'text' ? p.text : '')).join('\n')
}

function joinText(content: string | ChatContentPart[], note: string, where: 'before' | 'after'): string | ChatContentPart[] {
  if (typeof content === 'string') return where === 'after' ? `${content}\n\n${note}` : `${note}\n\n${content}`
  const part: ChatContentPart = { type: 'text', text: note }
  return where === 'after' ? [...content, part] : [part, ...content]
}

/**
 * A job's tools as llama-server takes them. It knows no named choice (an object there quietly
 * means "auto"): the call is required, and that function is the only one offered.
 */
export function toolFields(job: ChatJob): Record<string, unknown> {
  const named = typeof job.toolChoice === 'object' ? job.toolChoice.function : undefined
  return {
    tools: named === undefined ? job.tools : job.tools.filter((t) => t.function.name === named),
    tool_choice: named === undefined ? job.toolChoice : 'required',
    parallel_tool_calls: job.parallelToolCalls,
  }
}

/** The tools, listed at the end of the system message (one is added where there is none). */
function withToolsListed(messages: readonly ChatMessage[], tools: readonly ToolDefinition[]): ChatMessage[] {
  const listing = `You can call any of the following tools to satisfy the user's requests: ${JSON.stringify(tools, null, 2)}`
  const [first, ...rest] = messages
  if (first?.role !== 'system') return [{ role: 'system', content: listing }, ...messages]
  // Added to the system message there is, not as a second one: templates take one, at the start.
  const content = typeof first.content === 'string' ? `${first.content}\n\n${listing}` : [...first.content, { type: 'text' as const, text: `\n\n${listing}` }]
  return [{ role: 'system', content }, ...rest]
}

/** The same id always becomes the same nine characters, so a call and its result still pair up. */
function nineCharacterId(id: string): string {
  if (/^[a-zA-Z0-9]{9}$/.test(id)) return id
  return createHash('sha256')
    .update(id)
    .digest('base64')
    .replace(/[^a-zA-Z0-9]/g, '')
    .slice(0, 9)
    .padEnd(9, '0')
}

function withNineCharacterIds(m: ChatMessage): ChatMessage {
  if (m.role === 'tool') return { ...m, tool_call_id: nineCharacterId(m.tool_call_id) }
  if (m.role === 'assistant' && m.tool_calls) return { ...m, tool_calls: m.tool_calls.map((c) => ({ ...c, id: nineCharacterId(c.id) })) }
  return m
}

/** The body of a native `/completion` request, or `/infill` when the job has a suffix. */
export function completionRequestBody(job: CompleteJob): Record<string, unknown> {
  return {
    ...(job.suffix === undefined ? { prompt: job.prompt } : { input_prefix: job.prompt, input_suffix: job.suffix, prompt: '' }),
    stream: true,
    return_progress: true,
    stream_interval_ms: STREAM_INTERVAL_MS,
    n_predict: job.maxTokens,
    ...samplingFields(job),
    ...(job.logprobs !== undefined ? { n_probs: candidatesToAsk(job.logprobs) } : {}),
  }
}

/**
 * Sampling stated in full, the same for chat and completions: greedy when the temperature is 0,
 * and llama-server's extras (min_p, DRY, XTC, repeat penalty) off, as the contract promises.
 */
function samplingFields(job: Sampling): Record<string, unknown> {
  const greedy = job.temperature === 0
  const extra = job.extraSamplers ?? {}
  return {
    temperature: job.temperature,
    top_k: greedy ? 1 : job.topK,
    top_p: greedy ? 1 : job.topP,
    min_p: extra.minP ?? 0,
    typical_p: extra.typicalP ?? 1,
    repeat_penalty: extra.repeatPenalty ?? 1,
    ...(extra.repeatLastN !== undefined ? { repeat_last_n: extra.repeatLastN } : {}),
    ...(extra.mirostat ? { mirostat: extra.mirostat.version, mirostat_tau: extra.mirostat.tau, mirostat_eta: extra.mirostat.eta } : {}),
    // Hearth's patch llama-22: this request decodes each token alone, whatever the model drafts.
    ...(job.speculative === false ? { speculative: false } : {}),
    presence_penalty: job.presencePenalty,
    frequency_penalty: job.frequencyPenalty,
    dry_multiplier: 0,
    xtc_probability: 0,
    seed: job.seed ?? (greedy ? 0 : Math.floor(Math.random() * 2 ** 31)),
    stop: job.stop,
    cache_prompt: true,
    ...(job.logitBias ? { logit_bias: Object.entries(job.logitBias).map(([id, bias]) => [Number(id), bias]) } : {}),
  }
}
