/**
 * What Hearth does with each top-level field of the three APIs it speaks, in one table. The request
 * parsers read it (what they refuse by name, what they set aside and say so in a `Warning`), and
 * docs/agents.md shows it, rendered by `fieldDecisionsMarkdown` (test/fast/field-decisions.test.ts
 * checks the parsers' schemas, the answers and the page against it).
 *
 * - honoured: it changes the answer as the API says it does (`note`: how, where not plain).
 * - accepted: it never changes what the model says; taken, and used where there is a local use.
 * - set aside: it would change the answer and there is no local equivalent a client needs;
 *   the answer carries a `Warning` saying so (`note` is that warning).
 * - refused: it would change the answer and cannot be honoured: 400 naming it (`note` says why).
 */
import { unsupportedParameter } from '../services/api-error.ts'

export type Dialect = 'chat' | 'responses' | 'messages'
export type Decision = 'honoured' | 'accepted' | 'set aside' | 'refused'

export interface FieldDecision {
  /** A top-level field, or a field inside one (`text.verbosity`). */
  field: string
  decision: Decision
  note?: string
}

const honoured = (fields: string, note?: string): FieldDecision[] =>
  fields.split(' ').map((field) => ({ field, decision: 'honoured', ...(note ? { note } : {}) }))
const accepted = (fields: string, note?: string): FieldDecision[] =>
  fields.split(' ').map((field) => ({ field, decision: 'accepted', ...(note ? { note } : {}) }))
const setAside = (field: string, note: string): FieldDecision => ({ field, decision: 'set aside', note })
const refused = (field: string, note: string): FieldDecision => ({ field, decision: 'refused', note })

/**
 * Speculative decoding is on by default and never changes a greedy answer; clients that know
 * nothing of it see only faster answers (and the drafted and accepted counts in `timings`, where
 * the API has them). The field is for measuring and for a client that wants every token decoded
 * alone: OpenAI's, Anthropic's and Ollama's own clients send it as an extra body field or option.
 */
const SPECULATIVE_NOTE = "Hearth's own: false decodes every token alone (speculative decoding is on by default and never changes a greedy answer)"

export const FIELD_DECISIONS: Readonly<Record<Dialect, readonly FieldDecision[]>> = {
  chat: [
    ...honoured(
      'model messages stream stream_options temperature top_p top_k presence_penalty frequency_penalty logit_bias stop seed tools tool_choice parallel_tool_calls response_format logprobs top_logprobs',
    ),
    ...honoured('max_tokens max_completion_tokens', 'capped at what the model may write and the context holds'),
    ...honoured('n', 'only 1: more answers per request are refused'),
    ...honoured('reasoning_effort', "thinking models think this much; 'none' turns thinking off"),
    ...honoured('thinking_budget_tokens', "Hearth's own: the most tokens a thinking model thinks"),
    ...honoured('prompt_cache_key', 'keeps the conversation on its engine slot (`user` where it is missing)'),
    ...honoured('speculative', SPECULATIVE_NOTE),
    ...accepted('user metadata store service_tier prompt_cache_retention safety_identifier'),
    ...accepted('prompt_cache_options', 'caching is automatic: a prompt stays cached while its slot keeps it'),
    setAside('web_search_options', 'web search was left out: Hearth runs no hosted tools'),
    setAside('verbosity', "'verbosity' was set aside: the model writes at its own length"),
    refused('audio', 'audio output is not supported'),
    refused('modalities', "only text output is supported; leave out 'modalities'"),
    refused('prediction', 'predicted outputs are not supported'),
    refused('functions', "the deprecated 'functions' field is not supported; send 'tools' instead"),
    refused('function_call', "the deprecated 'function_call' field is not supported; send 'tool_choice' instead"),
    refused('moderation', 'moderation is not supported: Hearth runs no moderation model'),
  ],
  responses: [
    ...honoured(
      'model input instructions tools tool_choice parallel_tool_calls text max_tool_calls temperature top_p stream stream_options previous_response_id reasoning',
    ),
    ...honoured('max_output_tokens', 'bounds the whole response, across tool rounds'),
    ...honoured('store', 'kept in the data folder unless false, each visible only to its key'),
    ...honoured('include', "'reasoning.encrypted_content', 'file_search_call.results' and 'message.output_text.logprobs'; outputs of hosted tools never come"),
    ...honoured('top_logprobs', 'the most likely alternatives at each output token, with its log probability'),
    ...honoured('top_k stop', "Hearth's own, as in its chat completions"),
    ...honoured('prompt_cache_key', 'keeps the conversation on its engine slot'),
    ...honoured('speculative', SPECULATIVE_NOTE),
    ...honoured('truncation', "'disabled'; 'auto' is set aside"),
    ...accepted('metadata client_metadata user safety_identifier prompt_cache_retention service_tier image access_programs'),
    ...accepted('prompt_cache_options', 'caching is automatic: a prompt stays cached while its slot keeps it'),
    ...accepted('background_options', "only for 'background', which is refused"),
    setAside('context_management', "'context_management' was set aside: a conversation longer than the context is refused, not compacted"),
    setAside('prompt_cache_options.prewarm', "'prompt_cache_options.prewarm' was set aside: the answer is written, and its prompt cached as always"),
    setAside('reasoning.summary', 'reasoning summaries were set aside: Hearth has no summarizer; reasoning items carry the thinking itself'),
    setAside('text.verbosity', "'text.verbosity' was set aside: the model writes at its own length"),
    setAside('truncation: auto', "'truncation: auto' was set aside: a conversation longer than the context is refused, not cut"),
    refused('background', 'background responses are not supported; stream instead'),
    refused('conversation', "conversations are not supported; continue with 'previous_response_id'"),
    refused('prompt', 'stored prompt templates are not supported'),
    refused('moderation', 'moderation is not supported: Hearth runs no moderation model'),
  ],
  messages: [
    ...honoured('model messages system stream temperature top_p top_k stop_sequences tools tool_choice thinking output_format'),
    ...honoured('max_tokens', 'capped at what the model may write and the context holds'),
    ...honoured('output_config', "'effort' is reasoning effort ('max' is 'xhigh'); 'format' is structured output"),
    ...honoured('context_management', 'its edits are applied to the prompt; the answer says which'),
    ...honoured('metadata', "its user_id's session keeps the conversation on its engine slot"),
    ...honoured('speculative', SPECULATIVE_NOTE),
    ...honoured(
      'mcp_servers',
      "MCP servers the user configured, by `name` (its `url` must be the one configured); Hearth runs their tools between the model's turns, as `mcp_tool_use` and `mcp_tool_result` blocks; `authorization_token` is refused (credentials come from the user's settings)",
    ),
    ...accepted('service_tier inference_geo cache_control', 'caching is automatic'),
    ...accepted('speed', 'a local model runs at one speed'),
    ...accepted('diagnostics', 'the answer has no `diagnostics`: what was read from the cache is in `usage`'),
    refused('container', 'code execution containers are not supported'),
  ],
}

function byDecision(dialect: Dialect, decision: Decision): Record<string, string> {
  return Object.fromEntries(FIELD_DECISIONS[dialect].filter((d) => d.decision === decision).map((d) => [d.field, d.note ?? '']))
}

/** Fields refused by name, with why. */
export function refusedFields(dialect: Dialect): Readonly<Record<string, string>> {
  return byDecision(dialect, 'refused')
}

/** Fields set aside, with the warning that says so. */
export function setAsideFields(dialect: Dialect): Readonly<Record<string, string>> {
  return byDecision(dialect, 'set aside')
}

/** One decision's fields, with their notes, for each API. */
function eachDialect(decision: Decision): Record<Dialect, Readonly<Record<string, string>>> {
  return { chat: byDecision('chat', decision), responses: byDecision('responses', decision), messages: byDecision('messages', decision) }
}
const SET_ASIDE = eachDialect('set aside')
const REFUSED = eachDialect('refused')

/**
 * A 400 naming the first refused field a request's body sends at its top level. A field sent as
 * null is not sent: clients write `"audio": null` for "none", as OpenAI's API allows.
 */
export function refuseRefusedFields(dialect: Dialect, body: Record<string, unknown>): void {
  const refused = REFUSED[dialect]
  const field = Object.keys(body).find((key) => key in refused && body[key] != null)
  if (field) throw unsupportedParameter(field, refused[field]!)
}

/** The warnings for the set-aside fields a request's body sends at its top level. */
export function setAsideWarnings(dialect: Dialect, body: Record<string, unknown>): string[] {
  const setAside = SET_ASIDE[dialect]
  return Object.keys(body).flatMap((key) => (key in setAside && body[key] != null ? [setAside[key]!] : []))
}

const API_NAMES: Record<Dialect, string> = {
  chat: '`POST /v1/chat/completions`',
  responses: '`POST /v1/responses`',
  messages: '`POST /v1/messages`',
}

/** The table as docs/agents.md shows it. */
export function fieldDecisionsMarkdown(): string {
  const sections = (Object.keys(FIELD_DECISIONS) as Dialect[]).map((dialect) => {
    const rows = FIELD_DECISIONS[dialect].map((d) => `| \`${d.field}\` | ${d.decision} | ${(d.note ?? '').replace(/\|/g, '\\|')} |`)
    return [`#### ${API_NAMES[dialect]}`, '', '| field | decision | note |', '|---|---|---|', ...rows].join('\n')
  })
  return sections.join('\n\n')
}

/**
 * Ollama's API (`/api/chat`, `/api/generate`, `/api/embed` and the `options` they share), decided
 * the same way; its refusals are 400s in Ollama's shape, its notices the same `Warning` header.
 * docs/ollama.md shows it (`ollamaFieldDecisionsMarkdown`).
 */
export type OllamaRequestKind = 'chat' | 'generate' | 'embed' | 'options' | 'create' | 'show' | 'pull' | 'copy' | 'delete'

const LOAD_HINT = 'Hearth decides how a model loads (models.json, --threads, --gpu-layers); this hint was set aside'

export const OLLAMA_FIELD_DECISIONS: Readonly<Record<OllamaRequestKind, readonly FieldDecision[]>> = {
  chat: [
    ...honoured('model messages stream format tools think options logprobs top_logprobs'),
    ...honoured('tool_choice', "Hearth's own (the AI SDK's Ollama provider sends it): 'auto', 'none', 'required' or a function, as in chat completions"),
    ...honoured(
      'temperature top_p max_output_tokens',
      "where `options` does not set them (the AI SDK's Ollama provider sends them here; Ollama ignores them): as `options`' `temperature`, `top_p`, `num_predict`",
    ),
    ...honoured('keep_alive', "how long the model stays loaded after the request (0 unloads it; -1 keeps it); without it, the model's idle time to live"),
    setAside('truncate', "'truncate' was set aside: a conversation longer than the context is refused, not cut"),
    setAside('shift', "'shift' was set aside: an answer stops where the context is full"),
    refused('_debug_render_only', 'rendering the prompt without running the model is not supported'),
  ],
  generate: [
    ...honoured('model prompt suffix system images format stream raw think options logprobs top_logprobs'),
    ...honoured('stop', "where `options` does not set it (the AI SDK's Ollama provider sends it here; Ollama ignores it)"),
    ...honoured('keep_alive', "how long the model stays loaded after the request (0 unloads it; -1 keeps it); without it, the model's idle time to live"),
    setAside('truncate', "'truncate' was set aside: a prompt longer than the context is refused, not cut"),
    setAside('shift', "'shift' was set aside: an answer stops where the context is full"),
    refused('template', "Hearth writes prompts with the model's own chat template (its GGUF's); send 'raw' with a prompt written in full instead"),
    refused('tools', "Ollama's generate has no tools (Ollama itself ignores them): send them to /api/chat"),
    refused('context', "the deprecated 'context' is not supported; send the conversation to /api/chat"),
    refused('_debug_render_only', 'rendering the prompt without running the model is not supported'),
  ],
  embed: [...honoured('model input dimensions options keep_alive'), ...honoured('truncate', 'an input longer than the context is refused, with or without it')],
  options: [
    ...honoured(
      'temperature top_k top_p min_p typical_p repeat_penalty repeat_last_n presence_penalty frequency_penalty seed stop mirostat mirostat_tau mirostat_eta',
    ),
    ...honoured('num_predict', 'capped at what the model may write; -1 and -2 run to that cap'),
    ...honoured('speculative', SPECULATIVE_NOTE),
    setAside('num_ctx', "'num_ctx' was set aside: each model gets the context set in models.json (or the one it was trained with), shown by /api/show"),
    ...'num_keep num_batch num_gpu main_gpu use_mmap use_mlock num_thread numa low_vram f16_kv vocab_only logits_all embedding_only draft_num_predict'
      .split(' ')
      .map((field) => setAside(field, `'${field}' was set aside: ${LOAD_HINT}`)),
    refused('tfs_z', 'tail-free sampling is gone from llama.cpp (and Ollama); leave it out or at 1'),
    refused('penalize_newline', 'llama.cpp no longer penalizes newlines apart (nor does Ollama); leave it out or false'),
  ],
  create: [
    ...honoured('model name stream files'),
    ...honoured('from', "a model Hearth serves, by its name (its weights, never copied), or an uploaded blob's digest"),
    ...honoured('system', "the model's system prompt on every API, unless a request sends its own"),
    ...honoured('messages', 'a conversation that precedes every request, on every API'),
    ...honoured(
      'parameters',
      "the model's own `options` on Ollama's API (a request's options go over them); `num_ctx` is its context on every API; each is checked as `options` are",
    ),
    ...honoured(
      'template',
      "the model's own template again changes nothing; a Jinja template replaces the file's; a different Go template is refused (llama.cpp runs Jinja)",
    ),
    ...honoured('adapters', 'LoRA adapters in GGUF, applied by llama-server (`--lora`)'),
    ...honoured('license requires', 'kept and shown by /api/show'),
    refused('quantize', "Hearth serves GGUF files as they are: quantize with llama.cpp's llama-quantize first"),
    refused('quantization', "Hearth serves GGUF files as they are: quantize with llama.cpp's llama-quantize first"),
    refused('draft_files', 'a draft model is paired in models.json ("draft")'),
    refused('draft_quantize', 'a draft model is paired in models.json ("draft")'),
    refused('remote_host', 'a model on another machine is added in models.json ("remote")'),
    setAside('renderer', "'renderer' was set aside: Hearth writes prompts with the model's own chat template"),
    setAside('parser', "'parser' was set aside: llama.cpp reads each model's output with its own parser for the template"),
    setAside('info', "'info' was set aside: Hearth keeps no extra facts about a model"),
  ],
  show: [...honoured('model name verbose')],
  pull: [...honoured('model name stream'), ...honoured('insecure', 'plain HTTP to a registry the name carries (host:port/namespace/model:tag)')],
  copy: [...honoured('source destination')],
  delete: [...honoured('model name')],
}

/** The decisions of one Ollama request kind, by field. */
export function ollamaFieldDecisions(kind: OllamaRequestKind): ReadonlyMap<string, FieldDecision> {
  return new Map(OLLAMA_FIELD_DECISIONS[kind].map((d) => [d.field, d]))
}

/** A 400 (Ollama's shape comes from the route) naming the first refused top-level field the body sends. */
export function refuseOllamaFields(kind: OllamaRequestKind, body: Record<string, unknown>): void {
  const decisions = ollamaFieldDecisions(kind)
  const field = Object.keys(body).find(
    (key) =>
      decisions.get(key)?.decision === 'refused' &&
      body[key] != null &&
      body[key] !== '' &&
      !(Array.isArray(body[key]) && (body[key] as unknown[]).length === 0),
  )
  if (field) throw unsupportedParameter(field, decisions.get(field)!.note!)
}

/** The warnings for the set-aside top-level fields a body sends. */
export function ollamaSetAsideWarnings(kind: OllamaRequestKind, body: Record<string, unknown>): string[] {
  const decisions = ollamaFieldDecisions(kind)
  return Object.keys(body).flatMap((key) => (decisions.get(key)?.decision === 'set aside' && body[key] != null ? [decisions.get(key)!.note!] : []))
}

const OLLAMA_NAMES: Record<OllamaRequestKind, string> = {
  chat: '`POST /api/chat`',
  generate: '`POST /api/generate`',
  embed: '`POST /api/embed` (and `/api/embeddings`)',
  options: '`options` (chat and generate)',
  create: '`POST /api/create` (`ollama create` and its Modelfile)',
  show: '`POST /api/show`',
  pull: '`POST /api/pull`',
  copy: '`POST /api/copy`',
  delete: '`DELETE /api/delete`',
}

/** The Ollama table as docs/ollama.md shows it. */
export function ollamaFieldDecisionsMarkdown(): string {
  return (Object.keys(OLLAMA_FIELD_DECISIONS) as OllamaRequestKind[])
    .map((kind) => {
      const rows = OLLAMA_FIELD_DECISIONS[kind].map((d) => `| \`${d.field}\` | ${d.decision} | ${(d.note ?? '').replace(/\|/g, '\\|')} |`)
      return [`#### ${OLLAMA_NAMES[kind]}`, '', '| field | decision | note |', '|---|---|---|', ...rows].join('\n')
    })
    .join('\n\n')
}
