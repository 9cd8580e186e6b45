/**
 * Tiny random models, generated at test time so the suite needs no shared fixtures.
 *
 * Every generator is deterministic for a given seed: same options, same bytes.
 * The weights are random, so the models "work" (load, tokenize, generate, embed,
 * transcribe) but say nothing meaningful.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { deflateSync } from 'node:zlib'
import { kv, writeGguf, type GgmlTensorType, type GgufEntry, type GgufTensor } from '../../models/writers/gguf-writer.ts'
import {
  WHISPER_AUDIO_CONTEXT,
  WHISPER_MELS,
  WHISPER_MULTILINGUAL_VOCAB,
  WHISPER_TEXT_CONTEXT,
  WHISPER_TEXT_TOKENS,
  WhisperFileWriter,
} from '../../models/writers/whisper-file.ts'

/** Bump when any generator's output changes; generateTestModels() regenerates on mismatch. */
export const TINY_MODELS_VERSION = 1

// ---------------------------------------------------------------------------
// Deterministic randomness

/** mulberry32: a small, fast, seeded 32-bit PRNG returning floats in [0, 1). */
export function createRng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** n values uniformly distributed in [-scale, scale). */
function uniform(rng: () => number, n: number, scale: number): Float32Array {
  const out = new Float32Array(n)
  for (let i = 0; i < n; i++) out[i] = (rng() * 2 - 1) * scale
  return out
}

const product = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1)

/** Collects tensors with random (or constant) data. */
class TensorSet {
  readonly tensors: GgufTensor[] = []
  constructor(private readonly rng: () => number) {}

  /** A weight matrix/tensor, uniform in ±scale (default: 1/sqrt(fan-in), fan-in = shape[0]). */
  random(name: string, shape: number[], opts: { scale?: number; type?: 'F32' | 'F16' } = {}): Float32Array {
    const data = uniform(this.rng, product(shape), opts.scale ?? 1 / Math.sqrt(shape[0]!))
    this.tensors.push({ name, shape, type: opts.type ?? 'F32', data })
    return data
  }

  /** A constant tensor, e.g. norm weights of 1 or biases of 0. */
  fill(name: string, shape: number[], value: number): void {
    this.tensors.push({ name, shape, type: 'F32', data: new Float32Array(product(shape)).fill(value) })
  }
}

// ---------------------------------------------------------------------------
// Shared vocabulary material

/** Common English words, used for the SentencePiece and WordPiece vocabularies. */
export const ENGLISH_WORDS: readonly string[] = (
  'the of and to a in is it you that he was for on are with as I his they be at one have this from ' +
  'or had by hot word but what some we can out other were all there when up use your how said an each ' +
  'she which do their time if will way about many then them write would like so these her long make ' +
  'thing see him two has look more day could go come did number sound no most people my over know ' +
  'water than call first who may down side been now find any new work part take get place made live ' +
  'where after back little only round man year came show every good me give our under name very through ' +
  'just form sentence great think say help low line differ turn cause much mean before move right boy ' +
  'old too same tell does set three want air well also play small end put home read hand port large ' +
  'spell add even land here must big high such follow act why ask men change went light kind off need ' +
  'house picture try us again animal point mother world near build self earth father head stand own page ' +
  'should country found answer school grow study still learn plant cover food sun four between state keep ' +
  'eye never last let thought city tree cross farm hard start might story saw far sea draw left late run ' +
  'while press close night real life few north open seem together next white children begin got walk ' +
  'example ease paper group always music those both mark often letter until mile river car feet care ' +
  'second book carry took science eat room friend began idea fish mountain stop once base hear horse cut ' +
  'sure watch color face wood main enough plain girl usual young ready above ever red list though feel ' +
  'talk bird soon body dog family direct pose leave song measure door product black short numeral class ' +
  'wind question happen complete ship area half rock order fire south problem piece told knew pass since ' +
  'top whole king space heard best hour better true during hundred five remember step early hold west ' +
  'ground interest reach fast verb sing listen six table travel less morning ten simple several vowel ' +
  'toward war lay against pattern slow center love person money serve appear road map rain rule govern ' +
  'pull cold notice voice unit power town fine certain fly fall lead cry dark machine note wait plan ' +
  'figure star box noun field rest correct able pound done beauty drive stood contain front teach week ' +
  'final gave green oh quick develop ocean warm free minute strong special mind behind clear tail produce ' +
  'fact street inch multiply nothing course stay wheel full force blue object decide surface deep moon ' +
  'island foot system busy test record boat common gold possible plane stead dry wonder laugh thousand ' +
  'ago ran check game shape equate miss brought heat snow tire bring yes distant fill east paint language ' +
  'among hello hi thanks please sorry model test tiny random answer assistant user system image audio'
)
  .split(/\s+/)
  .filter((w, i, all) => w && all.indexOf(w) === i)

const LOWER = 'abcdefghijklmnopqrstuvwxyz'
const UPPER = LOWER.toUpperCase()
const DIGITS = '0123456789'
const PUNCT = `.,!?;:'"-()[]{}/\\@#$%&*+=<>_~\`^|`

// ---------------------------------------------------------------------------
// a. Tiny llama (SentencePiece tokenizer, optional ChatML template)

/** ChatML, as a jinja template llama.cpp's minja renders. */
export const CHATML_TEMPLATE =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}" +
  "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

/** llama.cpp token types (enum llama_token_type). */
export const TOKEN_TYPE = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 } as const

export interface TinyLlamaOptions {
  seed?: number
  /** Include the ChatML `tokenizer.chat_template` (default true), or this template's text. */
  chatTemplate?: boolean | string
  /**
   * `tokenizer.ggml.add_space_prefix` (default false). llama-2 style SPM models set it,
   * and then detokenize(tokenize(s)) gives " " + s; without it the round trip is exact.
   */
  addSpacePrefix?: boolean
  embd?: number
  layers?: number
  heads?: number
  kvHeads?: number
  ff?: number
  contextLength?: number
  name?: string
  /** Type of the 2-D weight matrices (default F32; norms stay F32). */
  weightType?: 'F32' | 'F16'
}

export interface TinyLlamaInfo {
  path: string
  embd: number
  layers: number
  heads: number
  kvHeads: number
  ff: number
  contextLength: number
  vocabSize: number
  hasChatTemplate: boolean
  /** Token ids of interest. */
  tokens: { unk: number; bos: number; eos: number; imStart: number; imEnd: number }
}

export interface SpmVocab {
  tokens: string[]
  scores: number[]
  types: number[]
  unk: number
  bos: number
  eos: number
  imStart: number
  imEnd: number
}

/**
 * A SentencePiece-style vocabulary: <unk> <s> </s>, 256 byte-fallback tokens <0x00>..,
 * the ChatML control tokens, word pieces ("▁the", "the"), a few suffixes, then single
 * characters. llama.cpp's SPM tokenizer only builds a piece by merging two adjacent
 * pieces that are both in the vocabulary, so every prefix of every word piece is in it
 * too (▁t, ▁th, ▁the). Anything else falls back to characters, then bytes.
 */
export function buildSpmVocab(): SpmVocab {
  const tokens: string[] = []
  const types: number[] = []
  const add = (t: string, type: number): number => {
    tokens.push(t)
    types.push(type)
    return tokens.length - 1
  }
  const unk = add('<unk>', TOKEN_TYPE.UNKNOWN)
  const bos = add('<s>', TOKEN_TYPE.CONTROL)
  const eos = add('</s>', TOKEN_TYPE.CONTROL)
  for (let b = 0; b < 256; b++) add(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`, TOKEN_TYPE.BYTE)
  const imStart = add('<|im_start|>', TOKEN_TYPE.CONTROL)
  const imEnd = add('<|im_end|>', TOKEN_TYPE.CONTROL)
  const firstPiece = tokens.length

  const seen = new Set<string>()
  const piece = (p: string): void => {
    if (seen.has(p)) return
    seen.add(p)
    add(p, TOKEN_TYPE.NORMAL)
  }
  // Words first (they get the higher scores), each preceded by its prefixes; both
  // "▁word" (after a space) and "word" (at the start of a text or line).
  const words = [...ENGLISH_WORDS, ...ENGLISH_WORDS.slice(0, 40).map((w) => w[0]!.toUpperCase() + w.slice(1))]
  for (const w of words) {
    for (const full of ['\u2581' + w, w]) for (let i = 2; i <= full.length; i++) piece(full.slice(0, i))
  }
  for (const suffix of ['s', 'ed', 'ing', 'er', 'ly', 'es']) for (let i = 1; i <= suffix.length; i++) piece(suffix.slice(0, i))
  for (const c of '\u2581' + LOWER + UPPER + DIGITS + PUNCT) piece(c)

  // Pieces score by rank (earlier = more likely); specials and bytes score 0 like llama's converter.
  const scores = tokens.map((_, i) => (i < firstPiece ? 0 : -(i - firstPiece)))
  return { tokens, scores, types, unk, bos, eos, imStart, imEnd }
}

/** The GGUF metadata of a llama-architecture model with an SPM vocabulary. */
export function llamaMetadata(
  vocab: SpmVocab,
  m: {
    name: string
    fileType: number
    contextLength: number
    embd: number
    layers: number
    ff: number
    heads: number
    kvHeads: number
    addSpacePrefix: boolean
    chatTemplate: string | undefined
  },
): GgufEntry[] {
  const metadata: GgufEntry[] = [
    kv.str('general.architecture', 'llama'),
    kv.str('general.name', m.name),
    kv.str('general.description', 'random weights, generated by test/support/tiny-models.ts; for plumbing tests only'),
    kv.u32('general.file_type', m.fileType),
    kv.u32('llama.context_length', m.contextLength),
    kv.u32('llama.embedding_length', m.embd),
    kv.u32('llama.block_count', m.layers),
    kv.u32('llama.feed_forward_length', m.ff),
    kv.u32('llama.attention.head_count', m.heads),
    kv.u32('llama.attention.head_count_kv', m.kvHeads),
    kv.u32('llama.rope.dimension_count', m.embd / m.heads),
    kv.f32('llama.rope.freq_base', 10000),
    kv.f32('llama.attention.layer_norm_rms_epsilon', 1e-5),
    kv.u32('llama.vocab_size', vocab.tokens.length),
    kv.str('tokenizer.ggml.model', 'llama'),
    kv.strs('tokenizer.ggml.tokens', vocab.tokens),
    kv.nums('tokenizer.ggml.scores', 'float32', vocab.scores),
    kv.nums('tokenizer.ggml.token_type', 'int32', vocab.types),
    kv.u32('tokenizer.ggml.unknown_token_id', vocab.unk),
    kv.u32('tokenizer.ggml.bos_token_id', vocab.bos),
    kv.u32('tokenizer.ggml.eos_token_id', vocab.eos),
    // <|im_end|> ends a ChatML turn; llama.cpp treats eot as end-of-generation.
    kv.u32('tokenizer.ggml.eot_token_id', vocab.imEnd),
    kv.bool('tokenizer.ggml.add_bos_token', true),
    kv.bool('tokenizer.ggml.add_eos_token', false),
    kv.bool('tokenizer.ggml.add_space_prefix', m.addSpacePrefix),
  ]
  if (m.chatTemplate) metadata.push(kv.str('tokenizer.chat_template', m.chatTemplate))
  return metadata
}

/** Write a random-weight llama with a real SentencePiece vocabulary. */
export function writeTinyLlama(path: string, opts: TinyLlamaOptions = {}): TinyLlamaInfo {
  const embd = opts.embd ?? 64
  const layers = opts.layers ?? 2
  const heads = opts.heads ?? 4
  const kvHeads = opts.kvHeads ?? heads
  const ff = opts.ff ?? 128
  const contextLength = opts.contextLength ?? 512
  const hasChatTemplate = opts.chatTemplate !== false
  const templateText = typeof opts.chatTemplate === 'string' ? opts.chatTemplate : CHATML_TEMPLATE
  const headDim = embd / heads
  if (!Number.isInteger(headDim) || heads % kvHeads !== 0) throw new Error('embd must divide by heads, heads by kvHeads')

  const type = opts.weightType ?? 'F32'
  const vocab = buildSpmVocab()
  const nVocab = vocab.tokens.length
  const metadata = llamaMetadata(vocab, {
    name: opts.name ?? (hasChatTemplate ? 'tiny-llama-chat' : 'tiny-llama-plain'),
    fileType: type === 'F32' ? 0 : 1, // ALL_F32 / MOSTLY_F16
    contextLength,
    embd,
    layers,
    ff,
    heads,
    kvHeads,
    addSpacePrefix: opts.addSpacePrefix ?? false,
    chatTemplate: hasChatTemplate ? templateText : undefined,
  })

  const t = new TensorSet(createRng(opts.seed ?? 1234))
  t.random('token_embd.weight', [embd, nVocab], { scale: 1, type })
  for (let l = 0; l < layers; l++) {
    const p = `blk.${l}.`
    t.fill(p + 'attn_norm.weight', [embd], 1)
    t.random(p + 'attn_q.weight', [embd, embd], { type })
    t.random(p + 'attn_k.weight', [embd, headDim * kvHeads], { type })
    t.random(p + 'attn_v.weight', [embd, headDim * kvHeads], { type })
    t.random(p + 'attn_output.weight', [embd, embd], { type })
    t.fill(p + 'ffn_norm.weight', [embd], 1)
    t.random(p + 'ffn_gate.weight', [embd, ff], { type })
    t.random(p + 'ffn_up.weight', [embd, ff], { type })
    t.random(p + 'ffn_down.weight', [ff, embd], { type })
  }
  t.fill('output_norm.weight', [embd], 1)
  const output = t.random('output.weight', [embd, nVocab], { scale: 1, type })
  // Zero the output rows of special and byte tokens: their logit is then 0 while the
  // best plain piece's is clearly positive, so greedy decoding always emits readable
  // text and never ends early (callers bound the length with n_predict / max_tokens).
  for (let id = 0; id < nVocab; id++) {
    if (vocab.types[id] !== TOKEN_TYPE.NORMAL) output.fill(0, id * embd, (id + 1) * embd)
  }

  writeGguf(path, { metadata, tensors: t.tensors })
  return {
    path,
    embd,
    layers,
    heads,
    kvHeads,
    ff,
    contextLength,
    vocabSize: nVocab,
    hasChatTemplate,
    tokens: { unk: vocab.unk, bos: vocab.bos, eos: vocab.eos, imStart: vocab.imStart, imEnd: vocab.imEnd },
  }
}

/**
 * A LoRA adapter (GGUF, `general.type: adapter`) for a tiny llama of the same shape: low-rank
 * updates to every layer's attention query and output, large enough that the adapted model
 * answers differently from the plain one (`ollama create` with ADAPTER, llama-server's `--lora`).
 */
export function writeTinyLora(path: string, opts: { embd?: number; layers?: number; rank?: number; seed?: number } = {}): void {
  const embd = opts.embd ?? 64
  const layers = opts.layers ?? 2
  const rank = opts.rank ?? 4
  const metadata: GgufEntry[] = [
    kv.str('general.architecture', 'llama'),
    kv.str('general.type', 'adapter'),
    kv.str('general.name', 'tiny-lora'),
    kv.str('adapter.type', 'lora'),
    kv.f32('adapter.lora.alpha', rank),
  ]
  const t = new TensorSet(createRng(opts.seed ?? 4321))
  for (let l = 0; l < layers; l++) {
    for (const name of ['attn_q', 'attn_output']) {
      // ggml's shapes: lora_a is [n_in, rank], lora_b [rank, n_out] for an [n_in, n_out] weight.
      t.random(`blk.${l}.${name}.weight.lora_a`, [embd, rank], { scale: 1 })
      t.random(`blk.${l}.${name}.weight.lora_b`, [rank, embd], { scale: 1 })
    }
  }
  writeGguf(path, { metadata, tensors: t.tensors })
}

// ---------------------------------------------------------------------------
// b. Tiny CLIP vision projector (llava "mlp" projector) for the tiny llama

export interface TinyMmprojOptions {
  /** Embedding width of the text model the projector feeds (tiny llama: 64). */
  textEmbd: number
  seed?: number
  imageSize?: number
  patchSize?: number
  visionEmbd?: number
  visionFf?: number
  visionHeads?: number
  visionLayers?: number
}

export interface TinyMmprojInfo {
  path: string
  textEmbd: number
  imageSize: number
  patchSize: number
  visionEmbd: number
  visionLayers: number
  /** Image embeddings (tokens) one image becomes in the text model. */
  tokensPerImage: number
}

/**
 * Write a random llava-style CLIP projector: a tiny ViT (class token, learned position
 * embeddings, pre-norm blocks, no post-norm) and the two-layer "mlp" projector
 * mm.0 -> GELU -> mm.2 into the text model's embedding width.
 */
export function writeTinyMmproj(path: string, opts: TinyMmprojOptions): TinyMmprojInfo {
  const imageSize = opts.imageSize ?? 32
  const patchSize = opts.patchSize ?? 8
  const embd = opts.visionEmbd ?? 32
  const ff = opts.visionFf ?? 64
  const heads = opts.visionHeads ?? 2
  const layers = opts.visionLayers ?? 2
  const textEmbd = opts.textEmbd
  if (imageSize % patchSize !== 0) throw new Error('imageSize must be a multiple of patchSize')
  const nPatches = (imageSize / patchSize) ** 2

  const metadata: GgufEntry[] = [
    kv.str('general.architecture', 'clip'),
    kv.str('general.name', 'tiny-mmproj'),
    kv.str('general.description', 'random weights, generated by test/support/tiny-models.ts; for plumbing tests only'),
    kv.u32('general.file_type', 1), // mostly F16
    kv.bool('clip.has_text_encoder', false),
    kv.bool('clip.has_vision_encoder', true),
    kv.bool('clip.has_llava_projector', true),
    kv.str('clip.projector_type', 'mlp'),
    kv.bool('clip.use_gelu', true),
    kv.u32('clip.vision.image_size', imageSize),
    kv.u32('clip.vision.patch_size', patchSize),
    kv.u32('clip.vision.embedding_length', embd),
    kv.u32('clip.vision.feed_forward_length', ff),
    kv.u32('clip.vision.projection_dim', textEmbd),
    kv.u32('clip.vision.attention.head_count', heads),
    kv.f32('clip.vision.attention.layer_norm_epsilon', 1e-5),
    kv.u32('clip.vision.block_count', layers),
    kv.nums('clip.vision.image_mean', 'float32', [0.48145466, 0.4578275, 0.40821073]),
    kv.nums('clip.vision.image_std', 'float32', [0.26862954, 0.26130258, 0.27577711]),
  ]

  const t = new TensorSet(createRng(opts.seed ?? 4321))
  const f16 = { type: 'F16' } as const
  t.random('v.patch_embd.weight', [patchSize, patchSize, 3, embd], { scale: 1 / Math.sqrt(patchSize * patchSize * 3), type: 'F16' })
  t.random('v.class_embd', [embd], { scale: 0.5 })
  t.random('v.position_embd.weight', [embd, nPatches + 1], { scale: 0.5 })
  t.fill('v.pre_ln.weight', [embd], 1)
  t.fill('v.pre_ln.bias', [embd], 0)
  for (let l = 0; l < layers; l++) {
    const p = `v.blk.${l}.`
    for (const m of ['attn_q', 'attn_k', 'attn_v', 'attn_out']) {
      t.random(`${p}${m}.weight`, [embd, embd], f16)
      t.fill(`${p}${m}.bias`, [embd], 0)
    }
    t.fill(p + 'ln1.weight', [embd], 1)
    t.fill(p + 'ln1.bias', [embd], 0)
    t.fill(p + 'ln2.weight', [embd], 1)
    t.fill(p + 'ln2.bias', [embd], 0)
    t.random(p + 'ffn_up.weight', [embd, ff], f16)
    t.fill(p + 'ffn_up.bias', [ff], 0)
    t.random(p + 'ffn_down.weight', [ff, embd], f16)
    t.fill(p + 'ffn_down.bias', [embd], 0)
  }
  t.random('mm.0.weight', [embd, textEmbd], f16)
  t.fill('mm.0.bias', [textEmbd], 0)
  t.random('mm.2.weight', [textEmbd, textEmbd], f16)
  t.fill('mm.2.bias', [textEmbd], 0)

  writeGguf(path, { metadata, tensors: t.tensors })
  return { path, textEmbd, imageSize, patchSize, visionEmbd: embd, visionLayers: layers, tokensPerImage: nPatches }
}

/** Encode an RGB image as a PNG (8-bit, no interlace); `rgb` holds width*height*3 bytes. */
export function encodePng(width: number, height: number, rgb: Uint8Array): Buffer {
  if (rgb.length !== width * height * 3) throw new Error('rgb must hold width*height*3 bytes')
  const crcTable = new Uint32Array(256).map((_, n) => {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
    return c >>> 0
  })
  const crc32 = (b: Uint8Array): number => {
    let c = 0xffffffff
    for (const x of b) c = crcTable[(c ^ x) & 0xff]! ^ (c >>> 8)
    return (c ^ 0xffffffff) >>> 0
  }
  const chunk = (type: string, body: Uint8Array): Buffer => {
    const head = Buffer.alloc(8)
    head.writeUInt32BE(body.length, 0)
    head.write(type, 4, 'ascii')
    const crc = Buffer.alloc(4)
    crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), body])), 0)
    return Buffer.concat([head, body, crc])
  }
  const ihdr = Buffer.alloc(13)
  ihdr.writeUInt32BE(width, 0)
  ihdr.writeUInt32BE(height, 4)
  ihdr.set([8, 2, 0, 0, 0], 8) // bit depth 8, colour type RGB, deflate, no filter, no interlace
  const raw = Buffer.alloc(height * (width * 3 + 1))
  for (let y = 0; y < height; y++) raw.set(rgb.subarray(y * width * 3, (y + 1) * width * 3), y * (width * 3 + 1) + 1)
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', new Uint8Array(0)),
  ])
}

/** Write a small deterministic test image (a colour gradient) as PNG; returns the bytes. */
export function writeTestPng(path: string, size = 32): Buffer {
  const rgb = new Uint8Array(size * size * 3)
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      const i = (y * size + x) * 3
      rgb[i] = Math.round((255 * x) / (size - 1))
      rgb[i + 1] = Math.round((255 * y) / (size - 1))
      rgb[i + 2] = (x + y) % 2 ? 200 : 50
    }
  }
  const png = encodePng(size, size, rgb)
  writeFileSync(path, png)
  return png
}

// ---------------------------------------------------------------------------
// c. Tiny BERT encoder (WordPiece tokenizer, mean pooling) for embeddings

export interface TinyBertOptions {
  seed?: number
  embd?: number
  layers?: number
  heads?: number
  ff?: number
  contextLength?: number
  /** Rank pooling and a classification head: a reranker instead of an embedding model. */
  reranker?: boolean
}

export interface TinyBertInfo {
  path: string
  embd: number
  layers: number
  contextLength: number
  vocabSize: number
  tokens: { pad: number; unk: number; cls: number; sep: number; mask: number }
}

/**
 * A WordPiece vocabulary in llama.cpp's "phantom space" form (as convert_hf_to_gguf.py
 * writes BERT vocabs): word-initial pieces carry a "▁" prefix, "##" continuation pieces
 * are stored bare. Every character exists in both forms, so any lowercase ASCII word
 * tokenizes without [UNK].
 */
function buildWordPieceVocab(): { tokens: string[]; types: number[] } {
  const tokens = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
  const types: number[] = tokens.map(() => TOKEN_TYPE.CONTROL)
  const seen = new Set(tokens)
  const add = (t: string): void => {
    if (seen.has(t)) return
    seen.add(t)
    tokens.push(t)
    types.push(TOKEN_TYPE.NORMAL)
  }
  for (const c of LOWER + DIGITS + PUNCT) add('\u2581' + c)
  for (const c of LOWER + DIGITS) add(c) // ##c
  for (const w of ENGLISH_WORDS) add('\u2581' + w.toLowerCase())
  for (const s of ['s', 'es', 'ed', 'ing', 'er', 'est', 'ly', 'ness', 'ful', 'less', 'tion', 'ment', 'able']) add(s)
  return { tokens, types }
}

/**
 * Write a random BERT-style encoder: mean pooling (an embedding model), or with `reranker` rank
 * pooling and a classification head (cls → tanh → cls.output, one score), as cross-encoder
 * rerankers such as bge-reranker are converted.
 */
export function writeTinyBert(path: string, opts: TinyBertOptions = {}): TinyBertInfo {
  const embd = opts.embd ?? 32
  const layers = opts.layers ?? 2
  const heads = opts.heads ?? 2
  const ff = opts.ff ?? 64
  const contextLength = opts.contextLength ?? 512
  const { tokens, types } = buildWordPieceVocab()
  const ids = { pad: 0, unk: 1, cls: 2, sep: 3, mask: 4 }

  const metadata: GgufEntry[] = [
    kv.str('general.architecture', 'bert'),
    kv.str('general.name', 'tiny-bert'),
    kv.str('general.description', 'random weights, generated by test/support/tiny-models.ts; for plumbing tests only'),
    kv.u32('general.file_type', 1),
    kv.u32('bert.context_length', contextLength),
    kv.u32('bert.embedding_length', embd),
    kv.u32('bert.feed_forward_length', ff),
    kv.u32('bert.block_count', layers),
    kv.u32('bert.attention.head_count', heads),
    kv.f32('bert.attention.layer_norm_epsilon', 1e-12),
    kv.bool('bert.attention.causal', false),
    kv.u32('bert.pooling_type', opts.reranker ? 4 : 1), // RANK or MEAN
    kv.u32('tokenizer.ggml.token_type_count', 2),
    kv.str('tokenizer.ggml.model', 'bert'),
    kv.strs('tokenizer.ggml.tokens', tokens),
    kv.nums('tokenizer.ggml.token_type', 'int32', types),
    kv.u32('tokenizer.ggml.unknown_token_id', ids.unk),
    // llama.cpp prepends BOS for bert and defaults it to 101 (bert-base's [CLS]);
    // cls_token_id alone does not move it.
    kv.u32('tokenizer.ggml.bos_token_id', ids.cls),
    kv.u32('tokenizer.ggml.seperator_token_id', ids.sep), // sic: llama.cpp's key is spelled this way
    kv.u32('tokenizer.ggml.padding_token_id', ids.pad),
    kv.u32('tokenizer.ggml.cls_token_id', ids.cls),
    kv.u32('tokenizer.ggml.mask_token_id', ids.mask),
  ]

  const t = new TensorSet(createRng(opts.seed ?? 5678))
  const f16 = { type: 'F16' } as const
  t.random('token_embd.weight', [embd, tokens.length], { scale: 1, type: 'F16' })
  t.random('token_types.weight', [embd, 2], { scale: 0.1 })
  t.random('position_embd.weight', [embd, contextLength], { scale: 0.1 })
  t.fill('token_embd_norm.weight', [embd], 1)
  t.fill('token_embd_norm.bias', [embd], 0)
  for (let l = 0; l < layers; l++) {
    const p = `blk.${l}.`
    for (const m of ['attn_q', 'attn_k', 'attn_v', 'attn_output']) {
      t.random(`${p}${m}.weight`, [embd, embd], f16)
      t.fill(`${p}${m}.bias`, [embd], 0)
    }
    t.fill(p + 'attn_output_norm.weight', [embd], 1)
    t.fill(p + 'attn_output_norm.bias', [embd], 0)
    t.random(p + 'ffn_up.weight', [embd, ff], f16)
    t.fill(p + 'ffn_up.bias', [ff], 0)
    t.random(p + 'ffn_down.weight', [ff, embd], f16)
    t.fill(p + 'ffn_down.bias', [embd], 0)
    t.fill(p + 'layer_output_norm.weight', [embd], 1)
    t.fill(p + 'layer_output_norm.bias', [embd], 0)
  }
  if (opts.reranker) {
    t.random('cls.weight', [embd, embd])
    t.fill('cls.bias', [embd], 0)
    t.random('cls.output.weight', [embd, 1])
    t.fill('cls.output.bias', [1], 0)
  }

  writeGguf(path, { metadata, tensors: t.tensors })
  return { path, embd, layers, contextLength, vocabSize: tokens.length, tokens: ids }
}

// ---------------------------------------------------------------------------
// d. Tiny multilingual whisper (legacy ggml format, as whisper.cpp's ggml-*.bin)

export interface TinyWhisperOptions {
  seed?: number
  /** n_audio_state = n_text_state. */
  state?: number
  heads?: number
  audioLayers?: number
  textLayers?: number
}

export interface TinyWhisperInfo {
  path: string
  nVocab: number
  state: number
  audioLayers: number
  textLayers: number
  /** Text tokens written to the file; whisper.cpp synthesizes the special tokens after them. */
  textTokens: number
  /** What greedy decoding of a clip of up to ~2 s gives (the decoder ignores the audio). */
  expectedText: string
}

/** Special token ids whisper.cpp assigns in a multilingual (51865-token, 99-language) vocabulary. */
export function whisperSpecialIds(): {
  eot: number
  sot: number
  langEn: number
  translate: number
  transcribe: number
  noSpeech: number
  noTimestamps: number
  timestampBegin: number
} {
  const languages = WHISPER_MULTILINGUAL_VOCAB - 51765 - 1
  const dt = languages - 98 // whisper.cpp shifts the task tokens by the language count
  return {
    eot: 50257,
    sot: 50258,
    langEn: 50259,
    translate: 50357 + dt,
    transcribe: 50358 + dt,
    noSpeech: 50361 + dt,
    noTimestamps: 50362 + dt,
    timestampBegin: 50363 + dt,
  }
}

/**
 * Synthetic text tokens: printable ASCII, English words with and without a leading
 * space, then short letter combinations, all unique, 50256 of them plus the empty
 * token at 50256. whisper.cpp itself appends <|endoftext|>, <|startoftranscript|>,
 * the language tokens, <|translate|>, ..., <|notimestamps|> and the timestamps after
 * these (ids 50257..51864), exactly as it does for the real multilingual models.
 */
function buildWhisperTextTokens(): string[] {
  const out = new Set<string>()
  for (let c = 32; c < 127; c++) out.add(String.fromCharCode(c))
  for (const w of ENGLISH_WORDS) {
    out.add(' ' + w)
    out.add(w)
  }
  const target = WHISPER_TEXT_TOKENS - 1
  const combos = function* (len: number): Generator<string> {
    const idx = new Array<number>(len).fill(0)
    while (true) {
      yield idx.map((i) => LOWER[i]).join('')
      let k = len - 1
      while (k >= 0 && ++idx[k]! === LOWER.length) idx[k--] = 0
      if (k < 0) return
    }
  }
  for (let len = 2; out.size < target; len++) {
    for (const c of combos(len)) {
      out.add(' ' + c)
      if (out.size < target) out.add(c)
      if (out.size >= target) break
    }
  }
  return [...out, '']
}

/**
 * Write a random multilingual whisper model in whisper.cpp's own format (model-writers/whisper-file.ts),
 * steered to say " hello world." whatever it hears.
 */
export function writeTinyWhisper(path: string, opts: TinyWhisperOptions = {}): TinyWhisperInfo {
  const state = opts.state ?? 64
  const heads = opts.heads ?? 2
  const audioLayers = opts.audioLayers ?? 1
  const textLayers = opts.textLayers ?? 1
  const nAudioCtx = WHISPER_AUDIO_CONTEXT
  const nTextCtx = WHISPER_TEXT_CONTEXT
  const nMels = WHISPER_MELS
  const nVocab = WHISPER_MULTILINGUAL_VOCAB
  const textTokens = buildWhisperTextTokens()
  const file = new WhisperFileWriter({ state, heads, audioLayers, textLayers }, textTokens)

  const rng = createRng(opts.seed ?? 8765)
  const tensor = (name: string, shape: number[], type: GgmlTensorType, data: Float32Array): void => file.tensor(name, shape, type, data)
  const rand = (name: string, shape: number[], type: GgmlTensorType = 'F16', scale = 1 / Math.sqrt(shape[0]!)): Float32Array => {
    const data = uniform(rng, product(shape), scale)
    tensor(name, shape, type, data)
    return data
  }
  const fill = (name: string, shape: number[], value: number): void => tensor(name, shape, 'F32', new Float32Array(product(shape)).fill(value))
  // outScale shrinks what a block writes back into the residual stream.
  const attention = (p: string, outScale: number): void => {
    rand(p + '.query.weight', [state, state])
    fill(p + '.query.bias', [state], 0)
    rand(p + '.key.weight', [state, state])
    rand(p + '.value.weight', [state, state])
    fill(p + '.value.bias', [state], 0)
    rand(p + '.out.weight', [state, state], 'F16', outScale / Math.sqrt(state))
    fill(p + '.out.bias', [state], 0)
  }
  const block = (p: string, cross: boolean, outScale = 1): void => {
    attention(p + '.attn', outScale)
    fill(p + '.attn_ln.weight', [state], 1)
    fill(p + '.attn_ln.bias', [state], 0)
    if (cross) {
      attention(p + '.cross_attn', outScale)
      fill(p + '.cross_attn_ln.weight', [state], 1)
      fill(p + '.cross_attn_ln.bias', [state], 0)
    }
    rand(p + '.mlp.0.weight', [state, 4 * state])
    fill(p + '.mlp.0.bias', [4 * state], 0)
    rand(p + '.mlp.2.weight', [4 * state, state], 'F16', outScale / Math.sqrt(4 * state))
    fill(p + '.mlp.2.bias', [state], 0)
    fill(p + '.mlp_ln.weight', [state], 1)
    fill(p + '.mlp_ln.bias', [state], 0)
  }

  // The decoder is steered so that greedy decoding of any short clip gives one clean
  // segment, "<|0.00|> hello world.<|2.00|>", whatever the audio: a random decoder
  // would ramble until the token limit, fail whisper.cpp's avg-logprob check and rerun
  // at five fallback temperatures (~20 s on 1 thread instead of well under 1 s).
  // How: the decoder's positional embedding puts a large value in "code" dimension
  // code(p), so after the final layer norm the hidden state at position p points along
  // that dimension; the (tied) token embedding of the token wanted after position p has
  // a large entry in the same dimension, so its logit dominates. Decoder blocks write
  // back only small updates so they cannot override the code.
  const ids = whisperSpecialIds()
  const tokenId = (s: string): number => {
    const i = textTokens.indexOf(s)
    if (i < 0) throw new Error(`no token ${JSON.stringify(s)}`)
    return i
  }
  // Decoder input: [SOT, language, task] then the generated tokens. The logits at
  // position 0 pick the language ("auto"), the logits at position 2 the first token.
  const plan: Array<[position: number, token: number]> = [
    [0, ids.langEn],
    [2, ids.timestampBegin], // <|0.00|>
    [3, tokenId(' hello')],
    [4, tokenId(' world')],
    [5, tokenId('.')],
    [6, ids.timestampBegin + 100], // <|2.00|>: 2 s in; ends the window for clips up to ~2.1 s
    [7, ids.eot], // and every later position: end of text
  ]
  if (state < 16) throw new Error('state must be at least 16') // room for the 8 code dimensions and some more
  const codeDim = (position: number): number => Math.min(position, 7) // positions 7.. share the EOT code
  const codeAmplitude = 30
  const codeWeight = 2

  rand('encoder.positional_embedding', [state, nAudioCtx], 'F32', 0.05)
  rand('encoder.conv1.weight', [3, nMels, state], 'F16', 1 / Math.sqrt(3 * nMels))
  fill('encoder.conv1.bias', [1, state], 0)
  rand('encoder.conv2.weight', [3, state, state], 'F16', 1 / Math.sqrt(3 * state))
  fill('encoder.conv2.bias', [1, state], 0)
  for (let l = 0; l < audioLayers; l++) block(`encoder.blocks.${l}`, false)
  fill('encoder.ln_post.weight', [state], 1)
  fill('encoder.ln_post.bias', [state], 0)
  const posEmbd = uniform(rng, state * nTextCtx, 0.02)
  for (let p = 0; p < nTextCtx; p++) posEmbd[p * state + codeDim(p)]! += codeAmplitude
  tensor('decoder.positional_embedding', [state, nTextCtx], 'F32', posEmbd)
  const tokEmbd = uniform(rng, state * nVocab, 0.1)
  for (const [pos, tok] of plan) tokEmbd[tok * state + codeDim(pos)] = codeWeight
  tensor('decoder.token_embedding.weight', [state, nVocab], 'F16', tokEmbd)
  for (let l = 0; l < textLayers; l++) block(`decoder.blocks.${l}`, true, 0.1)
  fill('decoder.ln.weight', [state], 1)
  fill('decoder.ln.bias', [state], 0)

  file.write(path)
  return { path, nVocab, state, audioLayers, textLayers, textTokens: textTokens.length, expectedText: ' hello world.' }
}

// ---------------------------------------------------------------------------
// All of them, into one folder

export const TEST_MODEL_FILES = {
  llamaChat: 'tiny-llama-chat.gguf',
  llamaPlain: 'tiny-llama-plain.gguf',
  /** Pairs with tiny-llama-chat.gguf by the `mmproj-<model>.gguf` folder rule. */
  mmproj: 'mmproj-tiny-llama-chat.gguf',
  bert: 'tiny-bert.gguf',
  whisper: 'ggml-tiny-whisper.bin',
} as const

export interface TestModels {
  dir: string
  llamaChat: TinyLlamaInfo
  llamaPlain: TinyLlamaInfo
  mmproj: TinyMmprojInfo
  bert: TinyBertInfo
  whisper: TinyWhisperInfo
  /** False when the folder already held this generator version's files. */
  generated: boolean
}

const STAMP_FILE = 'tiny-models.json'

/**
 * Write every tiny model into `dir` (created if needed) and describe them. Files from
 * the same TINY_MODELS_VERSION are reused; each file is written to a temporary name
 * and renamed, so a reader never sees half a model.
 */
export function generateTestModels(dir: string): TestModels {
  mkdirSync(dir, { recursive: true })
  const stampPath = join(dir, STAMP_FILE)
  const allPresent = Object.values(TEST_MODEL_FILES).every((f) => existsSync(join(dir, f)))
  if (allPresent && existsSync(stampPath)) {
    try {
      const stamp = JSON.parse(readFileSync(stampPath, 'utf8')) as { version?: number; models?: Omit<TestModels, 'dir' | 'generated'> }
      if (stamp.version === TINY_MODELS_VERSION && stamp.models) return withDir(dir, stamp.models, false)
    } catch {
      // unreadable stamp: regenerate
    }
  }

  const atomically = <T extends { path: string }>(file: string, write: (tmp: string) => T): T => {
    const final = join(dir, file)
    const tmp = `${final}.${process.pid}.tmp`
    const info = write(tmp)
    renameSync(tmp, final)
    return { ...info, path: final }
  }
  const llamaChat = atomically(TEST_MODEL_FILES.llamaChat, (p) => writeTinyLlama(p, { chatTemplate: true }))
  const llamaPlain = atomically(TEST_MODEL_FILES.llamaPlain, (p) => writeTinyLlama(p, { chatTemplate: false }))
  const mmproj = atomically(TEST_MODEL_FILES.mmproj, (p) => writeTinyMmproj(p, { textEmbd: llamaChat.embd }))
  const bert = atomically(TEST_MODEL_FILES.bert, (p) => writeTinyBert(p))
  const whisper = atomically(TEST_MODEL_FILES.whisper, (p) => writeTinyWhisper(p))
  const models = { llamaChat, llamaPlain, mmproj, bert, whisper }
  const tmpStamp = `${stampPath}.${process.pid}.tmp`
  writeFileSync(tmpStamp, JSON.stringify({ version: TINY_MODELS_VERSION, models: stripPaths(models) }, null, 2))
  renameSync(tmpStamp, stampPath)
  return { dir, ...models, generated: true }
}

type ModelInfos = Omit<TestModels, 'dir' | 'generated'>

/** The stamp stores file names, not absolute paths, so a folder can be moved. */
function stripPaths(models: ModelInfos): ModelInfos {
  const out = { ...models } as Record<keyof ModelInfos, { path: string }>
  for (const key of Object.keys(TEST_MODEL_FILES) as (keyof ModelInfos)[]) out[key] = { ...models[key], path: TEST_MODEL_FILES[key] }
  return out as ModelInfos
}

function withDir(dir: string, models: ModelInfos, generated: boolean): TestModels {
  const out = { ...models } as Record<keyof ModelInfos, { path: string }>
  for (const key of Object.keys(TEST_MODEL_FILES) as (keyof ModelInfos)[]) out[key] = { ...models[key], path: join(dir, TEST_MODEL_FILES[key]) }
  return { dir, ...(out as ModelInfos), generated }
}
