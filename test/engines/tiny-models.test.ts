/**
 * The tiny generated models load and run in llama.cpp's and whisper.cpp's own servers (upstream
 * llama-server and whisper-server from the engine builds, no Hearth in between).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gguf } from '@huggingface/gguf'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { wavFile } from '../audio/synthesize-audio-files.ts'
import { generateTestModels, writeTestPng, type TestModels } from '../support/tiny-models.ts'
import { llamaBuild, startUpstreamLlamaServer, startUpstreamWhisperServer, whisperBuild, type UpstreamServer } from '../support/upstream-servers.ts'
import { cannotRun, describeIf } from '../support/skips.ts'

if (!llamaBuild) cannotRun('the tiny llama and bert checks need llama.cpp built here (npm run build:engines)')
if (!whisperBuild) cannotRun('the tiny whisper check needs whisper.cpp built here (npm run build:engines)')

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

describeIf(llamaBuild, 'needs llama.cpp built here (npm run build:engines)')('tiny llama', () => {
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
      const withImage = await ask([
        { type: 'image_url', image_url: { url } },
        { type: 'text', text: 'Describe it.' },
      ])
      const textOnly = await ask([{ type: 'text', text: 'Describe it.' }])
      expect(withImage.choices[0].message.content.trim().length).toBeGreaterThan(0)
      expect(withImage.usage.prompt_tokens).toBeGreaterThan(textOnly.usage.prompt_tokens)
    })
  })
})

describeIf(llamaBuild, 'needs llama.cpp built here (npm run build:engines)')('tiny bert', () => {
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

describeIf(whisperBuild, 'needs whisper.cpp built here (npm run build:engines)')('tiny whisper', () => {
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
