/**
 * Getting models through the API, with the app in this process (no engine runs): pull (progress by GET and by SSE) until
 * the model is served, cancel, import by copy and link, delete, the recommended list, and the 400s.
 * The hub is a local stand-in (HEARTH_HF_ENDPOINT points hf:// at it).
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createParser } from 'eventsource-parser'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { FakeHub } from './support/fake-hub.ts'
import { startInProcessServer, type InProcessServer } from './support/in-process-server.ts'
import { postJson } from './support/server-process.ts'
import { writeTinyBert, writeTinyLlama, writeTinyMmproj } from './support/tiny-models.ts'

let hub: FakeHub
let server: InProcessServer
let modelsDir: string
let payloadDir: string
let llama: Buffer

beforeAll(async () => {
  hub = await FakeHub.start()
  payloadDir = mkdtempSync(join(tmpdir(), 'hearth-api-payloads-'))
  writeTinyLlama(join(payloadDir, 'tiny.gguf'))
  writeTinyMmproj(join(payloadDir, 'mmproj-tiny.gguf'), { textEmbd: 64 })
  writeTinyBert(join(payloadDir, 'bert.gguf'))
  llama = readFileSync(join(payloadDir, 'tiny.gguf'))
  modelsDir = mkdtempSync(join(tmpdir(), 'hearth-api-models-'))
  server = await startInProcessServer({ modelsDir, env: { HEARTH_HF_ENDPOINT: hub.url } })
})

afterAll(async () => {
  await server?.stop()
  await hub?.close()
})

async function api(method: string, path: string, body?: unknown) {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${server.apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  return { status: res.status, json: text ? JSON.parse(text) : undefined }
}

/** Every `data:` payload of an event stream, with when it arrived, until the server ends it. */
async function events(path: string): Promise<Array<{ at: number; data: any }>> {
  const res = await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${server.apiKey}` } })
  expect(res.status).toBe(200)
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/)
  const out: Array<{ at: number; data: any }> = []
  const parser = createParser({ onEvent: (e) => out.push({ at: Date.now(), data: JSON.parse(e.data) }) })
  const decoder = new TextDecoder()
  const reader = res.body!.getReader()
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) parser.feed(decoder.decode(chunk.value, { stream: true }))
  return out
}

const partials = () => (existsSync(join(modelsDir, '.partial')) ? readdirSync(join(modelsDir, '.partial')) : [])

describe('POST /api/models/pull', () => {
  it('downloads in the background with progress by GET and SSE, then the model is served', async () => {
    // ~2 MB at ~1.3 MB/s: long enough to watch.
    hub.put('org/chat-GGUF/chat-q8.gguf', llama, { chunkSize: 32 * 1024, chunkDelayMs: 25 })
    hub.put('org/chat-GGUF/mmproj-chat-q8.gguf', readFileSync(join(payloadDir, 'mmproj-tiny.gguf')))
    const pulled = await api('POST', '/api/models/pull', {
      source: 'hf://org/chat-GGUF/chat-q8.gguf',
      mmproj: 'hf://org/chat-GGUF/mmproj-chat-q8.gguf',
      id: 'org/chat:q8',
    })
    expect(pulled.status).toBe(202)
    const download = pulled.json.download
    expect(download).toMatchObject({ source: 'hf://org/chat-GGUF/chat-q8.gguf', file: 'chat-q8.gguf', model_id: 'org/chat:q8', error: null })
    expect(['queued', 'downloading']).toContain(download.state)
    expect(Object.keys(download)).toEqual(expect.arrayContaining(['id', 'source', 'file', 'state', 'bytes', 'total', 'rate_bps', 'eta_seconds', 'error']))
    expect(download.total).toBe(llama.length + statSync(join(payloadDir, 'mmproj-tiny.gguf')).size)

    const streamed = events(`/api/downloads/${download.id}/events`)
    await new Promise((r) => setTimeout(r, 600))
    const polled = await api('GET', `/api/downloads/${download.id}`)
    expect(polled.status).toBe(200)
    expect(polled.json).toMatchObject({ id: download.id, state: 'downloading' })
    expect(polled.json.bytes).toBeGreaterThan(0)
    expect(polled.json.bytes).toBeLessThan(polled.json.total)

    const seen = await streamed
    const states = seen.map((e) => e.data.state)
    expect(states.at(-1)).toBe('done')
    expect(states).toContain('downloading')
    expect(states).toContain('verifying')
    const progress = seen.filter((e) => e.data.state === 'downloading')
    expect(progress.length).toBeGreaterThan(2)
    expect(progress.some((e) => e.data.rate_bps > 0 && e.data.eta_seconds !== null)).toBe(true)
    // At most ~4 progress events a second.
    const span = (progress.at(-1)!.at - progress[0]!.at) / 1000
    expect(progress.length).toBeLessThanOrEqual(Math.ceil(span * 4) + 3)
    expect(seen.at(-1)!.data).toMatchObject({ bytes: download.total, total: download.total, eta_seconds: 0 })

    const models = await api('GET', '/v1/models')
    const model = models.json.data.find((m: { id: string }) => m.id === 'org/chat:q8')
    expect(model).toMatchObject({ object: 'model', capabilities: ['chat', 'vision'], state: 'available' })
    expect(readFileSync(join(modelsDir, 'chat-q8.gguf')).equals(llama)).toBe(true)
    expect(JSON.parse(readFileSync(join(modelsDir, 'models.json'), 'utf8')).models).toContainEqual(
      expect.objectContaining({ id: 'org/chat:q8', file: 'chat-q8.gguf', mmproj: 'mmproj-chat-q8.gguf' }),
    )
    const listed = await api('GET', '/api/downloads')
    expect(listed.json.downloads.find((d: { id: string }) => d.id === download.id)).toMatchObject({ state: 'done' })

    // The events of a finished download: one final snapshot, then the stream ends.
    const again = await events(`/api/downloads/${download.id}/events`)
    expect(again.map((e) => e.data.state)).toEqual(['done'])
  })

  it('cancels with DELETE: the partial file goes and the state is cancelled', async () => {
    hub.put('org/slow-GGUF/slow.gguf', llama, { chunkSize: 16 * 1024, chunkDelayMs: 50 })
    const pulled = await api('POST', '/api/models/pull', { source: 'hf://org/slow-GGUF/slow.gguf' })
    expect(pulled.status).toBe(202)
    const id = pulled.json.download.id
    await new Promise((r) => setTimeout(r, 400))
    expect(partials().some((f) => f.startsWith('slow.gguf'))).toBe(true)
    const cancelled = await api('DELETE', `/api/downloads/${id}`)
    expect(cancelled.status).toBe(200)
    expect(cancelled.json).toMatchObject({ id, state: 'cancelled' })
    expect(partials().filter((f) => f.startsWith('slow.gguf'))).toEqual([])
    expect(existsSync(join(modelsDir, 'slow.gguf'))).toBe(false)
    expect((await api('GET', `/api/downloads/${id}`)).json.state).toBe('cancelled')
  })

  it('answers 400 naming the field for bad requests, and 404 for unknown downloads', async () => {
    hub.put('org/dup-GGUF/dup.gguf', llama)
    // The hub announces 10 PB: more than any test machine has free.
    hub.put('org/huge-GGUF/huge.gguf', llama, { announcedSize: 10 ** 16 })
    const cases: Array<[unknown, string, string]> = [
      [{}, 'source', 'missing_required_parameter'],
      [{ source: 42 }, 'source', 'invalid_value'],
      [{ source: 'ftp://example.com/x.gguf' }, 'source', 'invalid_value'],
      [{ source: 'hf://owner/repo/../../x.gguf' }, 'source', 'invalid_value'],
      [{ source: 'hf://owner/repo/readme.md' }, 'source', 'invalid_value'],
      [{ source: 'hf://org/dup-GGUF/dup.gguf', mmproj: 'nonsense' }, 'mmproj', 'invalid_value'],
      [{ source: 'hf://org/dup-GGUF/dup.gguf', id: 'org/chat:q8' }, 'id', 'invalid_value'],
      [{ source: 'hf://org/dup-GGUF/dup.gguf', id: 'a//b' }, 'id', 'invalid_value'],
      [{ source: 'hf://org/missing-GGUF/none.gguf' }, 'source', 'source_unavailable'],
      [{ source: 'hf://org/huge-GGUF/huge.gguf' }, 'source', 'insufficient_storage'],
    ]
    for (const [body, param, code] of cases) {
      const res = await postJson(server, '/api/models/pull', body)
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.json.error, JSON.stringify(body)).toMatchObject({ type: 'invalid_request_error', param, code })
      expect(Object.keys(res.json)).toEqual(['error'])
    }
    const full = await postJson(server, '/api/models/pull', { source: 'hf://org/huge-GGUF/huge.gguf' })
    expect(full.json.error.message).toMatch(/needs .* \(10000000000000000 bytes\) but only .* \(\d+ bytes\) are free/)
    const notFound = await api('GET', '/api/downloads/dl-nope')
    expect(notFound.status).toBe(404)
    expect(notFound.json.error.code).toBe('download_not_found')
    expect((await api('DELETE', '/api/downloads/dl-nope')).status).toBe(404)
    // Refused pulls leave no trace in the list.
    const listed = await api('GET', '/api/downloads')
    expect(listed.json.downloads.some((d: { source: string }) => /missing-GGUF|huge-GGUF/.test(d.source))).toBe(false)
  })
})

describe('POST /api/models/import and DELETE /api/models/{id}', () => {
  it('imports by copy and by hard link, answering with the model as /api/models lists it', async () => {
    const copied = await api('POST', '/api/models/import', { path: join(payloadDir, 'bert.gguf'), mode: 'copy', id: 'org/bert:f32' })
    expect(copied.status).toBe(201)
    expect(copied.json).toMatchObject({ id: 'org/bert:f32', object: 'model', capabilities: ['embeddings'], kind: 'embedding', file: join(modelsDir, 'bert.gguf') })
    const listed = (await api('GET', '/api/models')).json.models.find((m: { id: string }) => m.id === 'org/bert:f32')
    expect(Object.keys(copied.json).sort()).toEqual(Object.keys(listed).sort())

    const linked = await api('POST', '/api/models/import', { path: join(payloadDir, 'tiny.gguf'), mode: 'link' })
    expect(linked.status).toBe(201)
    expect(linked.json).toMatchObject({ id: 'tiny', capabilities: ['chat'] })
    expect(statSync(join(modelsDir, 'tiny.gguf')).ino).toBe(statSync(join(payloadDir, 'tiny.gguf')).ino)
    const ids = (await api('GET', '/v1/models')).json.data.map((m: { id: string }) => m.id)
    expect(ids).toEqual(expect.arrayContaining(['org/bert:f32', 'tiny']))
  })

  it('deletes a model (ids with / and :) with its files, and 404s an unknown one', async () => {
    const deleted = await api('DELETE', '/api/models/org/bert:f32')
    expect(deleted.status).toBe(200)
    expect(deleted.json).toMatchObject({ deleted: 'org/bert:f32' })
    expect(existsSync(join(modelsDir, 'bert.gguf'))).toBe(false)
    expect(existsSync(join(payloadDir, 'bert.gguf'))).toBe(true)
    expect((await api('GET', '/v1/models/org/bert:f32')).status).toBe(404)

    expect((await api('DELETE', '/api/models/tiny')).status).toBe(200)
    expect(existsSync(join(payloadDir, 'tiny.gguf'))).toBe(true) // only the link went

    const missing = await api('DELETE', '/api/models/org/nothing:here')
    expect(missing.status).toBe(404)
    expect(missing.json.error).toMatchObject({ code: 'model_not_found' })
  })

  it('answers 400 naming the field for bad imports', async () => {
    const cases: Array<[unknown, string]> = [
      [{}, 'path'],
      [{ path: 'relative.gguf' }, 'path'],
      [{ path: join(payloadDir, 'missing.gguf') }, 'path'],
      [{ path: payloadDir }, 'path'],
      [{ path: '/etc/hostname' }, 'path'],
      [{ path: join(payloadDir, 'tiny.gguf'), mode: 'move' }, 'mode'],
      [{ path: join(payloadDir, 'tiny.gguf'), id: '../escape' }, 'id'],
      [{ path: join(modelsDir, 'chat-q8.gguf') }, 'path'],
    ]
    for (const [body, param] of cases) {
      const res = await postJson(server, '/api/models/import', body)
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.json.error, JSON.stringify(body)).toMatchObject({ type: 'invalid_request_error', param })
    }
  })
})

describe('GET /api/recommended', () => {
  it('lists models to start with, in the catalog format, with sizes and sources', async () => {
    const res = await api('GET', '/api/recommended')
    expect(res.status).toBe(200)
    const models = res.json.models as Array<Record<string, unknown>>
    expect(models.length).toBeGreaterThanOrEqual(3)
    for (const m of models) {
      expect(m).toMatchObject({ id: expect.any(String), file: expect.any(String), kind: expect.any(String), source: expect.stringMatching(/^hf:\/\//), size_bytes: expect.any(Number), description: expect.any(String), installed: false })
    }
    expect(models.map((m) => m.kind)).toEqual(expect.arrayContaining(['chat', 'embedding', 'speech']))
  })

  it('needs the API key like every /api route', async () => {
    const res = await fetch(`${server.url}/api/downloads`)
    expect(res.status).toBe(401)
  })
})
