/**
 * Our llama.cpp patches, each seen on llama-server as Hearth builds it (no Hearth in between), where
 * no other suite shows it through Hearth. llama-03-unreadable-output-as-text: output the
 * chat parser cannot read is the model's answer as text, not a failed request. And the error texts
 * Hearth reads (upstream-errors.ts), provoked from the real program: an upgrade that rewords one
 * fails here.
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readUpstreamError } from '../engines/llama-server/upstream-errors.ts'
import { sharedFixture } from './support/shared-fixtures.ts'
import { writeTinyLlama } from './support/tiny-models.ts'
import { llamaBuild, startUpstreamLlamaServer, type UpstreamServer } from './support/upstream-servers.ts'
import { cannotRun } from './support/skips.ts'

const template = sharedFixture('chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja')

if (!llamaBuild) cannotRun('llama.cpp is not built on this machine (npm run build:engines); the llama.cpp patch suite cannot run')

describe.skipIf(!llamaBuild || !template)('llama.cpp as Hearth patches it', () => {
  let upstream: UpstreamServer

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hearth-llama-patches-'))
    writeTinyLlama(join(dir, 'chat.gguf'), { contextLength: 1024 })
    upstream = await startUpstreamLlamaServer([
      '--model', join(dir, 'chat.gguf'),
      '--jinja', '--chat-template-file', template!,
      '--threads', '1', '--parallel', '1', '--ctx-size', '1024',
    ])
  })

  afterAll(async () => {
    await upstream?.stop('SIGKILL')
  })

  it('answers a tool call cut off by max_tokens with its text, not a 500', async () => {
    const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }]
    const res = await fetch(`${upstream.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      // The grammar makes the answer start a call; four tokens end it long before the call closes.
      body: JSON.stringify({ messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, tool_choice: 'required', max_tokens: 4, temperature: 0 }),
    })
    const body = (await res.json()) as { choices?: Array<{ finish_reason: string; message: { content: string | null; tool_calls?: unknown[] } }>; error?: { message: string } }
    expect(res.status, JSON.stringify(body.error)).toBe(200)
    const choice = body.choices![0]!
    expect(choice.finish_reason).toBe('length')
    expect(choice.message.tool_calls ?? []).toEqual([])
    // The start of the call the grammar began (SentencePiece writes a space before it), as text.
    const text = choice.message.content!.trim()
    expect(text.length).toBeGreaterThan(2)
    expect('<tool_call>\n{"name": "get_weather"'.startsWith(text)).toBe(true)
  })

  describe("llama-server's error answers, as upstream-errors.ts reads them", () => {
    const post = async (path: string, body: unknown) => {
      const res = await fetch(`${upstream.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
      return readUpstreamError(res.status, await res.text())
    }
    const chat = (extra: Record<string, unknown>) => post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...extra })

    it('a prompt over the context', async () => {
      const error = await chat({ messages: [{ role: 'user', content: 'the quick brown fox '.repeat(400) }] })
      expect(error).toMatchObject({ kind: 'context_exceeded', promptTokens: expect.any(Number) })
      expect((error as { promptTokens: number }).promptTokens).toBeGreaterThan(1024)
    })

    it('fill-in-the-middle on a model without its tokens', async () => {
      expect((await post('/infill', { input_prefix: 'a', input_suffix: 'b', n_predict: 2 })).kind).toBe('infill_unsupported')
    })

    it('schemas: an unresolved $ref, a pattern it cannot read', async () => {
      const schema = (s: unknown) => ({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: s } } })
      const ref = await chat(schema({ type: 'object', properties: { a: { $ref: '#/$defs/missing' } } }))
      expect(['schema_at', 'schema_ref']).toContain(ref.kind)
      const pattern = await chat(schema({ type: 'object', properties: { a: { type: 'string', pattern: '^(a$' } } }))
      expect(['schema_at', 'schema_pattern', 'schema']).toContain(pattern.kind)
    })
  })
})
