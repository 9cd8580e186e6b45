/**
 * The tiny generated models load and run in llama.cpp's and whisper.cpp's own servers (upstream
 * llama-server and whisper-server from the engine builds, no Hearth in between).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gguf } from '@huggingface/gguf'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { wavFile } from './audio/synthesize-audio-files.ts'
import { float32ToFloat16Bits, kv, writeGguf } from './support/gguf-writer.ts'
import {
  generateTestModels,
  writeTestPng,
  writeTinyLlama,
  type TestModels,
} from './support/tiny-models.ts'
import { llamaBuild, startUpstreamLlamaServer, startUpstreamWhisperServer, whisperBuild, type UpstreamServer } from './support/upstream-servers.ts'

if (!llamaBuild) console.warn('*** SKIPPED: the tiny llama and bert checks need llama.cpp built here (npm run build:engines)')
if (!whisperBuild) console.warn('*** SKIPPED: the tiny whisper check needs whisper.cpp built here (npm run build:engines)')

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

/** A JSON request to an upstream server; anything but a 2xx fails the test with the server's words. */
async function post(server: UpstreamServer, path: string, body: unknown): Promise<any> {
  const res = await fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  const json = await res.json()
  if (!res.ok) throw new Error(`${path} answered ${res.status}: ${JSON.stringify(json)}`)
  return json
}

/** Runs `use` against llama-server serving `args`' model on one thread, then stops it. */
async function withLlamaServer<T>(args: string[], use: (server: UpstreamServer) => Promise<T>): Promise<T> {
  const server = await startUpstreamLlamaServer([...args, '--ctx-size', '512', '--threads', '1', '--parallel', '1'])
  try {
    return await use(server)
  } finally {
    await server.stop()
  }
}

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

describe.skipIf(!llamaBuild)('tiny llama', () => {
  it('chat model: formats ChatML, completes deterministically, round-trips text', async () => {
    await withLlamaServer(['--model', models.llamaChat.path], async (server) => {
      const { prompt } = await post(server, '/apply-template', {
        messages: [
          { role: 'system', content: 'You are a tiny test model.' },
          { role: 'user', content: 'Hello there, how are you?' },
        ],
      })
      expect(prompt).toContain('<|im_start|>user\nHello there, how are you?<|im_end|>\n')
      expect(prompt.endsWith('<|im_start|>assistant\n')).toBe(true)

      const first = await post(server, '/completion', { prompt, ...greedy })
      const second = await post(server, '/completion', { prompt, ...greedy })
      expect(first.content.trim().length).toBeGreaterThan(0)
      expect(second.content).toBe(first.content)
      expect(first.tokens_predicted).toBeGreaterThanOrEqual(19)

      // Control tokens parse as single tokens.
      expect((await post(server, '/tokenize', { content: '<|im_end|>' })).tokens).toEqual([models.llamaChat.tokens.imEnd])

      for (const text of ['Hello world, the quick brown fox jumps over the lazy dog.', 'I think 42 is a number!\nNew line.', 'héllo 日本']) {
        const { tokens } = await post(server, '/tokenize', { content: text })
        expect((await post(server, '/detokenize', { tokens })).content).toBe(text)
      }
      // Known words are single pieces.
      expect((await post(server, '/tokenize', { content: 'the water is cold' })).tokens.length).toBe(4)
    })
  })

  it('plain model has no chat template and still completes', async () => {
    const { metadata } = await gguf(models.llamaPlain.path, { allowLocalFile: true })
    expect(Object.keys(metadata)).not.toContain('tokenizer.chat_template')
    await withLlamaServer(['--model', models.llamaPlain.path], async (server) => {
      const result = await post(server, '/completion', { prompt: 'Once upon a time', ...greedy })
      expect(result.content.trim().length).toBeGreaterThan(0)
    })
  })

  it('mmproj: the projector loads beside the model, and an image takes its place in the prompt', async () => {
    await withLlamaServer(['--model', models.llamaChat.path, '--mmproj', models.mmproj.path, '--no-mmproj-offload'], async (server) => {
      const props = await (await fetch(`${server.url}/props`)).json()
      expect(props.modalities).toMatchObject({ vision: true, audio: false })

      const url = `data:image/png;base64,${readFileSync(pngPath).toString('base64')}`
      const ask = (content: unknown) => post(server, '/v1/chat/completions', { messages: [{ role: 'user', content }], max_tokens: 8, temperature: 0 })
      const withImage = await ask([{ type: 'image_url', image_url: { url } }, { type: 'text', text: 'Describe it.' }])
      const textOnly = await ask([{ type: 'text', text: 'Describe it.' }])
      expect(withImage.choices[0].message.content.trim().length).toBeGreaterThan(0)
      expect(withImage.usage.prompt_tokens).toBeGreaterThan(textOnly.usage.prompt_tokens)
    })
  })
})

describe.skipIf(!llamaBuild)('tiny bert', () => {
  const text = 'The quick brown fox jumps over the lazy dog.'

  it('embeds to a fixed-length vector, the same for the same text', async () => {
    await withLlamaServer(['--model', models.bert.path, '--embedding'], async (server) => {
      const embed = async (input: string): Promise<number[]> => (await post(server, '/v1/embeddings', { input })).data[0].embedding
      const a = await embed(text)
      const b = await embed(text)
      const c = await embed('Something else entirely, 123.')
      expect(a).toHaveLength(models.bert.embd)
      expect(a.every(Number.isFinite)).toBe(true)
      expect(Math.hypot(...a)).toBeCloseTo(1, 4) // normalised by default
      expect(b).toEqual(a)
      expect(c).not.toEqual(a)
    })
  })

  it('tokenizes English with the WordPiece vocabulary', async () => {
    await withLlamaServer(['--model', models.bert.path, '--embedding'], async (server) => {
      // No [CLS]/[SEP] unless asked: hello world , test ##ing quick ##ly .
      const { tokens } = await post(server, '/tokenize', { content: 'Hello world, testing quickly.' })
      expect(tokens.length).toBe(8)
      // Words outside the vocabulary fall back to single letters, not [UNK].
      expect((await post(server, '/tokenize', { content: 'zebra xylophone' })).tokens).not.toContain(models.bert.tokens.unk)
      expect((await post(server, '/detokenize', { tokens })).content.replace(/\s+/g, ' ').trim()).toBe('hello world , testing quickly .')
    })
  })
})

describe.skipIf(!whisperBuild)('tiny whisper', () => {
  it('translates 2 s of audio into segments (greedy, 1 thread)', async () => {
    const sampleRate = 16000
    const samples = new Float32Array(2 * sampleRate).map((_, i) => 0.3 * Math.sin((2 * Math.PI * 440 * i) / sampleRate))
    const wav = wavFile(samples, { sampleRate, encoding: 'int', bitsPerSample: 16 })
    const server = await startUpstreamWhisperServer(['--model', models.whisper.path, '--threads', '1', '--no-language-probabilities'])
    try {
      const translate = async (language: string) => {
        const body = new FormData()
        body.append('file', new Blob([new Uint8Array(wav)], { type: 'audio/wav' }), 'sine.wav')
        const options = { translate: 'true', response_format: 'verbose_json', language, temperature: '0', temperature_inc: '0', best_of: '1', beam_size: '-1' }
        for (const [k, v] of Object.entries(options)) body.append(k, v)
        const res = await fetch(`${server.url}/inference`, { method: 'POST', body })
        expect(res.status).toBe(200)
        return (await res.json()) as { text: string; language: string; segments: Array<{ text: string; start: number }> }
      }
      const told = await translate('de')
      expect(told.segments.length).toBeGreaterThan(0)
      expect(told.segments[0]).toMatchObject({ text: models.whisper.expectedText, start: 0 })
      expect(told.text.trimEnd()).toBe(models.whisper.expectedText) // whisper-server ends each segment's line

      const auto = await translate('auto')
      expect(auto.language).toBe('english')
      expect(auto.segments.map((s) => s.text)).toEqual([models.whisper.expectedText])
    } finally {
      await server.stop()
    }
  })
})
