/**
 * A random-weight chat model of a real model's size and shape, for benchmarks: speed depends on the
 * shapes, not on what the weights say. The default is TinyLlama-1.1B: 22 layers, 2048 wide, 32
 * query and 4 key/value heads, FFN 5632, a 32,000-token vocabulary, ChatML. Written as F16 tensor by
 * tensor (2.2 GB never sits in memory at once); llama-quantize makes the quantized file from it.
 */
import { familyTokenizer, type FamilyModelSpec } from './family-models.ts'
import { kv, writeGgufLazily, type GgufEntry, type LazyGgufTensor } from '../../models/writers/gguf-writer.ts'
import { buildSpmVocab, CHATML_TEMPLATE, createRng, llamaMetadata, TOKEN_TYPE } from './tiny-models.ts'

export interface LlamaShape {
  layers: number
  embd: number
  heads: number
  kvHeads: number
  ff: number
  vocabularySize: number
  contextLength: number
}

export const TINYLLAMA_1_1B: LlamaShape = {
  layers: 22,
  embd: 2048,
  heads: 32,
  kvHeads: 4,
  ff: 5632,
  vocabularySize: 32_000,
  contextLength: 2048,
}

export function writeRealSizeLlama(path: string, shape: LlamaShape = TINYLLAMA_1_1B, seed = 7): void {
  const vocab = buildSpmVocab()
  // Filler pieces bring the vocabulary to its real size: the output layer is a real model's.
  for (let i = 0; vocab.tokens.length < shape.vocabularySize; i++) {
    vocab.tokens.push(`\u2581w${i}`)
    vocab.types.push(TOKEN_TYPE.NORMAL)
    vocab.scores.push(-vocab.tokens.length)
  }
  const { embd, ff, layers } = shape
  const nVocab = vocab.tokens.length
  const metadata = llamaMetadata(vocab, {
    name: 'random-tinyllama-1.1b-shape',
    fileType: 1, // MOSTLY_F16
    contextLength: shape.contextLength,
    embd,
    layers,
    ff,
    heads: shape.heads,
    kvHeads: shape.kvHeads,
    addSpacePrefix: false,
    chatTemplate: CHATML_TEMPLATE,
  })
  // Special and byte tokens never win: generation runs to its token limit, as a benchmark needs.
  const tensors = randomLlamaTensors(shape, nVocab, seed, (id) => vocab.types[id] !== TOKEN_TYPE.NORMAL)
  writeGgufLazily(path, { metadata, tensors })
}

/** SmolLM2-135M's shape (the smallest chat model in wide use), with a 32k context. */
export const SMOLLM2_135M: Omit<LlamaShape, 'vocabularySize'> = {
  layers: 30,
  embd: 576,
  heads: 9,
  kvHeads: 3,
  ff: 1536,
  contextLength: 32768,
}

/** Qwen2.5-Coder-0.5B's shape (as a llama, without its attention biases), with a 32k context. */
export const QWEN25_CODER_0_5B: Omit<LlamaShape, 'vocabularySize'> = {
  layers: 24,
  embd: 896,
  heads: 14,
  kvHeads: 2,
  ff: 4864,
  contextLength: 32768,
}

/**
 * A random-weight model of a real size with a real family's tokenizer and chat template (see
 * family-models.ts): what an agent's prompt costs depends on its token count, so the agent
 * benchmark needs a real vocabulary as well as a real size. Written as F16, tensor by tensor.
 */
export function writeRealSizeFamilyModel(
  path: string,
  spec: FamilyModelSpec,
  templateText: string,
  shape: Omit<LlamaShape, 'vocabularySize'>,
  seed = 11,
): void {
  const { tokens, types, metadata: tokenizerMetadata } = familyTokenizer(spec, templateText)
  const { embd, ff, layers } = shape
  const metadata: GgufEntry[] = [
    kv.str('general.architecture', 'llama'),
    kv.str('general.name', `random-${spec.template}-shape`),
    kv.u32('general.file_type', 1),
    kv.u32('llama.context_length', shape.contextLength),
    kv.u32('llama.embedding_length', embd),
    kv.u32('llama.block_count', layers),
    kv.u32('llama.feed_forward_length', ff),
    kv.u32('llama.attention.head_count', shape.heads),
    kv.u32('llama.attention.head_count_kv', shape.kvHeads),
    kv.u32('llama.rope.dimension_count', embd / shape.heads),
    kv.f32('llama.rope.freq_base', 1_000_000),
    kv.f32('llama.attention.layer_norm_rms_epsilon', 1e-6),
    kv.u32('llama.vocab_size', tokens.length),
    ...tokenizerMetadata,
  ]
  // Special tokens never win: an answer runs to its token limit, the same length on both sides.
  const tensors = randomLlamaTensors(shape, tokens.length, seed, (id) => types[id] !== TOKEN_TYPE.NORMAL)
  writeGgufLazily(path, { metadata, tensors })
}

/**
 * A llama's tensors with random weights, made one at a time as they are written: uniform in
 * ±1/√fan-in (the embeddings and output ±1), norms of 1; `silent` tokens get an output row of 0.
 */
function randomLlamaTensors(
  shape: Omit<LlamaShape, 'vocabularySize'>,
  vocabularySize: number,
  seed: number,
  silent: (id: number) => boolean,
): LazyGgufTensor[] {
  const { embd, ff, layers } = shape
  const kvWidth = (embd / shape.heads) * shape.kvHeads
  const rng = createRng(seed)
  const random = (name: string, dims: number[], scale = 1 / Math.sqrt(dims[0]!)): LazyGgufTensor => ({
    name,
    shape: dims,
    type: 'F16',
    data: () => {
      const out = new Float32Array(dims[0]! * dims[1]!)
      for (let i = 0; i < out.length; i++) out[i] = (rng() * 2 - 1) * scale
      return out
    },
  })
  const ones = (name: string): LazyGgufTensor => ({ name, shape: [embd], type: 'F32', data: () => new Float32Array(embd).fill(1) })
  const tensors: LazyGgufTensor[] = [random('token_embd.weight', [embd, vocabularySize], 1)]
  for (let l = 0; l < layers; l++) {
    const p = `blk.${l}.`
    tensors.push(
      ones(p + 'attn_norm.weight'),
      random(p + 'attn_q.weight', [embd, embd]),
      random(p + 'attn_k.weight', [embd, kvWidth]),
      random(p + 'attn_v.weight', [embd, kvWidth]),
      random(p + 'attn_output.weight', [embd, embd]),
      ones(p + 'ffn_norm.weight'),
      random(p + 'ffn_gate.weight', [embd, ff]),
      random(p + 'ffn_up.weight', [embd, ff]),
      random(p + 'ffn_down.weight', [ff, embd]),
    )
  }
  const output = random('output.weight', [embd, vocabularySize], 1)
  tensors.push(ones('output_norm.weight'), {
    ...output,
    data: () => {
      const data = output.data()
      for (let id = 0; id < vocabularySize; id++) if (silent(id)) data.fill(0, id * embd, (id + 1) * embd)
      return data
    },
  })
  return tensors
}
