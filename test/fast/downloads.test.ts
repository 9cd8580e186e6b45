/**
 * Downloads, imports and removals at the manager level, against a local stand-in for the hub
 * (test/support/fake-hub.ts): full download, broken connection and resume, a wrong checksum, a
 * server without Range support, 404, a full disk, cancel; the catalog writer; the reference parser.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { addCatalogEntry, removeCatalogEntries } from '../../models/catalog/catalog-writer.ts'
import { ModelFolder } from '../../models/catalog/model-folder.ts'
import { recommendedModels } from '../../models/catalog/recommended-models.ts'
import { DownloadError } from '../../models/downloads/download-error.ts'
import { DownloadManager, type DownloadManagerOptions } from '../../models/downloads/download-manager.ts'
import { parseModelSource } from '../../models/downloads/hf-reference.ts'
import { importModel } from '../../models/downloads/model-import.ts'
import { removeModel } from '../../models/downloads/model-removal.ts'
import { FakeHub } from '../support/fake-hub.ts'
import { writeTinyLlama, writeTinyMmproj } from '../support/tiny-models.ts'

let hub: FakeHub
let payloadDir: string
let llama: Buffer
let mmproj: Buffer

beforeAll(async () => {
  hub = await FakeHub.start()
  payloadDir = mkdtempSync(join(tmpdir(), 'hearth-payloads-'))
  writeTinyLlama(join(payloadDir, 'tiny.gguf'))
  writeTinyMmproj(join(payloadDir, 'mmproj-tiny.gguf'), { textEmbd: 64 })
  llama = readFileSync(join(payloadDir, 'tiny.gguf'))
  mmproj = readFileSync(join(payloadDir, 'mmproj-tiny.gguf'))
})

afterAll(async () => {
  await hub?.close()
})

let modelsDir: string
let folder: ModelFolder

beforeEach(() => {
  modelsDir = mkdtempSync(join(tmpdir(), 'hearth-dl-'))
  folder = new ModelFolder(modelsDir)
})

function manager(options: Partial<DownloadManagerOptions> = {}): DownloadManager {
  return new DownloadManager({
    folder,
    hubEndpoint: hub.url,
    retry: { attempts: 3, baseDelayMs: 10, idleTimeoutMs: 5000 },
    freeBytes: async () => 10 * 1024 ** 3,
    ...options,
  })
}

const catalog = () => JSON.parse(readFileSync(join(modelsDir, 'models.json'), 'utf8')) as { models: Record<string, unknown>[] }
const partials = () => (existsSync(join(modelsDir, '.partial')) ? readdirSync(join(modelsDir, '.partial')) : [])

describe('hf:// and URL references', () => {
  const endpoint = 'https://huggingface.co'
  it('resolves hf://owner/repo/file and a revision', () => {
    expect(parseModelSource('hf://ggml-org/SmolVLM-500M-Instruct-GGUF/SmolVLM-500M-Instruct-Q8_0.gguf', 'source', endpoint)).toMatchObject({
      url: 'https://huggingface.co/ggml-org/SmolVLM-500M-Instruct-GGUF/resolve/main/SmolVLM-500M-Instruct-Q8_0.gguf',
      fileName: 'SmolVLM-500M-Instruct-Q8_0.gguf',
      hub: { repo: 'ggml-org/SmolVLM-500M-Instruct-GGUF', revision: 'main' },
    })
    const pinned = parseModelSource('hf://o/r@v1.2/sub/dir/m.gguf', 'source', endpoint)
    expect(pinned.url).toBe('https://huggingface.co/o/r/resolve/v1.2/sub/dir/m.gguf')
    expect(pinned.fileName).toBe('m.gguf')
    expect(pinned.source).toBe('hf://o/r@v1.2/sub/dir/m.gguf')
  })

  it('reads hub web links as hub files and keeps other https URLs as they are', () => {
    const blob = parseModelSource('https://huggingface.co/ggerganov/whisper.cpp/blob/main/ggml-base.bin', 'source', endpoint)
    expect(blob).toMatchObject({
      source: 'hf://ggerganov/whisper.cpp/ggml-base.bin',
      url: 'https://huggingface.co/ggerganov/whisper.cpp/resolve/main/ggml-base.bin',
    })
    const plain = parseModelSource('https://example.com/models/My%20Model.Q4.gguf?download=1', 'source', endpoint)
    expect(plain).toMatchObject({ fileName: 'My_Model.Q4.gguf', hub: undefined })
  })

  it('refuses what could name a path outside the folder, or is not a model file', () => {
    const bad = [
      'hf://owner/repo',
      'hf://owner/repo/../../etc/passwd.gguf',
      'hf://owner/repo/dir/..',
      'hf://owner/repo/model.safetensors',
      'hf://../repo/x.gguf',
      'ftp://example.com/x.gguf',
      'http://example.com/x.gguf',
      'https://user:pw@example.com/x.gguf',
      'https://example.com/',
      'https://example.com/..%2F..%2Fx.txt',
      '',
    ]
    for (const source of bad) {
      let error: unknown
      try {
        parseModelSource(source, 'source', endpoint)
      } catch (e) {
        error = e
      }
      expect(error, source).toBeInstanceOf(DownloadError)
      expect((error as DownloadError).param).toBe('source')
    }
    // Whatever the URL, the name is one plain file name.
    expect(parseModelSource('https://example.com/a/..%2F..%2Fevil.gguf', 'source', endpoint).fileName).toBe('evil.gguf')
    expect(parseModelSource('http://127.0.0.1:9/x.gguf', 'source', endpoint).fileName).toBe('x.gguf')
  })
})

describe('DownloadManager', () => {
  it('downloads an hf:// file, checks its sha256 and size, and adds it to the catalog', async () => {
    const { sha256 } = hub.put('org/tiny-GGUF/tiny-q8.gguf', llama)
    const downloads = manager()
    const job = await downloads.pull({ source: 'hf://org/tiny-GGUF/tiny-q8.gguf', id: 'org/tiny:q8' })
    const states: string[] = []
    job.subscribe((s) => states.push(s.state))
    const done = await job.finished
    expect(done).toMatchObject({ state: 'done', bytes: llama.length, total: llama.length, error: null, modelId: 'org/tiny:q8' })
    expect(done.files[0]!.sha256).toBe(sha256)
    expect(states).toContain('downloading')
    expect(states).toContain('verifying')
    expect(readFileSync(join(modelsDir, 'tiny-q8.gguf')).equals(llama)).toBe(true)
    expect(catalog().models).toEqual([{ id: 'org/tiny:q8', file: 'tiny-q8.gguf', source: 'hf://org/tiny-GGUF/tiny-q8.gguf', sha256 }])
    expect(partials()).toEqual([])
    const { models } = await folder.scan()
    expect(models.map((m) => m.id)).toEqual(['org/tiny:q8'])
    expect(downloads.list()[0]).toMatchObject({ id: job.id, state: 'done' })
  })

  it('downloads a model with its projector as one job, bytes and total covering both', async () => {
    hub.put('org/vlm-GGUF/vlm.gguf', llama)
    hub.put('org/vlm-GGUF/mmproj-vlm.gguf', mmproj)
    const job = await manager().pull({ source: 'hf://org/vlm-GGUF/vlm.gguf', mmproj: 'hf://org/vlm-GGUF/mmproj-vlm.gguf' })
    const done = await job.finished
    expect(done).toMatchObject({
      state: 'done',
      file: 'vlm.gguf',
      mmproj: 'mmproj-vlm.gguf',
      bytes: llama.length + mmproj.length,
      total: llama.length + mmproj.length,
    })
    expect(catalog().models[0]).toMatchObject({ id: 'vlm', file: 'vlm.gguf', mmproj: 'mmproj-vlm.gguf', mmproj_source: 'hf://org/vlm-GGUF/mmproj-vlm.gguf' })
    const { models } = await folder.scan()
    expect(models.find((m) => m.id === 'vlm')?.capabilities).toEqual(['chat', 'vision'])
  })

  it('resumes with Range after the connection breaks half way', async () => {
    const half = Math.floor(llama.length / 2)
    hub.put('org/cut-GGUF/cut.gguf', llama, { cutAfter: half, chunkSize: 16 * 1024 })
    const job = await manager().pull({ source: 'hf://org/cut-GGUF/cut.gguf' })
    const done = await job.finished
    expect(done.state).toBe('done')
    const gets = hub.gets('/cdn/org/cut-GGUF/cut.gguf')
    expect(gets).toHaveLength(2)
    expect(gets[0]!.range).toBeUndefined()
    expect(gets[1]!.range).toMatch(/^bytes=\d+-$/)
    expect(Number(/\d+/.exec(gets[1]!.range!)![0])).toBeGreaterThan(0)
    expect(readFileSync(join(modelsDir, 'cut.gguf')).equals(llama)).toBe(true)
  })

  it('keeps the partial file when the retries run out, and a later pull resumes it', async () => {
    const cutAt = 700_000
    hub.put('org/flaky-GGUF/flaky.gguf', llama, { cutAfter: cutAt, cuts: 10, chunkSize: 16 * 1024 })
    const first = await (
      await manager({ retry: { attempts: 0, baseDelayMs: 1, idleTimeoutMs: 5000 } }).pull({ source: 'hf://org/flaky-GGUF/flaky.gguf' })
    ).finished
    expect(first).toMatchObject({ state: 'failed', errorCode: 'network' })
    expect(first.error).toMatch(/pull the same source again to resume/)
    const kept = partials().filter((f) => f.endsWith('.part'))
    expect(kept).toHaveLength(1)
    const keptBytes = statSync(join(modelsDir, '.partial', kept[0]!)).size
    expect(keptBytes).toBeGreaterThan(0)
    expect(keptBytes).toBeLessThanOrEqual(cutAt)

    hub.behave('org/flaky-GGUF/flaky.gguf', { cutAfter: undefined, cuts: 0 })
    const before = hub.requests.length
    const second = await (await manager().pull({ source: 'hf://org/flaky-GGUF/flaky.gguf' })).finished
    expect(second.state).toBe('done')
    const resumedGet = hub.requests.slice(before).find((r) => r.method === 'GET' && r.path.startsWith('/cdn/'))
    expect(resumedGet?.range).toBe(`bytes=${keptBytes}-`)
    expect(readFileSync(join(modelsDir, 'flaky.gguf')).equals(llama)).toBe(true)
    expect(partials()).toEqual([])
  })

  it('gives up on a connection that goes silent and resumes on a new one', async () => {
    hub.put('org/stall-GGUF/stall.gguf', llama, { stallAfter: 600_000, chunkSize: 16 * 1024 })
    const job = await manager({ retry: { attempts: 3, baseDelayMs: 10, idleTimeoutMs: 300 } }).pull({ source: 'hf://org/stall-GGUF/stall.gguf' })
    const done = await job.finished
    expect(done.state).toBe('done')
    const gets = hub.gets('/cdn/org/stall-GGUF/stall.gguf')
    expect(gets).toHaveLength(2)
    expect(gets[1]!.range).toMatch(/^bytes=[1-9]\d*-$/)
    expect(readFileSync(join(modelsDir, 'stall.gguf')).equals(llama)).toBe(true)
  })

  it('retries a server error with backoff', async () => {
    hub.put('org/busy-GGUF/busy.gguf', llama, { failWith: { status: 503, times: 2 } })
    const done = await (await manager().pull({ source: 'hf://org/busy-GGUF/busy.gguf' })).finished
    expect(done.state).toBe('done')
    expect(hub.gets('/cdn/org/busy-GGUF/busy.gguf')).toHaveLength(3)
  })

  it('starts over when the server ignores Range (200 instead of 206)', async () => {
    hub.put('files/norange.gguf', llama, { ranges: false, cutAfter: 500_000, chunkSize: 16 * 1024 })
    const job = await manager().pull({ source: `${hub.url}/files/norange.gguf` })
    const done = await job.finished
    expect(done.state).toBe('done')
    const gets = hub.gets('/files/norange.gguf')
    expect(gets).toHaveLength(2)
    expect(gets[1]!.range).toMatch(/^bytes=\d+-$/) // asked, got the whole file back
    expect(readFileSync(join(modelsDir, 'norange.gguf')).equals(llama)).toBe(true)
    // A plain URL publishes no checksum: the one computed is recorded.
    expect(done.files[0]!.sha256).toMatch(/^[0-9a-f]{64}$/)
  })

  it('rejects a file whose sha256 is not the published one, and deletes it', async () => {
    hub.put('org/bad-GGUF/bad.gguf', llama, { publishedSha256: 'ab'.repeat(32) })
    const done = await (await manager().pull({ source: 'hf://org/bad-GGUF/bad.gguf' })).finished
    expect(done).toMatchObject({ state: 'failed', errorCode: 'checksum_mismatch' })
    expect(done.error).toMatch(/sha256/)
    expect(existsSync(join(modelsDir, 'bad.gguf'))).toBe(false)
    expect(existsSync(join(modelsDir, 'models.json'))).toBe(false)
    expect(partials()).toEqual([])
  })

  it('fails clearly on 404, before anything is written', async () => {
    const job = await manager().pull({ source: 'hf://org/missing-GGUF/nothing.gguf' })
    await job.prepared
    const done = await job.finished
    expect(done).toMatchObject({ state: 'failed', errorCode: 'source_unavailable' })
    expect(done.error).toMatch(/not found \(HTTP 404\)/)
    expect(job.failure?.param).toBe('source')
    expect(partials()).toEqual([])
  })

  it('refuses to start without the disk space, saying how much is needed and free', async () => {
    hub.put('org/big-GGUF/big.gguf', llama)
    const job = await manager({ freeBytes: async () => 1000 }).pull({ source: 'hf://org/big-GGUF/big.gguf' })
    const done = await job.finished
    expect(done).toMatchObject({ state: 'failed', errorCode: 'insufficient_storage' })
    expect(done.error).toContain(`${llama.length} bytes`)
    expect(done.error).toContain('1000 bytes')
    expect(hub.gets('/cdn/org/big-GGUF/big.gguf')).toHaveLength(0)
    expect(partials()).toEqual([])
  })

  it('cancels a running download and removes its partial file', async () => {
    hub.put('org/slow-GGUF/slow.gguf', llama, { chunkSize: 32 * 1024, chunkDelayMs: 20 })
    const downloads = manager()
    const job = await downloads.pull({ source: 'hf://org/slow-GGUF/slow.gguf' })
    await new Promise<void>((resolve) => job.subscribe((s) => s.bytes > 100_000 && resolve()))
    expect(partials().some((f) => f.endsWith('.part'))).toBe(true)
    const cancelled = await downloads.cancel(job.id)
    expect(cancelled).toMatchObject({ state: 'cancelled' })
    expect(partials()).toEqual([])
    expect(existsSync(join(modelsDir, 'slow.gguf'))).toBe(false)
  })

  it('reports progress with a rate and an ETA while downloading', async () => {
    // About 1.8 s of transfer: the meter reads a rate from half a second of history, and a download
    // of under a second (2 MB at 25 ms a chunk) left no snapshot with one on a loaded machine.
    hub.put('org/rate-GGUF/rate.gguf', llama, { chunkSize: 64 * 1024, chunkDelayMs: 60 })
    const job = await manager().pull({ source: 'hf://org/rate-GGUF/rate.gguf' })
    const seen: Array<{ rateBps: number; etaSeconds: number | null; bytes: number }> = []
    job.subscribe((s) => s.state === 'downloading' && seen.push(s))
    await job.finished
    const withRate = seen.filter((s) => s.rateBps > 0)
    expect(withRate.length).toBeGreaterThan(0)
    expect(withRate.every((s) => s.etaSeconds !== null)).toBe(true)
    // ~1.1 MB/s from the throttled server; the meter should be in the right order of magnitude.
    expect(withRate.at(-1)!.rateBps).toBeGreaterThan(300_000)
    expect(withRate.at(-1)!.rateBps).toBeLessThan(30_000_000)
    // Progress is throttled: a few updates per second, not one per chunk.
    expect(seen.length).toBeLessThan(llama.length / (64 * 1024))
  })

  it('refuses a second model with the same id or file, and a HEAD-less server still works', async () => {
    hub.put('files/nohead.gguf', llama, { noHead: true })
    const downloads = manager()
    const done = await (await downloads.pull({ source: `${hub.url}/files/nohead.gguf` })).finished
    expect(done).toMatchObject({ state: 'done', total: llama.length })
    await expect(downloads.pull({ source: `${hub.url}/files/nohead.gguf`, id: 'other' })).rejects.toMatchObject({ code: 'invalid_value', param: 'source' })
    hub.put('files/other.gguf', llama)
    await expect(downloads.pull({ source: `${hub.url}/files/other.gguf`, id: 'nohead' })).rejects.toMatchObject({ code: 'invalid_value', param: 'id' })
    await expect(downloads.pull({ source: `${hub.url}/files/other.gguf`, id: '../up' })).rejects.toMatchObject({ param: 'id' })
  })
})

describe('catalog writer', () => {
  it('adds and removes entries atomically, keeping other entries, unknown keys and top-level keys', async () => {
    writeFileSync(join(modelsDir, 'models.json'), JSON.stringify({ comment: 'mine', models: [{ id: 'a', file: 'a.gguf', ttl: 60, future_key: { x: 1 } }] }))
    await addCatalogEntry(modelsDir, { id: 'b', file: 'b.gguf' })
    await Promise.all([addCatalogEntry(modelsDir, { id: 'c', file: 'c.gguf' }), addCatalogEntry(modelsDir, { id: 'd', file: 'd.gguf' })])
    expect(catalog()).toEqual({
      comment: 'mine',
      models: [
        { id: 'a', file: 'a.gguf', ttl: 60, future_key: { x: 1 } },
        { id: 'b', file: 'b.gguf' },
        { id: 'c', file: 'c.gguf' },
        { id: 'd', file: 'd.gguf' },
      ],
    })
    await removeCatalogEntries(modelsDir, (e) => (e as { id: string }).id === 'b')
    expect(catalog().models.map((m) => m.id)).toEqual(['a', 'c', 'd'])
    expect(readdirSync(modelsDir).filter((f) => f.endsWith('.tmp'))).toEqual([])
  })

  it('creates the catalog when missing and refuses to overwrite a broken one', async () => {
    await addCatalogEntry(modelsDir, { id: 'x', file: 'x.gguf' })
    expect(catalog().models).toEqual([{ id: 'x', file: 'x.gguf' }])
    writeFileSync(join(modelsDir, 'models.json'), '{ not json')
    await expect(addCatalogEntry(modelsDir, { id: 'y', file: 'y.gguf' })).rejects.toThrow(/not valid JSON/)
    expect(readFileSync(join(modelsDir, 'models.json'), 'utf8')).toBe('{ not json')
  })
})

describe('import and remove', () => {
  it('imports by copy and by hard link, then removes the files and the entries', async () => {
    const copied = await importModel(folder, { path: join(payloadDir, 'tiny.gguf'), mode: 'copy', id: 'org/copied:f32' })
    expect(copied).toMatchObject({ id: 'org/copied:f32', file: 'tiny.gguf' })
    expect(readFileSync(join(modelsDir, 'tiny.gguf')).equals(llama)).toBe(true)
    expect(statSync(join(modelsDir, 'tiny.gguf')).ino).not.toBe(statSync(join(payloadDir, 'tiny.gguf')).ino)

    mkdirSync(join(payloadDir, 'other'), { recursive: true })
    writeTinyLlama(join(payloadDir, 'other', 'linked.gguf'))
    await importModel(folder, { path: join(payloadDir, 'other', 'linked.gguf'), mode: 'link' })
    expect(statSync(join(modelsDir, 'linked.gguf')).ino).toBe(statSync(join(payloadDir, 'other', 'linked.gguf')).ino)

    const ids = (await folder.scan()).models.map((m) => m.id)
    expect(ids).toEqual(['linked', 'org/copied:f32'])

    expect(await removeModel(folder, 'org/copied:f32')).toEqual({ id: 'org/copied:f32', files: ['tiny.gguf'] })
    expect(existsSync(join(modelsDir, 'tiny.gguf'))).toBe(false)
    await removeModel(folder, 'linked')
    expect(existsSync(join(modelsDir, 'linked.gguf'))).toBe(false)
    expect(existsSync(join(payloadDir, 'other', 'linked.gguf'))).toBe(true) // the original stays
    expect(catalog().models).toEqual([])
    await expect(removeModel(folder, 'linked')).rejects.toMatchObject({ code: 'not_found' })
  })

  it('refuses paths that are not absolute, missing, not regular files or not models', async () => {
    writeFileSync(join(payloadDir, 'notes.gguf'), 'hello, not a model')
    const cases: Array<[string, RegExp]> = [
      ['relative/x.gguf', /absolute/],
      [join(payloadDir, 'missing.gguf'), /no file/],
      [payloadDir, /not a regular file/],
      [join(payloadDir, 'notes.gguf'), /not a model file/],
    ]
    for (const [path, message] of cases) {
      await expect(importModel(folder, { path, mode: 'copy' })).rejects.toMatchObject({
        code: 'invalid_value',
        param: 'path',
        message: expect.stringMatching(message),
      })
    }
  })

  it('removes a projector only when no other model uses it', async () => {
    writeTinyLlama(join(modelsDir, 'a.gguf'))
    writeTinyLlama(join(modelsDir, 'b.gguf'))
    writeTinyMmproj(join(modelsDir, 'mmproj-shared.gguf'), { textEmbd: 64 })
    writeFileSync(
      join(modelsDir, 'models.json'),
      JSON.stringify({
        models: [
          { id: 'a', file: 'a.gguf', mmproj: 'mmproj-shared.gguf' },
          { id: 'b', file: 'b.gguf', mmproj: 'mmproj-shared.gguf' },
        ],
      }),
    )
    expect((await removeModel(folder, 'a')).files).toEqual(['a.gguf'])
    expect(existsSync(join(modelsDir, 'mmproj-shared.gguf'))).toBe(true)
    expect((await removeModel(folder, 'b')).files).toEqual(['b.gguf', 'mmproj-shared.gguf'])
    expect(readdirSync(modelsDir).filter((f) => f.endsWith('.gguf'))).toEqual([])
  })

  it('removes a catalog entry whose file is missing, and never a file outside the folder', async () => {
    const outside = join(payloadDir, 'outside.gguf')
    writeTinyLlama(outside)
    writeFileSync(
      join(modelsDir, 'models.json'),
      JSON.stringify({
        models: [
          { id: 'ghost', file: 'ghost.gguf' },
          { id: 'escape', file: '../outside.gguf' },
        ],
      }),
    )
    expect(await removeModel(folder, 'ghost')).toEqual({ id: 'ghost', files: [] })
    await removeModel(folder, 'escape')
    expect(existsSync(outside)).toBe(true)
    expect(catalog().models).toEqual([])
  })
})

describe('recommended models', () => {
  it('covers vision chat, embeddings, a multilingual whisper and a voice-activity model, with hub references that parse', () => {
    const list = recommendedModels()
    expect(list.some((m) => m.kind === 'chat' && m.mmproj && m.mmproj_source)).toBe(true)
    expect(list.some((m) => m.kind === 'embedding')).toBe(true)
    const speech = list.filter((m) => m.kind === 'speech')
    expect(speech.length).toBeGreaterThan(0)
    for (const m of speech) expect(m.file).not.toMatch(/\.en\b|turbo/)
    expect(list.filter((m) => m.kind === 'vad').map((m) => m.file)).toEqual([expect.stringMatching(/^ggml-silero-.*\.bin$/)])
    for (const m of list) {
      const parsed = parseModelSource(m.source, 'source', 'https://huggingface.co')
      expect(parsed.fileName).toBe(m.file)
      if (m.mmproj_source) expect(parseModelSource(m.mmproj_source, 'mmproj', 'https://huggingface.co').fileName).toBe(m.mmproj)
      // Models are tens of megabytes and more; the voice-activity model is under one.
      expect(m.size_bytes).toBeGreaterThan(m.kind === 'vad' ? 500_000 : 10_000_000)
    }
  })
})
