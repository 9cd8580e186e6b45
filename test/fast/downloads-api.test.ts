/**
 * Getting models through the API, with the app in this process (no engine runs): pull (progress by GET and by SSE) until
 * the model is served, cancel, import by copy and link, delete, the recommended list, and the 400s.
 * The hub is a local stand-in (HEARTH_HF_ENDPOINT points hf:// at it). Pulls by Ollama name through
 * the same route run against a small registry stand-in in this process (manifest, blobs by digest,
 * ranges, a valve that holds a blob midway); the real Distribution registry, filled by the real
 * `ollama push`, is pulled from through the Models page in ui-pull-by-name.test.ts.
 */
import { createHash } from 'node:crypto'
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createParser } from 'eventsource-parser'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ModelFolder } from '../../models/catalog/model-folder.ts'
import { DownloadManager } from '../../models/downloads/download-manager.ts'
import { FakeHub } from '../support/fake-hub.ts'
import { startInProcessServer, type InProcessServer } from '../support/in-process-server.ts'
import { postJson } from '../support/server-process.ts'
import { writeTinyBert, writeTinyLlama, writeTinyMmproj } from '../support/tiny-models.ts'

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
    expect(copied.json).toMatchObject({
      id: 'org/bert:f32',
      object: 'model',
      capabilities: ['embeddings'],
      kind: 'embedding',
      file: join(modelsDir, 'bert.gguf'),
    })
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
      expect(m).toMatchObject({
        id: expect.any(String),
        file: expect.any(String),
        kind: expect.any(String),
        source: expect.stringMatching(/^hf:\/\//),
        size_bytes: expect.any(Number),
        description: expect.any(String),
        installed: false,
      })
    }
    expect(models.map((m) => m.kind)).toEqual(expect.arrayContaining(['chat', 'embedding', 'speech']))
  })

  it('needs the API key like every /api route', async () => {
    const res = await fetch(`${server.url}/api/downloads`)
    expect(res.status).toBe(401)
  })
})

/**
 * A registry as Ollama's client sees one, over plain http: the manifest of `library/tiny:1`, its
 * blobs by digest with ranges, and what it served. `holdAt(n)` makes it stop sending the model blob
 * at byte n (the connection stays open) until `release()`.
 */
class StandInRegistry {
  readonly blobs = new Map<string, Buffer>()
  manifest = Buffer.alloc(0)
  modelDigest = ''
  /** Bytes of the model blob sent, per request. */
  modelBytesSent: number[] = []
  /** A pause after each 64 KiB of the model blob, for a rate to be measured. */
  chunkDelayMs = 0
  private hold: { at: number; released: Promise<void>; release: () => void } | undefined
  private constructor(
    private readonly server: Server,
    readonly host: string,
  ) {}

  static async start(model: Buffer): Promise<StandInRegistry> {
    const server = createServer()
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
    const registry = new StandInRegistry(server, `127.0.0.1:${(server.address() as { port: number }).port}`)
    server.on('request', (req, res) => void registry.answer(req.url ?? '/', req.headers.range, res))
    registry.fill(model)
    return registry
  }

  private fill(model: Buffer): void {
    const layer = (bytes: Buffer, mediaType: string) => {
      const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`
      this.blobs.set(digest, bytes)
      return { mediaType, digest, size: bytes.length }
    }
    const modelLayer = layer(model, 'application/vnd.ollama.image.model')
    this.modelDigest = modelLayer.digest
    const system = layer(Buffer.from('You are brief.'), 'application/vnd.ollama.image.system')
    const config = layer(
      Buffer.from(JSON.stringify({ model_format: 'gguf', model_family: 'llama', model_families: ['llama'], file_type: 'F32' })),
      'application/vnd.docker.container.image.v1+json',
    )
    this.manifest = Buffer.from(
      JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.docker.distribution.manifest.v2+json', config, layers: [modelLayer, system] }),
    )
  }

  get total(): number {
    return [...this.blobs.values()].reduce((sum, b) => sum + b.length, 0)
  }

  holdAt(at: number): void {
    let release!: () => void
    const released = new Promise<void>((r) => (release = r))
    this.hold = { at, released, release }
  }

  release(): void {
    this.hold?.release()
    this.hold = undefined
  }

  close(): Promise<void> {
    this.release()
    this.server.closeAllConnections()
    return new Promise((done) => this.server.close(() => done()))
  }

  private async answer(url: string, range: string | undefined, res: import('node:http').ServerResponse): Promise<void> {
    const path = new URL(url, 'http://x').pathname
    if (path === '/v2/library/tiny/manifests/1')
      return void res.writeHead(200, { 'content-type': 'application/vnd.docker.distribution.manifest.v2+json' }).end(this.manifest)
    const digest = /^\/v2\/library\/tiny\/blobs\/(sha256:[0-9a-f]{64})$/.exec(path)?.[1]
    const bytes = digest ? this.blobs.get(digest) : undefined
    if (!bytes) return void res.writeHead(404).end()
    const m = /^bytes=(\d+)-(\d*)$/.exec(range ?? '')
    const start = m ? Number(m[1]) : 0
    const end = m && m[2] ? Math.min(Number(m[2]), bytes.length - 1) : bytes.length - 1
    res.writeHead(m ? 206 : 200, { 'content-length': end - start + 1, ...(m ? { 'content-range': `bytes ${start}-${end}/${bytes.length}` } : {}) })
    const counter = digest === this.modelDigest ? this.modelBytesSent.push(0) - 1 : undefined
    for (let at = start; at <= end && !res.destroyed;) {
      const hold = digest === this.modelDigest ? this.hold : undefined
      if (hold && at >= hold.at) {
        await Promise.race([hold.released, new Promise((r) => res.once('close', r))])
        continue
      }
      const stop = Math.min(end + 1, at + 64 * 1024, hold && hold.at > at ? hold.at : Infinity)
      const chunk = bytes.subarray(at, stop)
      if (counter !== undefined) this.modelBytesSent[counter]! += chunk.length
      at = stop
      if (!res.write(chunk)) await new Promise((r) => res.once('drain', r))
      if (counter !== undefined && this.chunkDelayMs > 0) await new Promise((r) => setTimeout(r, this.chunkDelayMs))
    }
    res.end()
  }
}

describe('POST /api/models/pull by Ollama name', () => {
  let registry: StandInRegistry
  let model: Buffer
  const name = () => `${registry.host}/library/tiny:1`
  const blobsDir = () => join(modelsDir, 'ollama', 'blobs')

  beforeAll(async () => {
    // Past the 4 MiB the pull reads for the GGUF header first, so the blob's own turn has bytes to show.
    writeTinyLlama(join(payloadDir, 'registry-tiny.gguf'), { embd: 256, layers: 2, ff: 512, seed: 5 })
    model = readFileSync(join(payloadDir, 'registry-tiny.gguf'))
    registry = await StandInRegistry.start(model)
  })

  afterAll(() => registry?.close())

  it('is a job in the list with its progress, and after it the model is served under its name', async () => {
    registry.holdAt(6 * 1024 * 1024)
    const pulled = await api('POST', '/api/models/pull', { source: name(), insecure: true })
    expect(pulled.status).toBe(202)
    const download = pulled.json.download
    expect(download).toMatchObject({
      kind: 'registry',
      registry: registry.host,
      source: name(),
      model_id: name(),
      file: join('ollama/manifests', registry.host, 'library/tiny/1'),
      mmproj: null,
      error: null,
    })
    const listed = await api('GET', '/api/downloads')
    expect(listed.json.downloads[0]).toMatchObject({ id: download.id, kind: 'registry' })

    const streamed = events(`/api/downloads/${download.id}/events`)
    // Held midway: the job shows what came (written a MiB at a time) of how much, at a rate.
    await expect.poll(async () => (await api('GET', `/api/downloads/${download.id}`)).json.bytes, { timeout: 10_000 }).toBeGreaterThanOrEqual(5 * 1024 * 1024)
    const midway = (await api('GET', `/api/downloads/${download.id}`)).json
    expect(midway).toMatchObject({ state: 'downloading', total: registry.total })
    expect(midway.bytes).toBeLessThan(midway.total)
    expect(midway.files.map((f: { role: string }) => f.role)).toEqual(['model', 'layer', 'layer'])
    expect(midway.files[0]).toMatchObject({ source: registry.modelDigest, total: model.length, sha256: registry.modelDigest.slice(7) })
    // The rest at about 8 MB/s: long enough for a rate and an ETA.
    registry.chunkDelayMs = 8
    registry.release()

    const seen = await streamed
    const states = seen.map((e) => e.data.state)
    expect(states).toContain('downloading')
    expect(states).toContain('verifying')
    expect(states.at(-1)).toBe('done')
    expect(seen.some((e) => e.data.state === 'downloading' && e.data.rate_bps > 0 && e.data.eta_seconds !== null)).toBe(true)
    expect(seen.at(-1)!.data).toMatchObject({ bytes: registry.total, total: registry.total, eta_seconds: 0, error: null })
    expect(seen.at(-1)!.data.rate_bps).toBeGreaterThan(0)
    registry.chunkDelayMs = 0

    const served = (await api('GET', '/v1/models')).json.data.find((m: { id: string }) => m.id === name())
    expect(served).toMatchObject({ capabilities: ['chat'], source: 'ollama' })
    expect(readFileSync(join(blobsDir(), registry.modelDigest.replace(':', '-'))).equals(model)).toBe(true)
    // Nothing goes in models.json: the store's manifest is the model.
    expect(existsSync(join(modelsDir, 'models.json')) ? readFileSync(join(modelsDir, 'models.json'), 'utf8') : '').not.toContain(name())
    expect((await api('DELETE', `/api/models/${name()}`)).status).toBe(200)
  })

  it('cancelled midway keeps what came, and the next pull fetches only the rest', async () => {
    registry.holdAt(7 * 1024 * 1024)
    const first = (await api('POST', '/api/models/pull', { source: name(), insecure: true })).json.download
    await expect.poll(async () => (await api('GET', `/api/downloads/${first.id}`)).json.bytes, { timeout: 10_000 }).toBeGreaterThanOrEqual(6 * 1024 * 1024)
    const cancelled = await api('DELETE', `/api/downloads/${first.id}`)
    expect(cancelled.json).toMatchObject({
      id: first.id,
      state: 'cancelled',
      error_code: 'cancelled',
      error: expect.stringMatching(/kept: pull .* again to resume/),
    })
    const modelBlob = registry.modelDigest.replace(':', '-')
    expect(readdirSync(blobsDir())).toEqual(expect.arrayContaining([`${modelBlob}-partial`, `${modelBlob}-partial-0`]))
    // What reached the client before the cancel is on disk, to the byte its part file says.
    const kept = JSON.parse(readFileSync(join(blobsDir(), `${modelBlob}-partial-0`), 'utf8')).Completed as number
    expect(kept).toBeGreaterThanOrEqual(6 * 1024 * 1024)

    registry.release()
    registry.modelBytesSent = []
    const second = (await api('POST', '/api/models/pull', { source: name(), insecure: true })).json.download
    const seen = await events(`/api/downloads/${second.id}/events`)
    expect(seen.at(-1)!.data).toMatchObject({ state: 'done', bytes: registry.total })
    expect(seen.find((e) => e.data.state === 'downloading' && e.data.bytes > 0)!.data.bytes).toBeGreaterThanOrEqual(kept)
    // Only the rest of the model blob came the second time (and the one byte that asks where it is).
    expect(registry.modelBytesSent.reduce((a, b) => a + b, 0)).toBe(model.length - kept + 1)
    expect(readFileSync(join(blobsDir(), registry.modelDigest.replace(':', '-'))).equals(model)).toBe(true)
    expect(readdirSync(blobsDir()).filter((f) => f.includes('partial'))).toEqual([])
    // What the first kept went on in the second: the first has nothing left to discard, and cancelling it again takes nothing.
    expect((await api('GET', `/api/downloads/${first.id}`)).json).toMatchObject({ state: 'cancelled', error: null, error_code: null })
    const blobs = readdirSync(blobsDir()).sort()
    expect((await api('DELETE', `/api/downloads/${first.id}`)).json.state).toBe('cancelled')
    expect(readdirSync(blobsDir()).sort()).toEqual(blobs)
    expect((await api('DELETE', `/api/models/${name()}`)).status).toBe(200)
  })

  it('cancelled, then cancelled again, discards what it kept', async () => {
    registry.holdAt(6 * 1024 * 1024)
    const job = (await api('POST', '/api/models/pull', { source: name(), insecure: true })).json.download
    await expect.poll(async () => (await api('GET', `/api/downloads/${job.id}`)).json.bytes, { timeout: 10_000 }).toBeGreaterThanOrEqual(5 * 1024 * 1024)
    expect((await api('DELETE', `/api/downloads/${job.id}`)).json.error_code).toBe('cancelled')
    registry.release()
    const discarded = await api('DELETE', `/api/downloads/${job.id}`)
    expect(discarded.json).toMatchObject({ state: 'cancelled', error: null, error_code: null })
    expect(readdirSync(blobsDir())).toEqual([])
  })

  it('is interrupted when the server stops, keeping what came for the next server to resume', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hearth-api-shutdown-'))
    const manager = () => new DownloadManager({ folder: new ModelFolder(dir), registry: { ollamaStores: [] } })
    registry.holdAt(6 * 1024 * 1024)
    const stopping = manager()
    const job = await stopping.pull({ source: name(), insecure: true })
    await expect.poll(() => job.snapshot().bytes, { timeout: 10_000 }).toBeGreaterThanOrEqual(5 * 1024 * 1024)
    await stopping.shutdown()
    expect(job.snapshot()).toMatchObject({
      state: 'failed',
      errorCode: 'network',
      error: expect.stringMatching(/interrupted \(the server stopped\); pull .* again to resume/),
    })
    const kept = JSON.parse(readFileSync(join(dir, 'ollama/blobs', `${registry.modelDigest.replace(':', '-')}-partial-0`), 'utf8')).Completed as number
    expect(kept).toBeGreaterThanOrEqual(5 * 1024 * 1024)

    registry.release()
    registry.modelBytesSent = []
    const done = await (await manager().pull({ source: name(), insecure: true })).finished
    expect(done).toMatchObject({ state: 'done', kind: 'registry', bytes: registry.total })
    expect(registry.modelBytesSent.reduce((a, b) => a + b, 0)).toBe(model.length - kept + 1)
  })

  it('answers 400 naming the field for a bad name, a name the registry lacks, and fields a name does not take', async () => {
    const cases: Array<[unknown, string, string, RegExp]> = [
      [{ source: 'qwen 3' }, 'source', 'invalid_value', /invalid model name "qwen 3".*expected an Ollama name/],
      [{ source: 'a/b/c/d:1' }, 'source', 'invalid_value', /at most three parts/],
      [{ source: 'qwen3:' }, 'source', 'invalid_value', /the tag after ":" is empty/],
      [{ source: 'hf.co/ggml-org/gemma-3-4b-it-GGUF:Q4_K_M' }, 'source', 'invalid_value', /hf:\/\/ggml-org\/gemma-3-4b-it-GGUF\/<file>\.gguf/],
      [{ source: `http://${name()}` }, 'source', 'invalid_value', /"insecure": true/],
      [{ source: `${registry.host}/library/tiny:2`, insecure: true }, 'source', 'source_unavailable', /file does not exist/],
      [{ source: name(), insecure: true, mmproj: 'hf://o/r/mmproj.gguf' }, 'mmproj', 'invalid_value', /pulled by name/],
      [{ source: name(), insecure: true, id: 'other' }, 'id', 'invalid_value', /served under that name/],
      [{ source: 'hf://org/dup-GGUF/dup.gguf', insecure: true }, 'insecure', 'invalid_value', /only a pull by name/],
      [{ source: name(), insecure: 'yes' }, 'insecure', 'invalid_value', /./],
    ]
    for (const [body, param, code, message] of cases) {
      const res = await postJson(server, '/api/models/pull', body)
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.json.error, JSON.stringify(body)).toMatchObject({ type: 'invalid_request_error', param, code, message: expect.stringMatching(message) })
    }
    // Refused pulls leave no trace in the list.
    const listed = (await api('GET', '/api/downloads')).json.downloads
    expect(listed.some((d: { source: string }) => d.source.endsWith('tiny:2'))).toBe(false)
  })
})
