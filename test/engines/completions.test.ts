/**
 * POST /v1/completions through openai-node: text continued without a chat template, several
 * prompts, prompts of token ids (as evaluation harnesses send them), echo, legacy logprobs,
 * streaming, and fill-in-the-middle with `suffix` on a model that has FIM tokens (Qwen's vocabulary
 * does), refused by name on one that has none.
 */
import { copyFileSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { familyModel } from '../support/family-models.ts'
import { PROJECT_ROOT, postJson, startTestServer, type TestServer } from '../support/server-process.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { buildSpmVocab, writeTinyBert, writeTinyLlama } from '../support/tiny-models.ts'
import { llamaBuild } from '../support/upstream-servers.ts'
import { cannotRun, describeIf, itIf } from '../support/skips.ts'

const coderTemplate = sharedFixture('chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja')
if (!llamaBuild) cannotRun('llama.cpp is not built on this machine (npm run build:engines); the completions suite cannot run')

describeIf(llamaBuild, 'needs llama.cpp built here (npm run build:engines)')('/v1/completions', () => {
  let server: TestServer
  let client: OpenAI

  beforeAll(async () => {
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-completions-'))
    writeTinyLlama(join(modelsDir, 'plain.gguf'), { contextLength: 512 })
    writeTinyBert(join(modelsDir, 'bert.gguf'))
    if (coderTemplate) {
      const path = familyModel(
        join(PROJECT_ROOT, 'test/artifacts/family-models'),
        { template: 'Qwen-Qwen2.5-7B-Instruct', vocabulary: 'qwen3' },
        readFileSync(coderTemplate, 'utf8'),
      )
      copyFileSync(path, join(modelsDir, 'qwen-fim.gguf'))
    }
    server = await startTestServer({ modelsDir })
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey })
  })

  afterAll(async () => {
    await server?.stop()
  })

  it('continues a prompt as it is, 16 tokens unless told otherwise', async () => {
    const completion = await client.completions.create({ model: 'plain', prompt: 'Once upon a time' })
    expect(completion.id).toMatch(/^cmpl-/)
    expect(completion.object).toBe('text_completion')
    expect(completion.choices).toHaveLength(1)
    expect(completion.choices[0]!.text.length).toBeGreaterThan(0)
    expect(completion.choices[0]!.finish_reason).toBe('length')
    expect(completion.usage).toMatchObject({ completion_tokens: 16 })
    expect(completion.usage!.total_tokens).toBe(completion.usage!.prompt_tokens + 16)
    // No chat template: a prompt of a few words costs a few tokens.
    expect(completion.usage!.prompt_tokens).toBeLessThan(10)
  })

  it('answers several prompts as several choices, in order', async () => {
    const completion = await client.completions.create({ model: 'plain', prompt: ['the sea', 'a tree by the river'], max_tokens: 3 })
    expect(completion.choices.map((c) => c.index)).toEqual([0, 1])
    const one = await client.completions.create({ model: 'plain', prompt: 'a tree by the river', max_tokens: 3 })
    expect(completion.choices[1]!.text).toBe(one.choices[0]!.text)
    expect(completion.usage!.completion_tokens).toBe(6)
  })

  it('continues a prompt of token ids as it does the same prompt in text, one or several, streamed or not', async () => {
    // "the sea" in the tiny model's vocabulary, as its tokenizer reads it: <s> the ▁sea.
    const vocabulary = buildSpmVocab().tokens
    const ids = ['<s>', 'the', '\u2581sea'].map((t) => vocabulary.indexOf(t))
    const text = await client.completions.create({ model: 'plain', prompt: 'the sea', max_tokens: 4 })
    const tokens = await client.completions.create({ model: 'plain', prompt: ids, max_tokens: 4 })
    expect(tokens.choices[0]!.text).toBe(text.choices[0]!.text)
    expect(tokens.usage!.prompt_tokens).toBe(text.usage!.prompt_tokens)
    const several = await client.completions.create({ model: 'plain', prompt: [ids, ids.slice(0, 2)], max_tokens: 4 })
    expect(several.choices.map((c) => c.text)[0]).toBe(text.choices[0]!.text)
    expect(several.usage!.prompt_tokens).toBe(ids.length * 2 - 1)
    let streamed = ''
    for await (const chunk of await client.completions.create({ model: 'plain', prompt: ids, max_tokens: 4, stream: true }))
      streamed += chunk.choices[0]?.text ?? ''
    expect(streamed).toBe(text.choices[0]!.text)
  })

  it('echo puts the prompt before the text; logprobs come in the legacy shape', async () => {
    const echoed = await client.completions.create({ model: 'plain', prompt: 'the sea', max_tokens: 3, echo: true })
    const plain = await client.completions.create({ model: 'plain', prompt: 'the sea', max_tokens: 3 })
    expect(echoed.choices[0]!.text).toBe(`the sea${plain.choices[0]!.text}`)
    const withLogprobs = await client.completions.create({ model: 'plain', prompt: 'the sea', max_tokens: 4, logprobs: 2 })
    const lp = withLogprobs.choices[0]!.logprobs!
    expect(lp.tokens!.join('')).toBe(withLogprobs.choices[0]!.text)
    expect(lp.token_logprobs).toHaveLength(lp.tokens!.length)
    expect(lp.text_offset![0]).toBe(0)
    for (const [i, top] of lp.top_logprobs!.entries()) {
      expect(Object.keys(top).length).toBeLessThanOrEqual(2)
      expect(Math.max(...Object.values(top))).toBeCloseTo(lp.token_logprobs![i]!, 5)
    }
  })

  it('streams the same text, with usage at the end when asked', async () => {
    const whole = await client.completions.create({ model: 'plain', prompt: 'Once upon a time', max_tokens: 8 })
    const stream = await client.completions.create({
      model: 'plain',
      prompt: 'Once upon a time',
      max_tokens: 8,
      stream: true,
      stream_options: { include_usage: true },
    })
    let text = ''
    let finish: string | null = null
    let usage: OpenAI.CompletionUsage | undefined
    for await (const chunk of stream) {
      text += chunk.choices[0]?.text ?? ''
      finish = chunk.choices[0]?.finish_reason ?? finish
      usage = chunk.usage ?? usage
    }
    expect(text).toBe(whole.choices[0]!.text)
    expect(finish).toBe('length')
    expect(usage).toMatchObject({ completion_tokens: 8 })
  })

  itIf(coderTemplate, 'needs the chat templates of ../shared/fixtures')('fills in the middle with suffix on a model with FIM tokens', async () => {
    const completion = await client.completions.create({
      model: 'qwen-fim',
      prompt: 'def add(a, b):\n    return ',
      suffix: '\n\nprint(add(1, 2))\n',
      max_tokens: 5,
    })
    expect(completion.choices[0]!.text.length).toBeGreaterThan(0)
    // Prefix, suffix and the FIM markers are all in the prompt.
    const prefixOnly = await client.completions.create({ model: 'qwen-fim', prompt: 'def add(a, b):\n    return ', max_tokens: 5 })
    expect(completion.usage!.prompt_tokens).toBeGreaterThan(prefixOnly.usage!.prompt_tokens + 5)
  })

  it('refuses suffix on a model without FIM tokens, naming suffix', async () => {
    const res = await postJson(server, '/v1/completions', { model: 'plain', prompt: 'a', suffix: 'b', max_tokens: 2 })
    expect(res.status).toBe(400)
    expect(res.json.error).toMatchObject({ code: 'model_not_compatible', param: 'suffix' })
  })

  it.each([
    ['no prompt', { model: 'plain' }, 'prompt', 'missing_required_parameter'],
    ['n > 1', { model: 'plain', prompt: 'a', n: 2 }, 'n', 'unsupported_parameter'],
    ['best_of > 1', { model: 'plain', prompt: 'a', best_of: 3 }, 'best_of', 'unsupported_parameter'],
    ['logprobs over 5', { model: 'plain', prompt: 'a', logprobs: 6 }, 'logprobs', 'invalid_value'],
    ['echo with logprobs', { model: 'plain', prompt: 'a', echo: true, logprobs: 1 }, 'logprobs', 'unsupported_parameter'],
    ['echo with suffix', { model: 'plain', prompt: 'a', echo: true, suffix: 'b' }, 'echo', 'invalid_value'],
    ['several prompts streamed', { model: 'plain', prompt: ['a', 'b'], stream: true }, 'prompt', 'invalid_value'],
    ['max_tokens over the model', { model: 'plain', prompt: 'a', max_tokens: 100_000 }, 'max_tokens', 'invalid_value'],
    ['stream_options without stream', { model: 'plain', prompt: 'a', stream_options: { include_usage: true } }, 'stream_options', 'invalid_value'],
    ['an embedding model', { model: 'bert', prompt: 'a' }, 'model', 'model_not_compatible'],
    ['a token id the model does not have', { model: 'plain', prompt: 'a', logit_bias: { '999999': 1 } }, 'logit_bias.999999', 'invalid_value'],
    ['a prompt token id the model does not have', { model: 'plain', prompt: [1, 263, 999999] }, 'prompt', 'invalid_value'],
    ['a negative prompt token id', { model: 'plain', prompt: [1, -4] }, 'prompt[1]', 'invalid_value'],
    ['an empty prompt of token ids', { model: 'plain', prompt: [[1, 263], []] }, 'prompt[1]', 'invalid_value'],
    ['17 prompts', { model: 'plain', prompt: Array.from({ length: 17 }, () => 'a') }, 'prompt', 'invalid_value'],
    ['17 prompts of token ids', { model: 'plain', prompt: Array.from({ length: 17 }, () => [1, 263]) }, 'prompt', 'invalid_value'],
    ['echo with token ids', { model: 'plain', prompt: [1, 263], echo: true }, 'echo', 'unsupported_parameter'],
    ['suffix with token ids', { model: 'plain', prompt: [1, 263], suffix: 'b' }, 'suffix', 'unsupported_parameter'],
    [
      'several prompts of token ids streamed',
      {
        model: 'plain',
        prompt: [
          [1, 263],
          [1, 269],
        ],
        stream: true,
      },
      'prompt',
      'invalid_value',
    ],
  ])('%s is a 400 naming the field', async (_name, body, param, code) => {
    const res = await postJson(server, '/v1/completions', body)
    expect(res.status).toBe(400)
    expect(res.json.error).toMatchObject({ param, code, type: 'invalid_request_error' })
  })
})
