/**
 * Every request the real Ollama clients were recorded sending (test/fixtures/ollama-clients/, made by
 * test/support/record-ollama-clients.ts: ollama-js, ollama-python, LangChain, the AI SDK provider and
 * the `ollama` command), replayed against Hearth's Ollama port in this process: each has a field
 * decision for every field it sends, and each is answered in Ollama's shape, never with a 5xx.
 */
import { readdirSync, readFileSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { OLLAMA_FIELD_DECISIONS, ollamaFieldDecisionsMarkdown, type OllamaRequestKind } from '../../main/server/protocols/field-decisions.ts'
import { startInProcessServer, type InProcessServer } from '../support/in-process-server.ts'
import { writeTinyBert, writeTinyLlama, writeTinyMmproj } from '../support/tiny-models.ts'

interface RecordedRequest {
  call: string
  method: string
  path: string
  headers: Record<string, string>
  body?: unknown
}

const FIXTURES = join(import.meta.dirname, '../fixtures/ollama-clients')
const recordings = readdirSync(FIXTURES)
  .filter((f) => f.endsWith('.json') && f !== 'ollama-server.json')
  .map((f) => JSON.parse(readFileSync(join(FIXTURES, f), 'utf8')) as { client: string; requests: RecordedRequest[] })

const KINDS: Record<string, OllamaRequestKind> = { '/api/chat': 'chat', '/api/generate': 'generate', '/api/embed': 'embed', '/api/embeddings': 'embed' }
/** Fields of the legacy embeddings route (its text is `prompt`) and of the other routes, which take no answer-changing field. */
const TAKEN_ELSEWHERE = new Set(['prompt'])

let server: InProcessServer

beforeAll(async () => {
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-ollama-replay-'))
  const tiny = writeTinyLlama(join(modelsDir, 'tiny.gguf'), { chatTemplate: true })
  writeTinyLlama(join(modelsDir, 'tiny-vision.gguf'), { chatTemplate: true })
  writeTinyMmproj(join(modelsDir, 'mmproj-tiny-vision.gguf'), { textEmbd: tiny.embd })
  writeTinyBert(join(modelsDir, 'tiny-embed.gguf'))
  server = await startInProcessServer({ modelsDir, args: ['--ollama-port', '0'] })
})

afterAll(async () => {
  await server?.stop()
})

describe.each(recordings)('$client, as recorded', ({ requests }) => {
  it('sends no field of chat, generate or embed that the field decisions leave undecided', () => {
    for (const request of requests) {
      const kind = KINDS[request.path]
      if (!kind || typeof request.body !== 'object' || request.body === null) continue
      const decided = new Set(OLLAMA_FIELD_DECISIONS[kind].map((d) => d.field))
      for (const field of Object.keys(request.body)) {
        if (kind === 'embed' && TAKEN_ELSEWHERE.has(field)) continue
        expect(decided.has(field), `${request.call}: ${request.path} sends '${field}'`).toBe(true)
      }
      const options = (request.body as { options?: Record<string, unknown> | null }).options ?? {}
      const decidedOptions = new Set(OLLAMA_FIELD_DECISIONS.options.map((d) => d.field))
      for (const option of Object.keys(options)) expect(decidedOptions.has(option), `${request.call}: option '${option}'`).toBe(true)
    }
  })

  it("is answered in Ollama's shape, never with a server error", async () => {
    for (const request of requests) {
      const init: RequestInit = { method: request.method, headers: { 'content-type': 'application/json' } }
      if (request.body !== undefined && request.method !== 'GET' && request.method !== 'HEAD') init.body = JSON.stringify(request.body)
      const response = await fetch(`${server.ollamaUrl}${request.path}`, init)
      const text = await response.text()
      // A pull by name goes to Ollama's registry, which this machine cannot reach: a 502 saying so is the answer.
      const unreachable = request.path === '/api/pull' && response.status === 502 && text.includes('cannot reach registry.ollama.ai')
      if (!unreachable) expect(response.status, `${request.call}: ${request.method} ${request.path} → ${text.slice(0, 300)}`).toBeLessThan(500)
      if (request.method === 'HEAD' || text === '' || request.path === '/') continue
      // A whole answer, or a stream of JSON lines; an error is `{"error": "…"}`.
      const lines = text
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>)
      if (response.status >= 400) expect(typeof lines[0]!.error, request.call).toBe('string')
    }
  })
})

describe('docs/ollama.md', () => {
  it('shows the field decisions as the table has them', () => {
    const page = readFileSync(join(import.meta.dirname, '../..', 'docs', 'ollama.md'), 'utf8')
    const shown = /<!-- ollama-field-decisions:start[^>]*-->\n([\s\S]*?)\n?<!-- ollama-field-decisions:end -->/.exec(page)?.[1]
    expect(shown, 'docs/ollama.md lacks the field-decisions section').toBeDefined()
    // On a difference, the table as it should read is what this test prints as "expected".
    expect(shown!.trim()).toBe(ollamaFieldDecisionsMarkdown())
  })
})
