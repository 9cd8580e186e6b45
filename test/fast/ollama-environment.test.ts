/**
 * The OLLAMA_* settings a person who used Ollama already has, read where Hearth has their like
 * (docs/ollama.md has the whole table): the origins the Ollama port lets in, how long a model
 * stays loaded, and the context a model gets by default.
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Ollama } from 'ollama'
import { startInProcessServer, type InProcessServer } from '../support/in-process-server.ts'
import { writeTinyLlama } from '../support/tiny-models.ts'

let server: InProcessServer
let ollama: Ollama

beforeAll(async () => {
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-ollama-env-'))
  writeTinyLlama(join(modelsDir, 'tiny.gguf'), { chatTemplate: true, contextLength: 512 })
  server = await startInProcessServer({
    modelsDir,
    args: ['--ollama-port', '0'],
    env: { OLLAMA_ORIGINS: 'chrome-extension://*', OLLAMA_KEEP_ALIVE: '90s', OLLAMA_CONTEXT_LENGTH: '128' },
  })
  ollama = new Ollama({ host: server.ollamaUrl! })
})

afterAll(async () => {
  await server?.stop()
})

describe('OLLAMA_* settings', () => {
  it('OLLAMA_ORIGINS: the browser extensions it names may call the Ollama port', async () => {
    const preflight = (origin: string) =>
      fetch(`${server.ollamaUrl}/api/chat`, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
      })
    expect((await preflight('chrome-extension://abcdef')).headers.get('access-control-allow-origin')).toBe('chrome-extension://abcdef')
    expect((await preflight('https://evil.example')).status).toBe(403)
  })

  it('OLLAMA_CONTEXT_LENGTH: the context of a model models.json says nothing of, on every API', async () => {
    const shown = await ollama.show({ model: 'tiny' })
    expect((shown.model_info as unknown as Record<string, unknown>)['llama.context_length']).toBe(128)
    const listed = (await (await fetch(`${server.url}/v1/models/tiny`, { headers: { authorization: `Bearer ${server.apiKey}` } })).json()) as {
      context_length: number
    }
    expect(listed.context_length).toBe(128)
  })

  it('OLLAMA_KEEP_ALIVE: how long a model stays loaded after a request that does not say', async () => {
    const before = Date.now()
    await ollama.chat({ model: 'tiny', messages: [{ role: 'user', content: 'Hello' }] })
    const running = (await ollama.ps()).models.find((m) => m.name === 'tiny:latest')!
    const left = new Date(running.expires_at).getTime() - before
    expect(left).toBeGreaterThan(80_000)
    expect(left).toBeLessThan(100_000)
  })
})
