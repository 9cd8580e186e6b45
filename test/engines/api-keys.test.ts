/**
 * API keys under /api/keys: several keys with labels and quotas, stored hashed, shown once, never
 * logged; requests per minute and tokens per day end in 429 insufficient_quota with
 * x-should-retry: false; the generated key file and --api-key keys keep working beside them.
 */
import { mkdtempSync, readFileSync, statSync } from 'node:fs'
import { connect, createServer, type AddressInfo } from 'node:net'
import { once } from 'node:events'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { KeyStore } from '../../main/server/services/keys/key-store.ts'
import { startServer } from '../../main/server/server.ts'
import { resolveSettings } from '../../main/server/settings.ts'
import { QuotaGate, quotaTokens } from '../../main/server/services/keys/key-quotas.ts'
import { postJson, startTestServer, type TestServer } from '../support/server-process.ts'
import { writeTinyBert, writeTinyLlama } from '../support/tiny-models.ts'

let server: TestServer
let dataDir: string
let fileKey: string

beforeAll(async () => {
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-keys-'))
  writeTinyLlama(join(modelsDir, 'tiny.gguf'), { contextLength: 512 })
  writeTinyBert(join(modelsDir, 'bert.gguf'))
  dataDir = mkdtempSync(join(tmpdir(), 'hearth-keys-data-'))
  server = await startTestServer({ modelsDir, dataDir, noKeyFlag: true })
  fileKey = readFileSync(join(dataDir, 'api-key'), 'utf8').trim()
})

afterAll(async () => {
  await server?.stop()
})

async function api(method: string, path: string, key: string, body?: unknown) {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  return { status: res.status, headers: res.headers, json: text.startsWith('{') ? JSON.parse(text) : undefined, text }
}

const chat = (key: string, maxTokens = 3) =>
  postJson({ ...server, apiKey: key }, '/v1/chat/completions', { model: 'tiny', messages: [{ role: 'user', content: 'Hi' }], max_tokens: maxTokens })

describe('managing keys', () => {
  it('creates a key shown once, stores only its digest, and lists it without secrets', async () => {
    const created = await api('POST', '/api/keys', fileKey, { label: 'editor plugin', requests_per_minute: 100 })
    expect(created.status).toBe(201)
    expect(created.headers.get('cache-control')).toBe('no-store')
    const key = created.json.key as string
    expect(key).toMatch(/^hearth-/)
    expect(created.json).toMatchObject({ object: 'api_key', label: 'editor plugin', requests_per_minute: 100, tokens_per_day: null, last_used: null })
    expect(created.json.id).toMatch(/^key_[0-9a-f]{12}$/)

    // The new key works, through the official client too.
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: key, maxRetries: 0 })
    expect((await client.models.list()).data.map((m) => m.id)).toContain('tiny')

    const stored = readFileSync(join(dataDir, 'keys.json'), 'utf8')
    expect(stored).not.toContain(key)
    expect(statSync(join(dataDir, 'keys.json')).mode & 0o777).toBe(0o600)
    expect(JSON.parse(stored).keys[0].sha256).toMatch(/^[0-9a-f]{64}$/)

    const listed = await api('GET', '/api/keys', fileKey)
    expect(listed.status).toBe(200)
    expect(listed.text).not.toContain(key)
    expect(listed.text).not.toContain(JSON.parse(stored).keys[0].sha256)
    const entry = listed.json.keys.find((k: { id: string }) => k.id === created.json.id)
    expect(entry).toMatchObject({ label: 'editor plugin', hint: expect.stringMatching(/^hearth-…/) })
    expect(entry.last_used).toEqual(expect.any(Number))
    expect(entry.key).toBeUndefined()

    // The generated key file stays as it was: plain text, readable by its owner only.
    expect(statSync(join(dataDir, 'api-key')).mode & 0o777).toBe(0o600)
  })

  it('accepts a POST without a body, PATCHes quotas and labels, and deletes keys', async () => {
    const bare = await fetch(`${server.url}/api/keys`, { method: 'POST', headers: { authorization: `Bearer ${fileKey}` } })
    expect(bare.status).toBe(201)
    const made = (await bare.json()) as { id: string; key: string; label: null }
    expect(made.label).toBeNull()

    const patched = await api('PATCH', `/api/keys/${made.id}`, fileKey, { label: 'ci', tokens_per_day: 5000 })
    expect(patched.status).toBe(200)
    expect(patched.json).toMatchObject({ id: made.id, label: 'ci', tokens_per_day: 5000, requests_per_minute: null })

    expect((await api('GET', `/api/keys/${made.id}`, fileKey)).json.label).toBe('ci')
    const deleted = await api('DELETE', `/api/keys/${made.id}`, fileKey)
    expect(deleted.json).toEqual({ id: made.id, object: 'api_key', deleted: true })
    expect((await api('GET', '/v1/models', made.key)).status).toBe(401)
    expect((await api('DELETE', `/api/keys/${made.id}`, fileKey)).json.error).toMatchObject({ code: 'key_not_found' })
  })

  it('answers 400 naming the field for bad bodies', async () => {
    const cases: Array<[unknown, string]> = [
      [{ requests_per_minute: 0 }, 'requests_per_minute'],
      [{ requests_per_minute: 1.5 }, 'requests_per_minute'],
      [{ tokens_per_day: 'lots' }, 'tokens_per_day'],
      [{ label: 42 }, 'label'],
      [{ label: 'x'.repeat(201) }, 'label'],
    ]
    for (const [body, param] of cases) {
      const res = await api('POST', '/api/keys', fileKey, body)
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.json.error, JSON.stringify(body)).toMatchObject({ type: 'invalid_request_error', param })
    }
    const notJson = await fetch(`${server.url}/api/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${fileKey}`, 'content-type': 'text/plain' },
      body: 'x',
    })
    expect(notJson.status).toBe(400)
  })

  it('does not let a key made here manage keys or regenerate the server key', async () => {
    const made = (await api('POST', '/api/keys', fileKey, { label: 'limited' })).json
    for (const [method, path] of [
      ['GET', '/api/keys'],
      ['POST', '/api/keys'],
      ['DELETE', `/api/keys/${made.id}`],
      ['POST', '/api/keys/regenerate'],
    ] as const) {
      const res = await api(method, path, made.key)
      expect(res.status, `${method} ${path}`).toBe(403)
      expect(res.json.error).toMatchObject({ code: 'insufficient_permissions', type: 'invalid_request_error' })
    }
    // It still reads the rest of /api and uses /v1.
    expect((await api('GET', '/api/models', made.key)).status).toBe(200)
  })
})

describe('quotas', () => {
  it('stops a key at its requests per minute with 429 insufficient_quota and x-should-retry: false', async () => {
    const made = (await api('POST', '/api/keys', fileKey, { requests_per_minute: 3 })).json
    for (let i = 0; i < 3; i++) expect((await api('GET', '/v1/models', made.key)).status).toBe(200)
    const refused = await api('GET', '/v1/models', made.key)
    expect(refused.status).toBe(429)
    expect(refused.headers.get('x-should-retry')).toBe('false')
    expect(refused.json).toEqual({
      error: { message: expect.stringContaining('3 requests per minute'), type: 'insufficient_quota', param: null, code: 'insufficient_quota' },
    })
    // The official client gives up at once instead of retrying.
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: made.key, maxRetries: 3 })
    const started = Date.now()
    await expect(client.models.list()).rejects.toMatchObject({ status: 429, code: 'insufficient_quota' })
    expect(Date.now() - started).toBeLessThan(2_000)
    // Other keys are not affected.
    expect((await api('GET', '/v1/models', fileKey)).status).toBe(200)
  })

  it('counts prompt and completion tokens of chat and embeddings against tokens per day', async () => {
    const made = (await api('POST', '/api/keys', fileKey, { tokens_per_day: 40 })).json
    const first = await chat(made.key, 8)
    expect(first.status).toBe(200)
    const spent = first.json.usage.total_tokens as number
    await waitFor(async () => (await api('GET', `/api/keys/${made.id}`, fileKey)).json.tokens_today === spent)

    const embedded = await postJson({ ...server, apiKey: made.key }, '/v1/embeddings', { model: 'bert', input: ['one two three', 'four five'] })
    expect(embedded.status).toBe(200)
    const total = spent + (embedded.json.usage.total_tokens as number)
    await waitFor(async () => (await api('GET', `/api/keys/${made.id}`, fileKey)).json.tokens_today === total)

    // Go over the quota (the request that crosses the line finishes), then the key is refused.
    for (let i = 0; i < 10 && (await api('GET', `/api/keys/${made.id}`, fileKey)).json.tokens_today < 40; i++) {
      const r = await chat(made.key, 8)
      if (r.status === 429) break
    }
    const refused = await chat(made.key)
    expect(refused.status).toBe(429)
    expect(refused.headers.get('x-should-retry')).toBe('false')
    expect(refused.json.error).toMatchObject({ type: 'insufficient_quota', code: 'insufficient_quota' })
    expect(refused.json.error.message).toMatch(/40 tokens per day/)
    // Raising the quota lets it in again.
    await api('PATCH', `/api/keys/${made.id}`, fileKey, { tokens_per_day: null })
    expect((await chat(made.key)).status).toBe(200)
  })
})

describe('secrets stay secret', () => {
  it('never writes a key, right or wrong, to the log', async () => {
    const made = (await api('POST', '/api/keys', fileKey, { label: 'logged?' })).json
    await api('GET', '/v1/models', made.key)
    await api('GET', '/v1/models', 'hearth-wrong-key-abcdefghijklmnop')
    await api('GET', `/v1/models?api_key=${made.key}`, made.key)
    await chat(made.key)
    await new Promise((r) => setTimeout(r, 200))
    const log = server.output()
    expect(log).toContain('/api/keys')
    for (const secret of [made.key, fileKey, 'hearth-wrong-key-abcdefghijklmnop']) expect(log).not.toContain(secret)
  })

  it('keeps keys and their usage across a restart', async () => {
    const made = (await api('POST', '/api/keys', fileKey, { label: 'survivor', tokens_per_day: 1_000_000 })).json
    expect((await chat(made.key)).status).toBe(200)
    await server.stop()
    server = await startTestServer({ modelsDir: join(dataDir, '..', 'unused-models'), dataDir, noKeyFlag: true })
    expect((await api('GET', '/v1/models', made.key)).status).toBe(200)
    expect((await api('GET', '/v1/models', fileKey)).status).toBe(200)
    const listed = (await api('GET', `/api/keys/${made.id}`, fileKey)).json
    expect(listed).toMatchObject({ label: 'survivor' })
    expect(listed.tokens_today).toBeGreaterThan(0)
  })
})

describe('the quota gate', () => {
  it('slides the minute and renews tokens at midnight UTC', async () => {
    const store = await KeyStore.open(mkdtempSync(join(tmpdir(), 'hearth-gate-')))
    const { record } = await store.create('gate', { requestsPerMinute: 2, tokensPerDay: 100 })
    const gate = new QuotaGate(store)
    const t0 = Date.parse('2026-03-01T23:59:00Z')
    gate.admit(record, t0)
    gate.admit(record, t0 + 30_000)
    expect(() => gate.admit(record, t0 + 59_000)).toThrow(/2 requests per minute/)
    gate.admit(record, t0 + 60_001) // the first one left the window
    gate.charge(record, { promptTokens: 60, cachedTokens: 0, completionTokens: 40, audioSeconds: 0 }, t0)
    expect(() => gate.admit(record, t0 + 50_000)).toThrow(/100 tokens per day/)
    expect(store.tokensToday(record.id, t0 + 200_000)).toBe(0) // a new UTC day
    gate.admit(record, t0 + 200_000)
    expect(quotaTokens({ promptTokens: 1, cachedTokens: 0, completionTokens: 2, audioSeconds: 1.05 })).toBe(3 + 11)
    await store.flush()
  })
})

async function waitFor(check: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time')
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe('no network access without a key', () => {
  it('is refused by the server itself too (the desktop app starts it without the command line)', async () => {
    const { settings } = resolveSettings(['--no-auth', '--data-dir', mkdtempSync(join(tmpdir(), 'hearth-lan-'))], {}, 2)
    await expect(startServer({ ...settings, host: '0.0.0.0', port: 0 }, () => undefined)).rejects.toThrow(/without an API key/)
  })
})

describe('the Ollama port', () => {
  it('listens on loopback alone when the server is open to the network, and leaves Hearth running where its port is taken', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'hearth-ollama-port-'))
    const { settings } = resolveSettings(['--data-dir', dataDir, '--model-sources', 'none', '--port', '0', '--ollama-port', '0', '--host', '0.0.0.0'], {}, 2)
    const lines: string[] = []
    const server = await startServer(settings, (line) => lines.push(line), { llamaBuild: null, whisperBuild: null })
    try {
      const ollamaPort = new URL(server.ollamaUrl!).port
      const mainPort = new URL(server.url).port
      // 127.0.0.2 is this computer too, but not the address the Ollama port is bound to.
      const connects = (port: string) =>
        new Promise<boolean>((resolve) => {
          const socket = connect({ host: '127.0.0.2', port: Number(port) }, () => (socket.destroy(), resolve(true)))
          socket.once('error', () => resolve(false))
        })
      expect(await connects(mainPort)).toBe(true)
      expect(await connects(ollamaPort)).toBe(false)
      expect(await (await fetch(`${server.ollamaUrl}/`)).text()).toBe('Ollama is running')
      // A port that answers as Ollama does is said to be Ollama's (here, the first server's own Ollama port).
      const taken = await startServer({ ...settings, port: 0, ollamaPort: Number(ollamaPort) }, (line) => lines.push(line), {
        llamaBuild: null,
        whisperBuild: null,
      })
      expect(taken.ollamaUrl).toBeUndefined()
      expect(taken.ollamaNote).toMatch(/^Ollama 0\.34\.3 holds 127\.0\.0\.1:\d+: stop Ollama/)
      expect(lines.join('\n')).toMatch(/warning: Ollama's API is not served on 127\.0\.0\.1:\d+: Ollama 0\.34\.3 holds/)
      await taken.close()
      // Any other program on the port is named as one.
      const other = createServer(() => undefined).listen(0, '127.0.0.1')
      await once(other, 'listening')
      const busy = await startServer({ ...settings, port: 0, ollamaPort: (other.address() as AddressInfo).port }, (line) => lines.push(line), {
        llamaBuild: null,
        whisperBuild: null,
      })
      expect(busy.ollamaNote).toMatch(/is in use by another program: pick another --ollama-port/)
      await busy.close()
      other.close()
    } finally {
      await server.close()
    }
  })
})

describe('a key in the environment', () => {
  it('warns at start when HEARTH_API_KEY hides the stored key, which then gets 401', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'hearth-env-key-'))
    const first = await startTestServer({ modelsDir: mkdtempSync(join(tmpdir(), 'hearth-env-models-')), dataDir, noKeyFlag: true })
    await first.stop()
    const stored = readFileSync(join(dataDir, 'api-key'), 'utf8').trim()
    const server = await startTestServer({
      modelsDir: mkdtempSync(join(tmpdir(), 'hearth-env-models-')),
      dataDir,
      noKeyFlag: true,
      env: { HEARTH_API_KEY: 'exported-by-a-client-0123' },
    })
    try {
      // stderr, which may arrive a moment after stdout's "listening on".
      await expect
        .poll(() => server.output())
        .toContain(`HEARTH_API_KEY in the environment sets the server's keys, so the key stored in ${join(dataDir, 'api-key')} is not accepted`)
      expect((await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${stored}` } })).status).toBe(401)
    } finally {
      await server.stop()
    }
  })
})
