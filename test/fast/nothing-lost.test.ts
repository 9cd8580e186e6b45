/**
 * What the server keeps is not lost, and what it cannot read is not thrown away (issue 64):
 * the document store keeps a document it cannot read at start and removes only what is proven
 * unfinished; files uploaded through /v1/files stay until deleted (637 of them, the first still
 * there) and a full store refuses with 507; the key store logs and retries a failed write and never
 * acknowledges a key it did not write; the reasoning key is never replaced, and each server has its
 * own seal; an engine's memory is measured without blocking the server.
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { residentBytesOf } from '../../engines/engine-server-process.ts'
import type { Engine } from '../../engines/engine.ts'
import { ServerMetrics } from '../../main/server/http/metrics.ts'
import { ApiError } from '../../main/server/services/api-error.ts'
import { DocumentStore, type StoredDocument } from '../../main/server/services/documents/document-store.ts'
import { KeyStore } from '../../main/server/services/keys/key-store.ts'
import { REASONING_KEY_FILE, ReasoningKeyError, ReasoningSeal } from '../../main/server/services/reasoning-seal.ts'
import { resolveSettings } from '../../main/server/settings.ts'
import { startServer } from '../../main/server/server.ts'
import { removeLeftoverCatalogWrites } from '../../models/catalog/catalog-writer.ts'
import { RESPONSE_RETENTION_MS, ResponseStore } from '../../main/server/protocols/responses/response-store.ts'
import { startInProcessServer, type InProcessServer } from '../support/in-process-server.ts'

const scratch = (name: string) => mkdtempSync(join(tmpdir(), `hearth-${name}-`))
const doc = { name: 'a.txt', format: 'text' as const, bytes: 1, characters: 1 }
const roomy = async () => ({ free: 1e12, total: 2e12 })

async function thrown(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.unreachable('it should have failed'),
    (e: unknown) => e,
  )
}

describe('the document store at start', () => {
  it('keeps a document it cannot read, says so, and serves it once it can be read again', async () => {
    const dir = scratch('docs-unreadable')
    const lines: string[] = []
    const store = await DocumentStore.open(dir, undefined, { log: (l) => lines.push(l), diskSpace: roomy })
    const [a, b] = [await store.add(doc, 'alpha', Buffer.from('a')), await store.add(doc, 'beta', Buffer.from('b'))]
    // An error reading meta.json that is not its absence (here a loop of links: ELOOP; in life a
    // folder's permissions, too many open files) proves nothing about the document.
    renameSync(join(dir, a.id, 'meta.json'), join(dir, 'a-meta.json'))
    symlinkSync('meta.json', join(dir, a.id, 'meta.json'))
    // A damaged meta.json is not a write cut off either: meta.json is only ever renamed into place.
    writeFileSync(join(dir, b.id, 'meta.json'), '{"id": "file-')

    const reopened = await DocumentStore.open(dir, undefined, { log: (l) => lines.push(l), diskSpace: roomy })
    expect(existsSync(join(dir, a.id, 'original'))).toBe(true)
    expect(existsSync(join(dir, b.id, 'text.txt'))).toBe(true)
    expect(
      reopened
        .problems()
        .map((p) => p.id)
        .sort(),
    ).toEqual([a.id, b.id].sort())
    expect(lines.join('\n')).toContain(`document ${a.id}`)
    expect(lines.join('\n')).toMatch(/ELOOP/)
    expect(lines.join('\n')).toMatch(/not valid JSON/)
    // Asked for while still unreadable: 503, not "no such file".
    const unavailable = await thrown(reopened.find(b.id))
    expect(unavailable).toBeInstanceOf(ApiError)
    expect((unavailable as ApiError).status).toBe(503)

    rmSync(join(dir, a.id, 'meta.json'))
    renameSync(join(dir, 'a-meta.json'), join(dir, a.id, 'meta.json'))
    expect((await reopened.find(a.id))?.id).toBe(a.id)
    expect(await reopened.text(a.id)).toBe('alpha')
    expect(lines.join('\n')).toContain(`document ${a.id} can be read again`)
  })

  it('removes only what is proven unfinished: a .partial folder, a folder without meta.json, temporary files', async () => {
    const dir = scratch('docs-unfinished')
    const store = await DocumentStore.open(dir, undefined, { diskSpace: roomy })
    const kept = await store.add(doc, 'kept', Buffer.from('k'))
    mkdirSync(join(dir, 'file-0123456789abcdef01234567.partial'))
    writeFileSync(join(dir, 'file-0123456789abcdef01234567.partial', 'original'), 'half')
    mkdirSync(join(dir, 'file-89abcdef0123456789abcdef.removing'))
    mkdirSync(join(dir, 'doc_0123456789abcdef01234567'))
    writeFileSync(join(dir, 'doc_0123456789abcdef01234567', 'text.txt'), 'meta.json never written')
    writeFileSync(join(dir, kept.id, '.embeddings-0badf00d.json.0123abcd.tmp'), '{"half')
    writeFileSync(join(dir, kept.id, 'meta.json.4242.0123abcd.tmp'), '{"half')
    writeFileSync(join(dir, 'notes.txt'), 'not ours: left alone')
    const reopened = await DocumentStore.open(dir, undefined, { diskSpace: roomy })
    expect(readdirSync(dir).sort()).toEqual([kept.id, 'notes.txt'])
    expect(readdirSync(join(dir, kept.id)).sort()).toEqual(['meta.json', 'original', 'text.txt'])
    expect(reopened.list().map((d) => d.id)).toEqual([kept.id])
    expect(reopened.problems()).toEqual([])
  })
})

describe('files uploaded through /v1/files', () => {
  let server: InProcessServer
  beforeAll(async () => {
    server = await startInProcessServer()
  })
  afterAll(async () => {
    await server?.stop()
  })

  async function upload(name: string, text: string): Promise<{ status: number; json: any }> {
    const form = new FormData()
    form.append('purpose', 'user_data')
    form.append('file', new Blob([text]), name)
    const res = await fetch(`${server.url}/v1/files`, { method: 'POST', body: form, headers: { authorization: `Bearer ${server.apiKey}` } })
    return { status: res.status, json: await res.json() }
  }

  it('keeps all 637 a program uploads, the first ones too, until it deletes them', async () => {
    const ids: string[] = []
    const count = 637
    // Eight at a time, as a program with a pool of connections sends them.
    for (let start = 0; start < count; start += 8) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(8, count - start) }, (_, k) => upload(`note-${start + k}.txt`, `Note number ${start + k}.`)),
      )
      for (const answer of batch) {
        expect(answer.status).toBe(200)
        ids.push(answer.json.id)
      }
    }
    const listed = await fetch(`${server.url}/v1/files?limit=10000`, { headers: { authorization: `Bearer ${server.apiKey}` } }).then((r) => r.json())
    expect(new Set(listed.data.map((f: { id: string }) => f.id))).toEqual(new Set(ids))
    for (const [i, id] of ids.slice(0, 20).entries()) {
      const content = await fetch(`${server.url}/v1/files/${id}/content`, { headers: { authorization: `Bearer ${server.apiKey}` } })
      expect(content.status).toBe(200)
      expect(await content.text()).toBe(`Note number ${i}.`)
    }
    // The same bytes uploaded again are a file of their own: deleting one leaves the other.
    const [first, second] = [await upload('same.txt', 'same'), await upload('same.txt', 'same')]
    expect(first.json.id).not.toBe(second.json.id)
    await fetch(`${server.url}/v1/files/${first.json.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${server.apiKey}` } })
    expect((await fetch(`${server.url}/v1/files/${second.json.id}`, { headers: { authorization: `Bearer ${server.apiKey}` } })).status).toBe(200)
  }, 120_000)

  it('refuses an upload the disk cannot keep with 507, removing no file, and drops only copies of files sent inline', async () => {
    const dir = scratch('docs-full')
    let free = 300 * 1024 * 1024
    const total = 1000 * 1024 * 1024 // a reserve of 50 MiB: 5 % of it
    const store = await DocumentStore.open(dir, { maxDocuments: 100, maxBytes: 1e9 }, { diskSpace: async () => ({ free, total }) })
    const uploaded: StoredDocument[] = []
    for (let i = 0; i < 3; i++) uploaded.push(await store.add(doc, `upload ${i}`, Buffer.from(`${i}`)))
    const inline = await store.add({ ...doc, cache: true }, 'sent inline', Buffer.from('inline'))
    free = 50 * 1024 * 1024 + 10 * 1024 // below the reserve once a document is added
    const refused = await thrown(store.add(doc, 'one too many', Buffer.from('x')))
    expect(refused).toBeInstanceOf(ApiError)
    expect((refused as ApiError).status).toBe(507)
    expect((refused as ApiError).code).toBe('insufficient_storage')
    expect((refused as ApiError).headers['x-should-retry']).toBe('false')
    expect((refused as ApiError).message).toMatch(/never removed to make room/)
    // The copy sent inline goes to make room for another copy; the uploads stay.
    await expect(store.add({ ...doc, cache: true }, 'another inline', Buffer.from('again'))).rejects.toBeInstanceOf(ApiError)
    expect(store.get(inline.id)).toBeUndefined()
    expect(store.list().map((d) => d.id)).toEqual(uploaded.map((d) => d.id))
    expect(readdirSync(dir).sort()).toEqual(uploaded.map((d) => d.id).sort())
  })

  it('bounds only the copies of files sent inline by number and bytes', async () => {
    const dir = scratch('docs-cache')
    const store = await DocumentStore.open(dir, { maxDocuments: 2, maxBytes: 1e9 }, { diskSpace: roomy })
    const uploads = [
      await store.add(doc, 'u1', Buffer.from('u1')),
      await store.add(doc, 'u2', Buffer.from('u2')),
      await store.add(doc, 'u3', Buffer.from('u3')),
    ]
    const copies: StoredDocument[] = []
    for (let i = 0; i < 4; i++) copies.push(await store.add({ ...doc, cache: true }, `c${i}`, Buffer.from(`c${i}`)))
    expect(store.list().map((d) => d.id)).toEqual([...uploads, ...copies.slice(2)].map((d) => d.id))
  })
})

describe('the key store', () => {
  it('never acknowledges a key it could not write, logs a failed write of usage and writes it later', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })
    try {
      const dir = scratch('keys')
      const lines: string[] = []
      const store = await KeyStore.open(dir, (l) => lines.push(l))
      // A folder where keys.json goes: every write fails (as a full or read-only disk fails it).
      mkdirSync(join(dir, 'keys.json'))
      await expect(store.create('lost', {})).rejects.toThrow()
      expect(store.list()).toEqual([])
      rmSync(join(dir, 'keys.json'), { recursive: true })

      const { record } = await store.create('kept', {})
      // On the disk when create returns, without a flush: a crash now loses nothing.
      expect(JSON.parse(readFileSync(join(dir, 'keys.json'), 'utf8')).keys.map((k: { id: string }) => k.id)).toEqual([record.id])

      const blocked = join(dir, 'keys.json')
      renameSync(blocked, join(dir, 'keys.saved'))
      mkdirSync(blocked)
      store.addTokens(record.id, 42)
      await store.flush()
      expect(lines.join('\n')).toMatch(/usage and quotas could not be written to .*keys\.json.*trying again in 5 s/)
      rmSync(blocked, { recursive: true })
      renameSync(join(dir, 'keys.saved'), blocked)
      await vi.advanceTimersByTimeAsync(5_000)
      await vi.waitFor(() => expect(JSON.parse(readFileSync(blocked, 'utf8')).keys[0].tokens_today).toBe(42), { interval: 20, timeout: 5_000 })
      expect(lines.at(-1)).toMatch(/written to .* again/)
      expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([])
    } finally {
      vi.useRealTimers()
    }
  })
})

describe('the reasoning seal', () => {
  it('refuses a key file of the wrong length, naming it, and never writes over it', () => {
    const dir = scratch('seal')
    const file = join(dir, REASONING_KEY_FILE)
    writeFileSync(file, Buffer.alloc(16, 7).toString('base64'))
    const before = readFileSync(file)
    expect(() => ReasoningSeal.load(file)).toThrow(ReasoningKeyError)
    expect(() => ReasoningSeal.load(file)).toThrow(new RegExp(`${file}.*16 bytes.*will not replace it`))
    expect(readFileSync(file)).toEqual(before)
    // An empty file (a first write cut off) never sealed anything: a key is made in its place.
    writeFileSync(file, '')
    const seal = ReasoningSeal.load(file)
    expect(ReasoningSeal.load(file).open(seal.seal('kept'))).toBe('kept')
  })

  it('stops the server from starting, with the message, rather than replace the key', async () => {
    const dataDir = scratch('seal-server')
    writeFileSync(join(dataDir, REASONING_KEY_FILE), 'bm90IGEga2V5')
    const { settings } = resolveSettings(
      ['--port', '0', '--data-dir', dataDir, '--models-dir', scratch('seal-models'), '--api-key', 'test-key-0123456789', '--model-sources', 'none'],
      {},
      2,
    )
    const refused = await thrown(startServer(settings, () => undefined, { llamaBuild: null, whisperBuild: null }))
    expect(refused).toBeInstanceOf(ReasoningKeyError)
    expect(readFileSync(join(dataDir, REASONING_KEY_FILE), 'utf8')).toBe('bm90IGEga2V5')
  })

  it('is built per server: two servers in one process never share it, and a restart reads the key file again', async () => {
    const dataDir = scratch('seal-two')
    const [one, other] = [await startInProcessServer({ dataDir }), await startInProcessServer()]
    try {
      expect(one.context.seal).not.toBe(other.context.seal)
      const sealed = one.context.seal.seal('plan')
      expect(other.context.seal.open(sealed)).toBeUndefined()
      await one.stop()
      // The key file replaced by hand while the app restarts its server: the new server uses the file's key.
      rmSync(join(dataDir, REASONING_KEY_FILE))
      const again = await startInProcessServer({ dataDir })
      try {
        expect(again.context.seal.open(sealed)).toBeUndefined()
        expect(again.context.seal.open(again.context.seal.seal('new'))).toBe('new')
      } finally {
        await again.stop()
      }
    } finally {
      await other.stop()
    }
  })
})

describe("an engine's memory", () => {
  it('is measured without blocking the event loop, so the metrics give up on a slow answer after 1 s', async () => {
    const dir = scratch('slow-ps')
    const slowPs = join(dir, 'ps')
    // A `ps` that takes 3 s, as one does on a loaded machine.
    writeFileSync(slowPs, '#!/bin/sh\nsleep 3\necho 1000\n', { mode: 0o755 })
    const child = spawn('sleep', ['30'], { stdio: 'ignore' })
    try {
      const engine = { alive: true, memoryBytes: () => residentBytesOf(child.pid!, { proc: join(dir, 'no-proc'), ps: slowPs }) } as unknown as Engine
      const metrics = new ServerMetrics({ activity: () => [{ id: 'slow', running: 0, waiting: 0, loaded: true }], engineOf: () => engine })
      let ticks = 0
      const ticker = setInterval(() => ticks++, 20)
      const started = performance.now()
      const text = await metrics.registry.metrics()
      const took = performance.now() - started
      clearInterval(ticker)
      expect(took).toBeGreaterThanOrEqual(950)
      expect(took).toBeLessThan(2_500)
      // The server went on with its work all the while.
      expect(ticks).toBeGreaterThan(20)
      expect(text).not.toMatch(/^hearth_engine_resident_memory_bytes\{/m)
      // Where /proc is, it is read there.
      expect(await residentBytesOf(child.pid!)).toBeGreaterThan(0)
    } finally {
      child.kill('SIGKILL')
    }
  })
})

describe("the models folder's catalog", () => {
  it('loses the temporary file of a write a crash cut off, and never one in progress', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hearth-catalog-leftover-'))
    const stale = join(dir, 'models.json.4242.0badc0de.tmp')
    const fresh = join(dir, 'models.json.4243.0badc0df.tmp')
    writeFileSync(stale, '{"models": [')
    writeFileSync(fresh, '{"models": [')
    writeFileSync(join(dir, 'models.json'), '{"models": []}\n')
    utimesSync(stale, new Date(Date.now() - 3_600_000), new Date(Date.now() - 3_600_000))
    await removeLeftoverCatalogWrites(dir)
    expect(readdirSync(dir).sort()).toEqual(['models.json', 'models.json.4243.0badc0df.tmp'])
  })
})

describe('stored responses', () => {
  it('are kept until deleted or for 30 days, as OpenAI keeps them, never dropped to make room for others', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hearth-responses-kept-'))
    const store = new ResponseStore(dir)
    const stored = { owner: 'me', items: [], inputCount: 0, response: { id: 'x' } }
    const id = (n: number) => `resp_${n.toString(16).padStart(24, '0')}`
    for (let n = 0; n < 60; n++) await store.save(id(n), stored)
    expect(await store.load(id(0), 'me')).toBeDefined()
    // Past 30 days, a response is gone (and swept at the next prune).
    const old = new Date(Date.now() - RESPONSE_RETENTION_MS - 60_000)
    utimesSync(join(dir, `${id(1)}.json`), old, old)
    expect(await store.load(id(1), 'me')).toBeUndefined()
    expect(await store.load(id(2), 'me')).toBeDefined()
  })
})
