/**
 * Our llama.cpp patches, each seen on llama-server as Hearth builds it (no Hearth in between), where
 * no other suite shows it through Hearth. llama-03-unreadable-output-as-text: output the
 * chat parser cannot read is the model's answer as text, not a failed request.
 * llama-18-well-formed-utf8-text: bytes that are not UTF-8 stream as U+FFFD, the same as the whole
 * answer says, instead of failing the stream. And the error texts
 * Hearth reads (upstream-errors.ts), provoked from the real program: an upgrade that rewords one
 * fails here.
 */
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readUpstreamError } from '../../engines/llama-server/upstream-errors.ts'
import { familyModel } from '../support/family-models.ts'
import { PROJECT_ROOT } from '../support/server-process.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { writeTinyLlama } from '../support/tiny-models.ts'
import { llamaBuild, startUpstreamLlamaServer, type UpstreamServer } from '../support/upstream-servers.ts'
import { cannotRun, describeIf } from '../support/skips.ts'

const template = sharedFixture('chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja')

if (!llamaBuild) cannotRun('llama.cpp is not built on this machine (npm run build:engines); the llama.cpp patch suite cannot run')

describeIf(llamaBuild && template, 'needs llama.cpp built here (npm run build:engines) and the chat templates of ../shared/fixtures')(
  'llama.cpp as Hearth patches it',
  () => {
    let upstream: UpstreamServer

    beforeAll(async () => {
      const dir = mkdtempSync(join(tmpdir(), 'hearth-llama-patches-'))
      writeTinyLlama(join(dir, 'chat.gguf'), { contextLength: 1024 })
      upstream = await startUpstreamLlamaServer([
        '--model',
        join(dir, 'chat.gguf'),
        '--jinja',
        '--chat-template-file',
        template!,
        '--threads',
        '1',
        '--parallel',
        '1',
        '--ctx-size',
        '1024',
      ])
    })

    afterAll(async () => {
      await upstream?.stop('SIGKILL')
    })

    it('answers a tool call cut off by max_tokens with its text, not a 500', async () => {
      const tools = [
        { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } },
      ]
      const res = await fetch(`${upstream.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        // The grammar makes the answer start a call; four tokens end it long before the call closes.
        body: JSON.stringify({ messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, tool_choice: 'required', max_tokens: 4, temperature: 0 }),
      })
      const body = (await res.json()) as {
        choices?: Array<{ finish_reason: string; message: { content: string | null; tool_calls?: unknown[] } }>
        error?: { message: string }
      }
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
  },
)

/** GPT-2's byte-level BPE (Qwen's too) writes each byte as a printable character (bytes_to_unicode). */
function byteToken(byte: number): string {
  const printable = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)
  if (printable(byte)) return String.fromCharCode(byte)
  let below = 0
  for (let b = 0; b < byte; b++) if (!printable(b)) below++
  return String.fromCharCode(256 + below)
}

describeIf(llamaBuild && template, 'needs llama.cpp built here (npm run build:engines) and the chat templates of ../shared/fixtures')(
  'llama.cpp as Hearth patches it: text that is not UTF-8',
  () => {
    let upstream: UpstreamServer
    const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }]
    const request = { messages: [{ role: 'user', content: 'Say hello.' }], tools, max_tokens: 16, temperature: 0 }

    beforeAll(async () => {
      // A model whose answer is scripted into its weights, token by token: "Hello", a lone continuation
      // byte (0x80), "<" (where a tool call could begin), another (0x81), a lead byte (0xE4) that the
      // next piece, "A", does not continue. Byte-level vocabularies have such pieces, and a model can
      // sample them (a trained one about once in 11,000 tokens).
      const reply = ['\u010a', 'Hello', byteToken(0x80), '<', byteToken(0x81), byteToken(0xe4), 'A']
      const model = familyModel(
        join(PROJECT_ROOT, 'test/artifacts/family-models'),
        { template: 'Qwen-Qwen2.5-7B-Instruct', vocabulary: 'qwen3', reply },
        readFileSync(template!, 'utf8'),
      )
      upstream = await startUpstreamLlamaServer([
        '--model',
        model,
        '--jinja',
        '--chat-template-file',
        template!,
        '--threads',
        '1',
        '--parallel',
        '1',
        '--ctx-size',
        '1024',
      ])
    })

    afterAll(async () => {
      await upstream?.stop('SIGKILL')
    })

    const post = (body: unknown) =>
      fetch(`${upstream.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
    // Each ill-formed byte is one U+FFFD: 0xE4 too, as "A" does not continue it.
    const expected = 'Hello\ufffd<\ufffd\ufffdA'

    it('answers with U+FFFD where the bytes are not UTF-8', async () => {
      const res = await post(request)
      const body = (await res.json()) as { choices: Array<{ finish_reason: string; message: { content: string; tool_calls?: unknown[] } }> }
      expect(res.status).toBe(200)
      expect(body.choices[0]!.message.content).toBe(expected)
      expect(body.choices[0]!.message.tool_calls ?? []).toEqual([])
      expect(body.choices[0]!.finish_reason).toBe('stop')
    })

    it('streams the same text, to its end, where it failed with "Invalid diff"', async () => {
      const res = await post({ ...request, stream: true })
      expect(res.status).toBe(200)
      const events = (await res.text())
        .split('\n')
        .filter((line) => line.startsWith('data: '))
        .map((line) => line.slice(6))
      expect(events.at(-1)).toBe('[DONE]')
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e) as { error?: { message: string }; choices: Array<{ delta: { content?: string | null } }> })
      expect(chunks.filter((c) => c.error).map((c) => c.error!.message)).toEqual([])
      expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(expected)
    })
  },
)
