/**
 * The random-weight models the engines' self-test quantizes and runs: small enough to write and
 * run in seconds, shaped so every kernel family takes its real path. Rows are 256 wide (a K-quant
 * block) and every matrix has a multiple of 32 rows, as ggml's AMX and repacked kernels require,
 * and nothing is so small that ggml falls back to a generic path.
 */
import { kv, writeGguf, type GgufTensor } from '../../../models/writers/gguf-writer.ts'
import {
  WHISPER_AUDIO_CONTEXT,
  WHISPER_MELS,
  WHISPER_MULTILINGUAL_VOCAB,
  WHISPER_TEXT_CONTEXT,
  WHISPER_TEXT_TOKENS,
  WhisperFileWriter,
} from '../../../models/writers/whisper-file.ts'

const WIDTH = 256
const FFN = 768
const HEADS = 4
const LAYERS = 2

/** mulberry32: the same bytes on every machine, so a failure can be replayed. */
function random(seed: number): (n: number, scale: number) => Float32Array {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return (n, scale) => {
    const out = new Float32Array(n)
    for (let i = 0; i < n; i++) out[i] = (next() * 2 - 1) * scale
    return out
  }
}

/** A two-layer llama (F32, a 512-token SentencePiece vocabulary of bytes and letters) for llama-quantize to turn into each weight type. */
export function writeSelfTestLlama(path: string): void {
  const tokens = ['<unk>', '<s>', '</s>']
  const types = [2, 3, 3]
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`)
    types.push(6)
  }
  for (let i = 0; tokens.length < 512; i++) {
    tokens.push(`\u2581${String.fromCharCode(97 + (i % 26))}${Math.floor(i / 26)}`)
    types.push(1)
  }
  const vocabulary = tokens.length
  const rand = random(34)
  const tensors: GgufTensor[] = []
  const matrix = (name: string, shape: [number, number], scale = 1 / Math.sqrt(shape[0])) =>
    tensors.push({ name, shape, type: 'F32', data: rand(shape[0] * shape[1], scale) })
  const ones = (name: string) => tensors.push({ name, shape: [WIDTH], type: 'F32', data: new Float32Array(WIDTH).fill(1) })
  const kvWidth = WIDTH / 2
  matrix('token_embd.weight', [WIDTH, vocabulary], 1)
  for (let l = 0; l < LAYERS; l++) {
    const p = `blk.${l}.`
    ones(`${p}attn_norm.weight`)
    matrix(`${p}attn_q.weight`, [WIDTH, WIDTH])
    matrix(`${p}attn_k.weight`, [WIDTH, kvWidth])
    matrix(`${p}attn_v.weight`, [WIDTH, kvWidth])
    matrix(`${p}attn_output.weight`, [WIDTH, WIDTH])
    ones(`${p}ffn_norm.weight`)
    matrix(`${p}ffn_gate.weight`, [WIDTH, FFN])
    matrix(`${p}ffn_up.weight`, [WIDTH, FFN])
    matrix(`${p}ffn_down.weight`, [FFN, WIDTH])
  }
  ones('output_norm.weight')
  matrix('output.weight', [WIDTH, vocabulary], 1)
  writeGguf(path, {
    metadata: [
      kv.str('general.architecture', 'llama'),
      kv.str('general.name', 'hearth-engine-self-test'),
      kv.u32('general.file_type', 0),
      kv.u32('llama.context_length', 512),
      kv.u32('llama.embedding_length', WIDTH),
      kv.u32('llama.block_count', LAYERS),
      kv.u32('llama.feed_forward_length', FFN),
      kv.u32('llama.attention.head_count', HEADS),
      kv.u32('llama.attention.head_count_kv', HEADS / 2),
      kv.u32('llama.rope.dimension_count', WIDTH / HEADS),
      kv.f32('llama.attention.layer_norm_rms_epsilon', 1e-5),
      kv.u32('llama.vocab_size', vocabulary),
      kv.str('tokenizer.ggml.model', 'llama'),
      kv.strs('tokenizer.ggml.tokens', tokens),
      kv.nums(
        'tokenizer.ggml.scores',
        'float32',
        tokens.map((_, i) => -i),
      ),
      kv.nums('tokenizer.ggml.token_type', 'int32', types),
      kv.u32('tokenizer.ggml.bos_token_id', 1),
      kv.u32('tokenizer.ggml.eos_token_id', 2),
      kv.u32('tokenizer.ggml.unknown_token_id', 0),
    ],
    tensors,
  })
}

/** A multilingual whisper of one encoder and one decoder layer (F16), for whisper-quantize to turn into each weight type. */
export function writeSelfTestWhisper(path: string): void {
  const state = WIDTH
  const textTokens = Array.from({ length: WHISPER_TEXT_TOKENS }, (_, i) => (i < 256 ? String.fromCharCode(i) : `t${i}`))
  const file = new WhisperFileWriter({ state, heads: HEADS, audioLayers: 1, textLayers: 1 }, textTokens)
  const rand = random(35)
  const matrix = (name: string, shape: number[], scale = 1 / Math.sqrt(shape[0]!)) =>
    file.tensor(
      name,
      shape,
      shape.length === 2 && shape[0]! % 32 === 0 ? 'F16' : 'F32',
      rand(
        shape.reduce((a, b) => a * b, 1),
        scale,
      ),
    )
  const fill = (name: string, shape: number[], value: number) => file.tensor(name, shape, 'F32', new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(value))
  const block = (p: string, cross: boolean) => {
    for (const attention of cross ? ['attn', 'cross_attn'] : ['attn']) {
      for (const part of ['query', 'key', 'value', 'out']) {
        matrix(`${p}.${attention}.${part}.weight`, [state, state])
        if (part !== 'key') fill(`${p}.${attention}.${part}.bias`, [state], 0)
      }
      fill(`${p}.${attention}_ln.weight`, [state], 1)
      fill(`${p}.${attention}_ln.bias`, [state], 0)
    }
    matrix(`${p}.mlp.0.weight`, [state, 4 * state])
    fill(`${p}.mlp.0.bias`, [4 * state], 0)
    matrix(`${p}.mlp.2.weight`, [4 * state, state])
    fill(`${p}.mlp.2.bias`, [state], 0)
    fill(`${p}.mlp_ln.weight`, [state], 1)
    fill(`${p}.mlp_ln.bias`, [state], 0)
  }
  file.tensor('encoder.positional_embedding', [state, WHISPER_AUDIO_CONTEXT], 'F32', rand(state * WHISPER_AUDIO_CONTEXT, 0.05))
  file.tensor('encoder.conv1.weight', [3, WHISPER_MELS, state], 'F16', rand(3 * WHISPER_MELS * state, 1 / Math.sqrt(3 * WHISPER_MELS)))
  fill('encoder.conv1.bias', [1, state], 0)
  file.tensor('encoder.conv2.weight', [3, state, state], 'F16', rand(3 * state * state, 1 / Math.sqrt(3 * state)))
  fill('encoder.conv2.bias', [1, state], 0)
  block('encoder.blocks.0', false)
  fill('encoder.ln_post.weight', [state], 1)
  fill('encoder.ln_post.bias', [state], 0)
  file.tensor('decoder.positional_embedding', [state, WHISPER_TEXT_CONTEXT], 'F32', rand(state * WHISPER_TEXT_CONTEXT, 0.02))
  matrix('decoder.token_embedding.weight', [state, WHISPER_MULTILINGUAL_VOCAB], 0.1)
  block('decoder.blocks.0', true)
  fill('decoder.ln.weight', [state], 1)
  fill('decoder.ln.bias', [state], 0)
  file.write(path)
}
