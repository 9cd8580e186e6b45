/**
 * Real text from the only trained weights on these machines (../shared/fixtures): stories260K with a
 * ChatML template. Skipped, loudly, where the shared fixtures are absent.
 */
import { copyFileSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { describeIf } from '../support/skips.ts'
import { startTestServer, type TestServer } from '../support/server-process.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'

const stories = sharedFixture('models/stories260K-chatml.gguf')

describeIf(stories, 'needs the shared fixtures (../shared/fixtures)')('stories260K-chatml (shared fixture)', () => {
  let server: TestServer
  let client: OpenAI

  beforeAll(async () => {
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-stories-'))
    copyFileSync(stories!, join(modelsDir, 'stories260K-chatml.gguf'))
    server = await startTestServer({ modelsDir })
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey, maxRetries: 0 })
  })
  afterAll(async () => {
    await server?.stop()
  })

  it('reports the trained context and the chat capability from the header', async () => {
    const model = (await client.models.retrieve('stories260K-chatml')) as any
    expect(model).toMatchObject({ context_length: 2048, max_completion_tokens: 2048, capabilities: ['chat'] })
  })

  it('tells a story-like English continuation of "Once upon a time", the same twice at temperature 0', async () => {
    const ask = () =>
      client.chat.completions.create({
        model: 'stories260K-chatml',
        messages: [{ role: 'user', content: 'Once upon a time' }],
        max_tokens: 60,
        temperature: 0,
      })
    const [a, b] = [await ask(), await ask()]
    const text = a.choices[0]!.message.content!
    expect(b.choices[0]!.message.content).toBe(text)
    const words = text.toLowerCase().match(/[a-z]+/g) ?? []
    expect(words.length).toBeGreaterThan(8)
    // TinyStories vocabulary: most words are common English story words.
    const common = new Set(
      'a the and was he she they it to of in on saw big little day said his her with is were had very an ran so went happy wanted one time there once upon girl boy mom friend play bird tree park asked jack'.split(
        ' ',
      ),
    )
    expect(words.filter((w) => common.has(w)).length / words.length).toBeGreaterThan(0.3)
    expect(a.usage!.prompt_tokens).toBe(46)
  })

  it('streams the same text it returns whole', async () => {
    const whole = await client.chat.completions.create({
      model: 'stories260K-chatml',
      messages: [{ role: 'user', content: 'The little dog' }],
      max_tokens: 40,
    })
    const stream = await client.chat.completions.create({
      model: 'stories260K-chatml',
      messages: [{ role: 'user', content: 'The little dog' }],
      max_tokens: 40,
      stream: true,
      stream_options: { include_usage: true },
    })
    let text = ''
    let usage: typeof whole.usage
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? ''
      usage = chunk.usage ?? usage
    }
    expect(text).toBe(whole.choices[0]!.message.content)
    const { prompt_tokens_details: cached, ...counts } = usage!
    const { prompt_tokens_details: _, ...wholeCounts } = whole.usage!
    expect(counts).toEqual(wholeCounts)
    // The same prompt again comes from the engine's cache, all but the last token, which is evaluated anew.
    expect(cached?.cached_tokens).toBe(whole.usage!.prompt_tokens - 1)
  })
})
