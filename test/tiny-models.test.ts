/**
 * The tiny generated models load and run through the real native bindings.
 * (The bindings log to stderr directly; that noise is expected.)
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gguf } from '@huggingface/gguf'
import { llamaNode } from '../native-models/engine/child/llama-binding.ts'
import { whisperNode } from '../native-models/engine/child/whisper-binding.ts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { float32ToFloat16Bits, kv, writeGguf } from './support/gguf-writer.ts'
import {
  generateTestModels,
  writeTestPng,
  writeTinyLlama,
  type TestModels,
} from './support/tiny-models.ts'

let dir: string
let models: TestModels
let pngPath: string

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'hearth-tiny-models-'))
  models = generateTestModels(join(dir, 'models'))
  pngPath = join(dir, 'image.png')
  writeTestPng(pngPath)
})

afterAll(() => {
  rmSync(dir, { recursive: true, force: true })
})

const greedy = { n_predict: 20, temperature: 0, top_k: 1 } as const

describe('gguf-writer', () => {
  it('writes every metadata type and F32/F16 tensors that @huggingface/gguf reads back', async () => {
    const path = join(dir, 'all-types.gguf')
    writeGguf(path, {
      alignment: 64,
      metadata: [
        kv.str('general.architecture', 'test'),
        kv.u8('t.u8', 255),
        kv.i8('t.i8', -128),
        kv.u16('t.u16', 65535),
        kv.i16('t.i16', -32768),
        kv.u32('t.u32', 4294967295),
        kv.i32('t.i32', -2147483648),
        kv.u64('t.u64', 18446744073709551615n),
        kv.i64('t.i64', -9007199254740993n),
        kv.f32('t.f32', 0.5),
        kv.f64('t.f64', Math.PI),
        kv.bool('t.bool', true),
        kv.str('t.str', 'héllo ▁ 日本'),
        kv.strs('t.strs', ['a', '', 'ünïcode']),
        kv.nums('t.i32s', 'int32', [1, -2, 3]),
        kv.nums('t.f32s', 'float32', new Float32Array([1.5, -2.25])),
        kv.bools('t.bools', [true, false]),
        kv.bigs('t.u64s', 'uint64', [1n, 2n]),
      ],
      tensors: [
        { name: 'a', shape: [3], type: 'F32', data: new Float32Array([1, 2, 3]) },
        { name: 'b', shape: [2, 2], type: 'F16', data: new Float32Array([0.5, -1, 65504, 1e-7]) },
      ],
    })
    const parsed = await gguf(path, { allowLocalFile: true, typedMetadata: true })
    const m = parsed.typedMetadata as unknown as Record<string, { value: unknown; type: number; subType?: number }>
    expect(m['general.alignment']).toMatchObject({ value: 64, type: 4 })
    expect(m['t.u8']).toMatchObject({ value: 255, type: 0 })
    expect(m['t.i8']).toMatchObject({ value: -128, type: 1 })
    expect(m['t.u16']).toMatchObject({ value: 65535, type: 2 })
    expect(m['t.i16']).toMatchObject({ value: -32768, type: 3 })
    expect(m['t.u32']).toMatchObject({ value: 4294967295, type: 4 })
    expect(m['t.i32']).toMatchObject({ value: -2147483648, type: 5 })
    expect(m['t.u64']).toMatchObject({ value: 18446744073709551615n, type: 10 })
    expect(m['t.i64']).toMatchObject({ value: -9007199254740993n, type: 11 })
    expect(m['t.f32']).toMatchObject({ value: 0.5, type: 6 })
    expect(m['t.f64']).toMatchObject({ value: Math.PI, type: 12 })
    expect(m['t.bool']).toMatchObject({ value: true, type: 7 })
    expect(m['t.str']).toMatchObject({ value: 'héllo ▁ 日本', type: 8 })
    expect(m['t.strs']).toMatchObject({ value: ['a', '', 'ünïcode'], type: 9, subType: 8 })
    expect(m['t.i32s']).toMatchObject({ value: [1, -2, 3], subType: 5 })
    expect(m['t.f32s']).toMatchObject({ value: [1.5, -2.25], subType: 6 })
    expect(m['t.bools']).toMatchObject({ value: [true, false], subType: 7 })
    expect(m['t.u64s']).toMatchObject({ value: [1n, 2n], subType: 10 })

    expect(parsed.tensorInfos.map((t) => [t.name, t.shape.map(Number), t.dtype, Number(t.offset)])).toEqual([
      ['a', [3], 0, 0],
      ['b', [2, 2], 1, 64],
    ])
    // The data section starts at the first 64-byte boundary after the header.
    const bytes = readFileSync(path)
    const dataStart = bytes.length - 64 - 64
    expect(dataStart % 64).toBe(0)
    expect(Array.from(new Float32Array(bytes.buffer.slice(bytes.byteOffset + dataStart, bytes.byteOffset + dataStart + 12)))).toEqual([1, 2, 3])
    const half = new Uint16Array(bytes.buffer.slice(bytes.byteOffset + dataStart + 64, bytes.byteOffset + dataStart + 72))
    expect(Array.from(half)).toEqual([0x3800, 0xbc00, 0x7bff, float32ToFloat16Bits(1e-7)])
    expect(float32ToFloat16Bits(1e-7)).toBe(2) // a subnormal half
  })

  it('generators are deterministic for a seed', () => {
    const a = join(dir, 'seed-a.gguf')
    const b = join(dir, 'seed-b.gguf')
    const c = join(dir, 'seed-c.gguf')
    writeTinyLlama(a, { seed: 7 })
    writeTinyLlama(b, { seed: 7 })
    writeTinyLlama(c, { seed: 8 })
    expect(readFileSync(a).equals(readFileSync(b))).toBe(true)
    expect(readFileSync(a).equals(readFileSync(c))).toBe(false)
  })

  it('generateTestModels reuses a folder from the same generator version', () => {
    expect(models.generated).toBe(true)
    const again = generateTestModels(models.dir)
    expect(again.generated).toBe(false)
    expect(again.llamaChat).toEqual({ ...models.llamaChat })
    expect(again.whisper.path).toBe(models.whisper.path)
  })
})

describe('tiny llama', () => {
  it('chat model: formats ChatML, completes deterministically, round-trips text', async () => {
    const ctx = await llamaNode.loadModel({ model: models.llamaChat.path, n_ctx: 512, n_threads: 1, n_gpu_layers: 0 })
    try {
      expect(ctx.isJinjaSupported()).toBe(true)
      const chat = ctx.getFormattedChat(
        [
          { role: 'system', content: 'You are a tiny test model.' },
          { role: 'user', content: 'Hello there, how are you?' },
        ],
        undefined,
        { jinja: true },
      )
      expect(chat.type).toBe('jinja')
      const prompt = 'prompt' in chat ? chat.prompt : ''
      expect(prompt).toContain('<|im_start|>user\nHello there, how are you?<|im_end|>\n')
      expect(prompt.endsWith('<|im_start|>assistant\n')).toBe(true)

      const first = await ctx.completion({ prompt, ...greedy })
      const second = await ctx.completion({ prompt, ...greedy })
      expect(first.text.trim().length).toBeGreaterThan(0)
      expect(second.text).toBe(first.text)
      expect(first.tokens_predicted).toBeGreaterThanOrEqual(19)

      // Control tokens parse as single tokens.
      const imEnd = await ctx.tokenize('<|im_end|>')
      expect(Array.from(imEnd.tokens)).toEqual([models.llamaChat.tokens.imEnd])

      for (const text of ['Hello world, the quick brown fox jumps over the lazy dog.', 'I think 42 is a number!\nNew line.', 'héllo 日本']) {
        const { tokens } = await ctx.tokenize(text)
        expect(await ctx.detokenize(Array.from(tokens))).toBe(text)
      }
      // Known words are single pieces.
      expect((await ctx.tokenize('the water is cold')).tokens.length).toBe(4)
    } finally {
      await ctx.release()
    }
  })

  it('plain model has no chat template and still completes', async () => {
    const ctx = await llamaNode.loadModel({ model: models.llamaPlain.path, n_ctx: 512, n_threads: 1, n_gpu_layers: 0 })
    try {
      expect(ctx.isJinjaSupported()).toBe(false)
      expect(ctx.getModelInfo().metadata['tokenizer.chat_template']).toBeUndefined()
      const result = await ctx.completion({ prompt: 'Once upon a time', ...greedy })
      expect(result.text.trim().length).toBeGreaterThan(0)
    } finally {
      await ctx.release()
    }
  })

  it('mmproj: multimodal init and an image completion (file path and data: URL)', async () => {
    const ctx = await llamaNode.loadModel({ model: models.llamaChat.path, n_ctx: 512, n_threads: 1, n_gpu_layers: 0 })
    try {
      expect(ctx.initMultimodal({ path: models.mmproj.path, use_gpu: false })).toBe(true)
      expect(ctx.getMultimodalSupport()).toEqual({ vision: true, audio: false })

      const chat = ctx.getFormattedChat(
        [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url: pngPath } }] }],
        undefined,
        { jinja: true },
      )
      expect(chat.has_media).toBe(true)
      const prompt = 'prompt' in chat ? chat.prompt : ''
      const fromFile = await ctx.completion({ prompt, media_paths: chat.media_paths, ...greedy, n_predict: 8 })
      expect(fromFile.text.trim().length).toBeGreaterThan(0)

      const url = `data:image/png;base64,${readFileSync(pngPath).toString('base64')}`
      const fromUrl = await ctx.completion({
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }, { type: 'text', text: 'Describe it.' }] }],
        jinja: true,
        ...greedy,
        n_predict: 8,
      })
      expect(fromUrl.text.trim().length).toBeGreaterThan(0)
    } finally {
      await ctx.release()
    }
  })
})

describe('tiny bert', () => {
  const text = 'The quick brown fox jumps over the lazy dog.'

  it('embeds to a fixed-length vector, the same for the same text', async () => {
    // Fresh contexts: llama.node 1.7.15's ctx.embedding() reuses the previous call's
    // token prefix even for this encoder-only model, so a second call on the same
    // context only encodes the tail and returns a different vector (same with the
    // bge fixture). The parallel API below does not have that problem.
    const embed = async (input: string): Promise<number[]> => {
      const ctx = await llamaNode.loadModel({ model: models.bert.path, embedding: true, n_ctx: 512, n_threads: 1, n_gpu_layers: 0 })
      try {
        return Array.from((await ctx.embedding(input)).embedding)
      } finally {
        await ctx.release()
      }
    }
    const a = await embed(text)
    const b = await embed(text)
    const c = await embed('Something else entirely, 123.')
    expect(a).toHaveLength(models.bert.embd)
    expect(a.every(Number.isFinite)).toBe(true)
    expect(Math.hypot(...a)).toBeCloseTo(1, 4) // normalised by default
    expect(b).toEqual(a)
    expect(c).not.toEqual(a)

    const ctx = await llamaNode.loadModel({ model: models.bert.path, embedding: true, n_ctx: 512, n_threads: 1, n_gpu_layers: 0 })
    try {
      expect(await ctx.parallel.enable({ n_parallel: 1 })).toBe(true)
      const viaSlots = async (input: string): Promise<number[]> => Array.from((await (await ctx.parallel.embedding(input)).promise).embedding)
      const p1 = await viaSlots(text)
      const p2 = await viaSlots(text)
      expect(p2).toEqual(p1)
      p1.forEach((v, i) => expect(v).toBeCloseTo(a[i]!, 5))
    } finally {
      await ctx.release()
    }
  })

  it('tokenizes English with the WordPiece vocabulary', async () => {
    const ctx = await llamaNode.loadModel({ model: models.bert.path, embedding: true, n_ctx: 512, n_threads: 1, n_gpu_layers: 0 })
    try {
      // tokenize() adds no [CLS]/[SEP]: hello world , test ##ing quick ##ly .
      const { tokens } = await ctx.tokenize('Hello world, testing quickly.')
      expect(tokens.length).toBe(8)
      // Words outside the vocabulary fall back to single letters, not [UNK].
      expect((await ctx.tokenize('zebra xylophone')).tokens).not.toContain(models.bert.tokens.unk)
      expect((await ctx.detokenize(Array.from(tokens))).replace(/\s+/g, ' ').trim()).toBe('hello world , testing quickly .')
    } finally {
      await ctx.release()
    }
  })
})

describe('tiny whisper', () => {
  it('translates 2 s of audio into segments (greedy, 1 thread)', async () => {
    const ctx = await whisperNode.initWhisper({ filePath: models.whisper.path, useGpu: false })
    try {
      const sampleRate = 16000
      // whisper.node takes 16-bit samples (whatever its typings say).
      const audio = new Int16Array(2 * sampleRate).map((_, i) => Math.round(0.3 * 32767 * Math.sin((2 * Math.PI * 440 * i) / sampleRate)))
      const { promise } = ctx.transcribeData(audio.buffer, { language: 'de', translate: true, maxThreads: 1, temperature: 0 })
      const result = await promise
      expect(result.isAborted).toBe(false)
      expect(result.segments.length).toBeGreaterThan(0)
      expect(result.segments[0]).toMatchObject({ text: models.whisper.expectedText, t0: 0 })
      expect(result.result).toBe(models.whisper.expectedText)

      const auto = await ctx.transcribeData(audio.buffer, { language: 'auto', translate: true, maxThreads: 1 }).promise
      expect(auto.language).toBe('en')
      expect(auto.segments.map((s) => s.text)).toEqual([models.whisper.expectedText])
    } finally {
      await ctx.release()
    }
  })
})
