/**
 * GET /metrics: Prometheus text with requests by route pattern and status, latency histograms,
 * tokens, queue depth, loaded models and memory; it needs a key unless metrics_public is set.
 */
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startInProcessServer, type InProcessServer } from '../support/in-process-server.ts'
import { postJson } from '../support/server-process.ts'
import { writeTinyBert, writeTinyLlama } from '../support/tiny-models.ts'

let server: InProcessServer
let modelsDir: string

beforeAll(async () => {
  modelsDir = mkdtempSync(join(tmpdir(), 'hearth-metrics-'))
  writeTinyLlama(join(modelsDir, 'tiny.gguf'), { contextLength: 512 })
  writeTinyBert(join(modelsDir, 'bert.gguf'))
  server = await startInProcessServer({ modelsDir })
})

afterAll(async () => {
  await server?.stop()
})

async function scrape(target = server, key: string | null = target.apiKey): Promise<{ status: number; type: string | null; text: string }> {
  const res = await fetch(`${target.url}/metrics`, { headers: key ? { authorization: `Bearer ${key}` } : {} })
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() }
}

/** The value of one sample, by metric name and exact labels. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (!m || m[1] !== name) continue
    const got = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]))
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[3])
  }
  return undefined
}

describe('GET /metrics', () => {
  it('needs a key', async () => {
    const res = await scrape(server, null)
    expect(res.status).toBe(401)
    expect(JSON.parse(res.text).error.code).toBe('invalid_api_key')
  })

  it('counts requests by route pattern and status, with latency histograms', async () => {
    const auth = { authorization: `Bearer ${server.apiKey}` }
    await fetch(`${server.url}/v1/models`, { headers: auth })
    await fetch(`${server.url}/v1/models/org/nothing:q4`, { headers: auth })
    await fetch(`${server.url}/v1/models/other/missing`, { headers: auth })
    await postJson(server, '/v1/chat/completions', { model: 'tiny', messages: [], max_tokens: 1 })
    await fetch(`${server.url}/v1/models`)
    // Probes of random paths all land on one label per area.
    for (let i = 0; i < 20; i++) await fetch(`${server.url}/v1/probe-${i}`, { headers: auth })

    const res = await scrape()
    expect(res.status).toBe(200)
    expect(res.type).toMatch(/^text\/plain; version=0\.0\.4/)
    const text = res.text
    expect(sample(text, 'hearth_http_requests_total', { method: 'GET', route: '/v1/models', status: '200' })).toBeGreaterThanOrEqual(1)
    expect(sample(text, 'hearth_http_requests_total', { method: 'GET', route: '/v1/models/*id', status: '404' })).toBe(2)
    expect(sample(text, 'hearth_http_requests_total', { method: 'POST', route: '/v1/chat/completions', status: '400' })).toBe(1)
    expect(sample(text, 'hearth_http_requests_total', { method: 'GET', route: '/v1/*', status: '401' })).toBe(1)
    expect(sample(text, 'hearth_http_requests_total', { method: 'GET', route: '/v1/*', status: '404' })).toBe(20)
    expect(text).not.toContain('org/nothing')
    expect(text).not.toContain('probe-')
    expect(sample(text, 'hearth_http_request_duration_seconds_bucket', { method: 'GET', route: '/v1/models', le: '+Inf' })).toBeGreaterThanOrEqual(1)
    expect(sample(text, 'hearth_http_request_duration_seconds_count', { method: 'GET', route: '/v1/models' })).toBeGreaterThanOrEqual(1)
    expect(sample(text, 'process_resident_memory_bytes')).toBeGreaterThan(10_000_000)
    expect(sample(text, 'hearth_loaded_models')).toBe(0)
  })

  it('counts tokens per model, loaded models, their memory and the queue', async () => {
    const chat = await postJson(server, '/v1/chat/completions', { model: 'tiny', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 5 })
    expect(chat.status).toBe(200)
    const embedded = await postJson(server, '/v1/embeddings', { model: 'bert', input: 'one two three' })
    expect(embedded.status).toBe(200)
    const text = (await scrape()).text
    expect(sample(text, 'hearth_tokens_total', { model: 'tiny', type: 'completion' })).toBe(chat.json.usage.completion_tokens)
    expect(sample(text, 'hearth_tokens_total', { model: 'tiny', type: 'prompt' })).toBe(chat.json.usage.prompt_tokens)
    expect(sample(text, 'hearth_tokens_total', { model: 'bert', type: 'prompt' })).toBe(embedded.json.usage.prompt_tokens)
    expect(sample(text, 'hearth_loaded_models')).toBe(2)
    expect(sample(text, 'hearth_engine_resident_memory_bytes', { model: 'tiny' })).toBeGreaterThan(1_000_000)
    expect(sample(text, 'hearth_queue_depth', { model: 'tiny' })).toBe(0)
    expect(sample(text, 'hearth_requests_running', { model: 'tiny' })).toBe(0)
    expect(sample(text, 'hearth_http_requests_in_flight')).toBe(1) // the scrape itself
  })

  it('is open without a key when metrics_public is set', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'hearth-metrics-data-'))
    writeFileSync(join(dataDir, 'settings.json'), JSON.stringify({ metrics_public: true }))
    const open = await startInProcessServer({ modelsDir, dataDir })
    try {
      const res = await scrape(open, null)
      expect(res.status).toBe(200)
      expect(res.text).toContain('hearth_http_requests_total')
      // Only /metrics: the API still needs the key.
      expect((await fetch(`${open.url}/v1/models`)).status).toBe(401)
    } finally {
      await open.stop()
    }
  })
})
