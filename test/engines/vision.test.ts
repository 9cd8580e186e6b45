/**
 * Chat with an image end to end: the real server, a tiny generated llama with a tiny random CLIP
 * projector, the official openai client for the good paths and raw HTTP for the bad ones. With
 * ../shared/fixtures present, the same with stories260K and its projector and a real photo.
 */
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions'
import sharp from 'sharp'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { describeIf, itIf } from '../support/skips.ts'
import { normalizeImageDataUrl } from '../../media/images/normalize-image.ts'
import { readProjectorInput } from '../../media/images/projector-input.ts'
import { postJson, startTestServer, type TestServer } from '../support/server-process.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { llamaBuild, startUpstreamLlamaServer } from '../support/upstream-servers.ts'
import { dataUrl, makeAnimatedGif, makeBmp, makeHugeJpeg, makeJpeg, makePixelBombPng, makePng, makeTruncatedPng, makeWebp } from '../support/test-images.ts'
import { writeTinyLlama, writeTinyMmproj, type TinyMmprojInfo } from '../support/tiny-models.ts'

const VISION = 'tiny-vision'
const TEXT_ONLY = 'text/tiny-text'
const STORIES = 'stories/stories260K-chatml'

const storiesModel = sharedFixture('models/stories260K-chatml.gguf')
const storiesProjector = sharedFixture('models/mmproj-tiny-random-llava-for-stories260K.gguf')
const photo = sharedFixture('images/test-1.jpeg')
const haveFixtures = storiesModel !== undefined && storiesProjector !== undefined && photo !== undefined

let modelsDir: string
let server: TestServer
let client: OpenAI
let projector: TinyMmprojInfo
let png: string

beforeAll(async () => {
  modelsDir = mkdtempSync(join(tmpdir(), 'hearth-vision-'))
  const llama = writeTinyLlama(join(modelsDir, 'tiny-vision.gguf'), { contextLength: 512 })
  // Paired by the folder rules: a projector named after the model, in its directory.
  projector = writeTinyMmproj(join(modelsDir, 'mmproj-tiny-vision.gguf'), { textEmbd: llama.embd })
  mkdirSync(join(modelsDir, 'text'))
  writeTinyLlama(join(modelsDir, 'text', 'tiny-text.gguf'), { contextLength: 512 })
  // Paired by the catalog.
  mkdirSync(join(modelsDir, 'catalog'))
  writeTinyLlama(join(modelsDir, 'catalog', 'llm.gguf'), { contextLength: 512 })
  writeTinyMmproj(join(modelsDir, 'catalog', 'projector.gguf'), { textEmbd: llama.embd })
  writeFileSync(
    join(modelsDir, 'models.json'),
    JSON.stringify({ models: [{ id: 'catalog-vision', file: 'catalog/llm.gguf', mmproj: 'catalog/projector.gguf' }] }),
  )
  if (haveFixtures) {
    mkdirSync(join(modelsDir, 'stories'))
    copyFileSync(storiesModel, join(modelsDir, 'stories', 'stories260K-chatml.gguf'))
    copyFileSync(storiesProjector, join(modelsDir, 'stories', 'mmproj-tiny-random-llava-for-stories260K.gguf'))
  }
  server = await startTestServer({ modelsDir })
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey, maxRetries: 0 })
  png = dataUrl(await makePng(), 'png')
})

afterAll(async () => {
  await server?.stop()
})

const ask = (url: string, text = 'What is in this image?'): ChatCompletionMessageParam[] => [
  {
    role: 'user',
    content: [
      { type: 'text', text },
      { type: 'image_url', image_url: { url } },
    ],
  },
]

async function answer(model: string, messages: ChatCompletionMessageParam[], maxTokens = 8) {
  const completion = await client.chat.completions.create({ model, messages, max_tokens: maxTokens })
  return { text: completion.choices[0]!.message.content ?? '', usage: completion.usage!, finish: completion.choices[0]!.finish_reason }
}

async function streamed(model: string, messages: ChatCompletionMessageParam[], maxTokens = 8) {
  const stream = await client.chat.completions.create({
    model,
    messages,
    max_tokens: maxTokens,
    stream: true,
    stream_options: { include_usage: true },
  })
  let text = ''
  let usage: OpenAI.CompletionUsage | undefined
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? ''
    if (chunk.usage) usage = chunk.usage
  }
  return { text, usage: usage! }
}

/** Engine processes are the server's children; a bad image must not cost one. */
function engineProcessIds(): number[] {
  try {
    return execFileSync('pgrep', ['-P', String(server.process.pid)])
      .toString()
      .trim()
      .split('\n')
      .filter(Boolean)
      .map(Number)
  } catch {
    return []
  }
}

describe('vision models', () => {
  it('shows vision where a projector pairs, by folder rules or catalog', async () => {
    const models = (await client.models.list()).data as unknown as Array<{ id: string; capabilities: string[]; state: string }>
    const byId = new Map(models.map((m) => [m.id, m]))
    expect(byId.get(VISION)?.capabilities).toEqual(['chat', 'vision'])
    expect(byId.get('catalog-vision')?.capabilities).toEqual(['chat', 'vision'])
    expect(byId.get(TEXT_ONLY)?.capabilities).toEqual(['chat'])
    expect(byId.get(VISION)?.state).toBe('available')
  })

  it('answers an image through the official client, counting its tokens in the prompt', async () => {
    const withImage = await answer(VISION, ask(png))
    const textOnly = await answer(VISION, [{ role: 'user', content: 'What is in this image?' }])
    expect(withImage.text.length).toBeGreaterThan(0)
    // The image part adds its tokens; llama-server joins a media part to the text without a newline.
    expect(withImage.usage.prompt_tokens).toBe(textOnly.usage.prompt_tokens + projector.tokensPerImage)
    expect(withImage.usage.total_tokens).toBe(withImage.usage.prompt_tokens + withImage.usage.completion_tokens)
    console.log(`tiny projector: ${projector.tokensPerImage} image tokens; prompt ${textOnly.usage.prompt_tokens} → ${withImage.usage.prompt_tokens} tokens`)
  })

  itIf(llamaBuild, 'needs llama.cpp built here (npm run build:engines)')(
    'counts prompt tokens with the image exactly as llama.cpp evaluates them',
    async () => {
      const messages = ask(png)
      const { usage } = await answer(VISION, messages, 1)
      const { maxSide } = await readProjectorInput(projector.path)
      const normalised = await normalizeImageDataUrl(png, { maxSide })
      const upstream = await startUpstreamLlamaServer([
        '-m',
        join(modelsDir, 'tiny-vision.gguf'),
        '--mmproj',
        projector.path,
        '-c',
        '512',
        '-t',
        '1',
        '-np',
        '1',
      ])
      try {
        const content = [
          { type: 'text', text: 'What is in this image?' },
          { type: 'image_url', image_url: { url: normalised.dataUrl } },
        ]
        const res = await fetch(`${upstream.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ messages: [{ role: 'user', content }], max_tokens: 1, temperature: 0 }),
        })
        const direct = await res.json()
        expect(direct.timings.prompt_n + direct.timings.cache_n).toBe(direct.usage.prompt_tokens)
        expect(usage.prompt_tokens).toBe(direct.usage.prompt_tokens)
      } finally {
        await upstream.stop()
      }
    },
  )

  it('is deterministic at temperature 0: the same image twice, streamed or not, gives the same answer', async () => {
    const a = await answer(VISION, ask(png), 24)
    const b = await answer(VISION, ask(png), 24)
    const s = await streamed(VISION, ask(png), 24)
    expect(b.text).toBe(a.text)
    expect(s.text).toBe(a.text)
    expect(s.usage.prompt_tokens).toBe(a.usage.prompt_tokens)
  })

  it('takes the image in any user message, between text parts, with detail', async () => {
    const messages: ChatCompletionMessageParam[] = [
      { role: 'system', content: 'You describe pictures.' },
      { role: 'user', content: [{ type: 'text', text: 'Hello' }] },
      { role: 'assistant', content: 'Hi, send me a picture.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Here:' },
          { type: 'image_url', image_url: { url: png, detail: 'low' } },
          { type: 'text', text: 'What is it?' },
        ],
      },
    ]
    const { text, usage } = await answer(VISION, messages)
    expect(text.length).toBeGreaterThan(0)
    expect(usage.prompt_tokens).toBeGreaterThan(projector.tokensPerImage)
  })

  it('accepts png, jpeg, webp, gif (first frame) and bmp, and a 6000×4000 photo costs what a small one does', async () => {
    const images = {
      jpeg: dataUrl(await makeJpeg(), 'jpeg'),
      webp: dataUrl(await makeWebp(), 'webp'),
      gif: dataUrl(await makeAnimatedGif(), 'gif'),
      bmp: dataUrl(makeBmp(), 'bmp'),
      bmp32: dataUrl(makeBmp(48, 40, 32), 'bmp'),
    }
    const small = await answer(VISION, ask(png))
    for (const [format, url] of Object.entries(images)) {
      const { text, usage } = await answer(VISION, ask(url))
      expect(text.length, format).toBeGreaterThan(0)
      expect(usage.prompt_tokens, format).toBe(small.usage.prompt_tokens)
    }
    const huge = dataUrl(await makeHugeJpeg(), 'jpeg')
    const started = performance.now()
    const big = await answer(VISION, ask(huge))
    const ms = performance.now() - started
    expect(big.usage.prompt_tokens).toBe(small.usage.prompt_tokens)
    console.log(`6000×4000 JPEG (${(huge.length / 1e6).toFixed(1)} MB as base64): answered in ${ms.toFixed(0)} ms`)
  })

  it('treats the image marker as plain text, with or without an image', async () => {
    const { text } = await answer(VISION, [{ role: 'user', content: 'What is <__media__> here?' }])
    expect(text.length).toBeGreaterThan(0)
    // llama-server marks images with a marker of its own, unguessable, so the text cannot fake one.
    const withImage = await answer(VISION, ask(png, 'What is <__media__> here?'))
    const plain = await answer(VISION, ask(png, 'What is it here?'))
    expect(withImage.usage.prompt_tokens).toBeGreaterThan(plain.usage.prompt_tokens)
  })

  it('refuses an image to a model without vision, and that model still chats', async () => {
    const res = await postJson(server, '/v1/chat/completions', { model: TEXT_ONLY, messages: ask(png) })
    expect(res.status).toBe(400)
    expect(res.json.error).toMatchObject({ code: 'model_not_compatible', param: 'model', type: 'invalid_request_error' })
    const ok = await answer(TEXT_ONLY, [{ role: 'user', content: 'Hello' }])
    expect(ok.text.length).toBeGreaterThan(0)
  })

  it('counts the image tokens against the context: an answer stops where the context is full', async () => {
    const { usage } = await answer(VISION, ask(png), 1)
    const room = 512 - usage.prompt_tokens
    const res = await postJson(server, '/v1/chat/completions', { model: VISION, messages: ask(png), max_tokens: room + 50 })
    expect(res.status).toBe(200)
    expect(res.json.choices[0].finish_reason).toBe('length')
    expect(res.json.usage.prompt_tokens + res.json.usage.completion_tokens).toBeLessThanOrEqual(512)
    expect(res.json.usage.completion_tokens).toBeGreaterThanOrEqual(room - 1)
  })

  describe('bad images: 400 with the part named, and the model keeps working', () => {
    const part = 'messages[0].content[1].image_url.url'
    const cases: Array<[name: string, body: () => Promise<object>, code: string, param: string]> = [
      [
        'a second image in another message',
        async () => ({ messages: [...ask(png), { role: 'assistant', content: 'ok' }, ...ask(png)] }),
        'too_many_images',
        'messages[2].content[1].image_url.url',
      ],
      [
        'a second image in the same message',
        async () => ({
          messages: [
            {
              role: 'user',
              content: [
                { type: 'image_url', image_url: { url: png } },
                { type: 'image_url', image_url: { url: png } },
              ],
            },
          ],
        }),
        'too_many_images',
        'messages[0].content[1].image_url.url',
      ],
      [
        'an image in a system message',
        async () => ({
          messages: [
            { role: 'system', content: [{ type: 'image_url', image_url: { url: png } }] },
            { role: 'user', content: 'Hi' },
          ],
        }),
        'invalid_value',
        'messages[0].content[0]',
      ],
      ['an http URL', async () => ({ messages: ask('http://127.0.0.1:9/cat.png') }), 'invalid_image', part],
      ['an https URL', async () => ({ messages: ask('https://example.com/cat.png') }), 'invalid_image', part],
      ['a file: URL', async () => ({ messages: ask('file:///etc/passwd') }), 'invalid_image', part],
      ['an empty URL', async () => ({ messages: ask('') }), 'invalid_image', part],
      ['bad base64', async () => ({ messages: ask('data:image/png;base64,iVBORw0KGgo*&^%$#@!') }), 'invalid_image', part],
      ['base64 with spaces', async () => ({ messages: ask(png.replace(/(.{100})/, '$1 ')) }), 'invalid_image', part],
      ['bytes that are not an image', async () => ({ messages: ask(dataUrl(Buffer.from('just some text, no image at all'), 'png')) }), 'invalid_image', part],
      [
        'an image format we do not take (TIFF)',
        async () => ({
          messages: ask(
            dataUrl(
              await sharp(await makePng())
                .tiff()
                .toBuffer(),
              'tiff',
            ),
          ),
        }),
        'invalid_image',
        part,
      ],
      ['a truncated PNG', async () => ({ messages: ask(dataUrl(await makeTruncatedPng(), 'png')) }), 'invalid_image', part],
      ['absurd dimensions', async () => ({ messages: ask(dataUrl(makePixelBombPng(), 'png')) }), 'invalid_image', part],
      ['21 MB of bytes', async () => ({ messages: ask(dataUrl(Buffer.alloc(21 * 1024 * 1024, 7), 'png')) }), 'invalid_image', part],
    ]

    it.each(cases)('%s', async (_name, body, code, param) => {
      const enginesBefore = engineProcessIds()
      const res = await postJson(server, '/v1/chat/completions', { model: VISION, max_tokens: 4, ...(await body()) })
      expect(res.status).toBe(400)
      expect(res.json).toEqual({ error: { message: expect.any(String), type: 'invalid_request_error', param, code } })
      const ok = await answer(VISION, ask(png), 4)
      expect(ok.text.length).toBeGreaterThan(0)
      if (enginesBefore.length > 0) expect(engineProcessIds()).toEqual(enginesBefore)
    })

    it('a bad image streamed is refused before the stream starts', async () => {
      const res = await postJson(server, '/v1/chat/completions', { model: VISION, stream: true, messages: ask('data:image/png;base64,AAAA') })
      expect(res.status).toBe(400)
      expect(res.json.error).toMatchObject({ code: 'invalid_image', param: part })
      const ok = await streamed(VISION, ask(png), 4)
      expect(ok.text.length).toBeGreaterThan(0)
    })

    it("through /v1/responses, names the Responses request's own fields", async () => {
      const askItem = (url: string) => ({
        role: 'user',
        content: [
          { type: 'input_text', text: 'What is in this image?' },
          { type: 'input_image', image_url: url },
        ],
      })
      const cases: Array<[body: object, code: string, param: string]> = [
        [{ input: [askItem('data:image/png;base64,iVBORw0KGgo*&^%$#@!')] }, 'invalid_image', 'input[0].content[1].image_url'],
        // instructions become the chat's first message: the input's items keep their own numbers
        [{ instructions: 'Be brief.', input: [askItem('https://example.com/cat.png')] }, 'invalid_image', 'input[0].content[1].image_url'],
        [{ input: [askItem(png), { role: 'assistant', content: 'ok' }, askItem(png)] }, 'too_many_images', 'input[2].content[1].image_url'],
        [
          {
            input: [
              { role: 'system', content: [{ type: 'input_image', image_url: png }] },
              { role: 'user', content: 'Hi' },
            ],
          },
          'invalid_value',
          'input[0].content[0]',
        ],
      ]
      for (const [body, code, param] of cases) {
        const res = await postJson(server, '/v1/responses', { model: VISION, max_output_tokens: 4, ...body })
        expect([res.status, res.json.error], JSON.stringify(body).slice(0, 200)).toEqual([
          400,
          { message: expect.any(String), type: 'invalid_request_error', param, code },
        ])
      }
    })
  })
})

describeIf(haveFixtures, 'needs the shared fixtures (../shared/fixtures)')('stories260K with its projector and a real photo (shared fixtures)', () => {
  let formats: Record<string, string>

  beforeAll(async () => {
    const jpeg = readFileSync(photo!)
    formats = {
      jpeg: dataUrl(jpeg, 'jpeg'),
      png: dataUrl(await sharp(jpeg).png().toBuffer(), 'png'),
      webp: dataUrl(await sharp(jpeg).webp().toBuffer(), 'webp'),
    }
  })

  it('pairs the projector and lists the model with vision', async () => {
    const model = (await client.models.retrieve(STORIES)) as unknown as { capabilities: string[] }
    expect(model.capabilities).toEqual(['chat', 'vision'])
  })

  it.each(['jpeg', 'png', 'webp'])('answers the photo as %s, streamed and not, the same way', async (format) => {
    const messages = ask(formats[format]!, 'Tell me a story about this picture.')
    const plain = await answer(STORIES, messages, 24)
    const again = await answer(STORIES, messages, 24)
    const stream = await streamed(STORIES, messages, 24)
    expect(plain.text.length).toBeGreaterThan(0)
    expect(again.text).toBe(plain.text)
    expect(stream.text).toBe(plain.text)
    expect(stream.usage.prompt_tokens).toBe(plain.usage.prompt_tokens)
    const textOnly = await answer(STORIES, [{ role: 'user', content: 'Tell me a story about this picture.' }], 1)
    // The fixture projector makes 16 image tokens; the image also brings the newline that joins it,
    // and splitting the text around the image may tokenize its edge differently.
    const added = plain.usage.prompt_tokens - textOnly.usage.prompt_tokens
    console.log(`stories260K, photo as ${format}: prompt ${textOnly.usage.prompt_tokens} → ${plain.usage.prompt_tokens} tokens; ${JSON.stringify(plain.text)}`)
    expect(added).toBeGreaterThanOrEqual(16 + 1)
    expect(added).toBeLessThanOrEqual(16 + 3)
  })
})
