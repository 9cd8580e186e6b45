/**
 * whisper.cpp's own model file (`ggml-*.bin`, the legacy ggml format), written tensor by tensor:
 *   magic u32 | 11 x i32 hparams | mel filters (n_mel i32, n_fft i32, f32[n_mel*n_fft])
 *   | vocab (count i32, then u32 length + bytes each)
 *   | tensors: n_dims i32, name length i32, ggml type i32, ne i32[n_dims], name, raw data (no padding)
 * The engines' self-test writes random ones at install; the tests write steered ones.
 */
import { writeFileSync } from 'node:fs'
import { ByteWriter, GGML_TYPE, tensorBytes, type GgmlTensorType } from './gguf-writer.ts'

export const GGML_FILE_MAGIC = 0x67676d6c // "ggml"

/** whisper.cpp counts a model as multilingual when n_vocab >= 51865 (99 languages at 51865). */
export const WHISPER_MULTILINGUAL_VOCAB = 51865
/** Text (BPE) tokens in the multilingual tokenizer; whisper.cpp makes the special tokens after them. */
export const WHISPER_TEXT_TOKENS = 50257
/** 30 s windows: 3000 mel frames, halved by the stride-2 convolution. */
export const WHISPER_AUDIO_CONTEXT = 1500
export const WHISPER_TEXT_CONTEXT = 448
export const WHISPER_MELS = 80
/** Bins of a 400-point FFT. */
export const WHISPER_FFT_BINS = 201

export interface WhisperShape {
  /** n_audio_state = n_text_state. */
  state: number
  heads: number
  audioLayers: number
  textLayers: number
}

/** HTK-style triangular mel filterbank [nMels x nFft] for 16 kHz audio. */
export function melFilters(nMels: number, nFft: number, sampleRate = 16000): Float32Array {
  const mel = (f: number): number => 2595 * Math.log10(1 + f / 700)
  const hz = (m: number): number => 700 * (10 ** (m / 2595) - 1)
  const maxMel = mel(sampleRate / 2)
  const edges = Array.from({ length: nMels + 2 }, (_, i) => hz((maxMel * i) / (nMels + 1)))
  const out = new Float32Array(nMels * nFft)
  for (let m = 0; m < nMels; m++) {
    const [lo, mid, hi] = [edges[m]!, edges[m + 1]!, edges[m + 2]!]
    for (let k = 0; k < nFft; k++) {
      const f = (k * sampleRate) / 2 / (nFft - 1)
      const w = f <= lo || f >= hi ? 0 : f <= mid ? (f - lo) / (mid - lo) : (hi - f) / (hi - mid)
      out[m * nFft + k] = (w * 2) / (hi - lo) // slaney-style area normalisation
    }
  }
  return out
}

/** A multilingual whisper file in memory: the header and vocabulary first, then each tensor as it is given. */
export class WhisperFileWriter {
  private readonly w = new ByteWriter()

  constructor(shape: WhisperShape, textTokens: readonly string[]) {
    const { state, heads } = shape
    const w = this.w
    w.u32(GGML_FILE_MAGIC)
    const hparams = [
      WHISPER_MULTILINGUAL_VOCAB,
      WHISPER_AUDIO_CONTEXT,
      state,
      heads,
      shape.audioLayers,
      WHISPER_TEXT_CONTEXT,
      state,
      heads,
      shape.textLayers,
      WHISPER_MELS,
      1 /* ftype F16 */,
    ]
    for (const v of hparams) w.i32(v)
    w.i32(WHISPER_MELS)
    w.i32(WHISPER_FFT_BINS)
    const filters = melFilters(WHISPER_MELS, WHISPER_FFT_BINS)
    w.bytes(new Uint8Array(filters.buffer))
    w.i32(textTokens.length)
    for (const token of textTokens) {
      const bytes = Buffer.from(token, 'utf8')
      w.u32(bytes.length)
      w.bytes(bytes)
    }
  }

  tensor(name: string, shape: readonly number[], type: GgmlTensorType, data: Float32Array): void {
    const w = this.w
    const nameBytes = Buffer.from(name, 'utf8')
    w.i32(shape.length)
    w.i32(nameBytes.length)
    w.i32(GGML_TYPE[type])
    for (const d of shape) w.i32(d)
    w.bytes(nameBytes)
    w.bytes(tensorBytes(type, data))
  }

  write(path: string): void {
    writeFileSync(path, this.w.result())
  }
}
