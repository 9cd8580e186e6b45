/**
 * Faults under a running server: a loaded model's file deleted, truncated or corrupted, and the disk
 * filling up during a pull. Each ends in a clean error (the API's error body, never a hang or a
 * dead server), the other models keep serving, and restoring the file brings the model back.
 * (The engine killed mid-request and the client vanishing are in chat.test.ts.)
 */
import { execFileSync } from 'node:child_process'
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  closeSync,
  rmSync,
  truncateSync,
  writeFileSync,
  writeSync,
  statSync,
  utimesSync,
} from 'node:fs'
import { randomBytes } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { FakeHub } from '../support/fake-hub.ts'
import { engineProcessIds } from '../support/process-stats.ts'
import { postJson, startTestServer, type TestServer } from '../support/server-process.ts'
import { writeTinyBert, writeTinyLlama } from '../support/tiny-models.ts'
import { cannotRun, skipTest } from '../support/skips.ts'

const hello = [{ role: 'user', content: 'Once upon a time' }]

/** An answer is clean when it is a success or carries exactly the error body with a known code. */
function expectClean(res: { status: number; json: any }, allowed: number[]) {
  expect(allowed, JSON.stringify(res.json)).toContain(res.status)
  if (res.status >= 400) {
    expect(Object.keys(res.json)).toEqual(['error'])
    expect(Object.keys(res.json.error).sort()).toEqual(['code', 'message', 'param', 'type'])
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('model files changing under a loaded model', () => {
  let server: TestServer
  let modelsDir: string
  let pristine: string

  beforeAll(async () => {
    modelsDir = mkdtempSync(join(tmpdir(), 'hearth-faults-'))
    pristine = join(mkdtempSync(join(tmpdir(), 'hearth-faults-pristine-')), 'victim.gguf')
    writeTinyLlama(pristine, { contextLength: 256 })
    copyFileSync(pristine, join(modelsDir, 'victim.gguf'))
    writeTinyBert(join(modelsDir, 'bystander.gguf'))
    writeFileSync(
      join(modelsDir, 'models.json'),
      JSON.stringify({
        models: [
          { id: 'victim', file: 'victim.gguf' },
          { id: 'bystander', file: 'bystander.gguf' },
        ],
      }),
    )
    // Every request checks the model's file, rather than trusting a listing up to a second old.
    server = await startTestServer({ modelsDir, env: { HEARTH_LISTING_MAX_AGE_MS: '0' } })
  })

  afterAll(async () => {
    await server?.stop()
  })

  /**
   * The server tells a changed file by its size and the second it was written, as a person's edits
   * are seconds apart; a test's are not, so each change is dated a second of its own.
   */
  let fileClock = Math.floor(Date.now() / 1000)
  const changed = (path: string) => {
    fileClock += 1
    utimesSync(path, fileClock, fileClock)
  }
  const victim = () => join(modelsDir, 'victim.gguf')
  const chat = () => postJson(server, '/v1/chat/completions', { model: 'victim', messages: hello, max_tokens: 4 })
  const bystanderServes = async () => expect((await postJson(server, '/v1/embeddings', { model: 'bystander', input: 'still here' })).status).toBe(200)
  const restore = () => {
    copyFileSync(pristine, victim())
    changed(victim())
  }

  it('deleted: a clean 404 naming the missing file; restored: served again', async () => {
    expect((await chat()).status).toBe(200)
    await bystanderServes()
    rmSync(victim())
    const gone = await chat()
    expectClean(gone, [404])
    expect(gone.json.error).toMatchObject({ code: 'model_not_found', param: 'model' })
    expect(gone.json.error.message).toMatch(/victim\.gguf.*does not exist/)
    await bystanderServes()
    restore()
    const back = await chat()
    expect(back.status).toBe(200)
    expect(back.json.usage.completion_tokens).toBe(4)
  })

  it('truncated: clean errors (never a hang or a dead server), then served again once restored', async () => {
    expect((await chat()).status).toBe(200)
    truncateSync(victim(), Math.floor(statSync(pristine).size / 2))
    changed(victim())
    for (let i = 0; i < 3; i++) {
      // The engine that mapped the old file is stopped before a request can read past its end
      // (that would be SIGBUS); loading the truncated file then fails, each time, cleanly.
      const res = await chat()
      expectClean(res, [500])
      expect(res.json.error).toMatchObject({ code: 'engine_load_failed', type: 'server_error' })
      expect(res.json.error.message).toMatch(/victim.*failed to load/)
    }
    await bystanderServes()
    restore()
    const back = await chat()
    expect(back.status, JSON.stringify(back.json)).toBe(200)
    await bystanderServes()
  })

  it('corrupted in place: clean errors, then served again once restored', async () => {
    expect((await chat()).status).toBe(200)
    const path = victim()
    // The header's magic and the first tensors' bytes overwritten, the size unchanged.
    const fd = openSync(path, 'r+')
    writeSync(fd, Buffer.from('XXXX'), 0, 4, 0)
    writeSync(fd, randomBytes(64 * 1024), 0, 64 * 1024, 32 * 1024)
    closeSync(fd)
    changed(path)
    const res = await chat()
    expectClean(res, [404])
    expect(res.json.error.message).toMatch(/not a usable model file/)
    await bystanderServes()
    restore()
    expect((await chat()).status).toBe(200)
    expect(engineProcessIds(server.process.pid).length).toBeLessThanOrEqual(2)
  })

  it('replaced by another model: the engine restarts on the new file', async () => {
    expect((await chat()).status).toBe(200)
    const before = engineProcessIds(server.process.pid)
    const replacement = join(mkdtempSync(join(tmpdir(), 'hearth-faults-new-')), 'victim.gguf')
    writeTinyLlama(replacement, { contextLength: 128 })
    copyFileSync(replacement, victim())
    changed(victim())
    const res = await chat()
    expect(res.status).toBe(200)
    const after = engineProcessIds(server.process.pid)
    expect(after).toHaveLength(before.length)
    expect(after).not.toEqual(before)
    const model = await (await fetch(`${server.url}/v1/models/victim`, { headers: { authorization: `Bearer ${server.apiKey}` } })).json()
    expect(model).toMatchObject({ context_length: 128, state: 'loaded' })
    restore()
  })
})

describe('the server process dying', () => {
  it('takes its engine processes with it, even one busy generating', async () => {
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-faults-dying-'))
    writeTinyLlama(join(modelsDir, 'long.gguf'), { contextLength: 32768 })
    writeTinyBert(join(modelsDir, 'bert.gguf'))
    const server = await startTestServer({ modelsDir })
    expect((await postJson(server, '/v1/embeddings', { model: 'bert', input: 'x' })).status).toBe(200)
    const busy = postJson(server, '/v1/chat/completions', { model: 'long', messages: hello, max_tokens: 30000 }).catch(() => undefined)
    let engines: number[] = []
    for (let i = 0; i < 100 && engines.length < 2; i++) {
      await sleep(100)
      engines = engineProcessIds(server.process.pid)
    }
    expect(engines).toHaveLength(2)
    await sleep(300)
    await server.stop('SIGKILL')
    await busy
    const deadline = Date.now() + 10_000
    let alive = engines
    while (alive.length > 0 && Date.now() < deadline) {
      await sleep(100)
      alive = engines.filter((pid) => {
        try {
          process.kill(pid, 0)
          return true
        } catch {
          return false
        }
      })
    }
    expect(alive).toEqual([])
  })
})

describe('the disk filling up during a pull', () => {
  const mountPoint = join(tmpdir(), `hearth-tmpfs-${process.pid}`)
  let mounted = false
  let hub: FakeHub
  let server: TestServer

  beforeAll(async () => {
    mkdirSync(mountPoint, { recursive: true })
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=6m', 'tmpfs', mountPoint], { stdio: 'pipe' })
      mounted = true
    } catch (e) {
      cannotRun(`disk-full tests: cannot mount a small tmpfs (${(e as Error).message.split('\n')[0]}); they need root`)
      return
    }
    writeTinyBert(join(mountPoint, 'bystander.gguf'))
    hub = await FakeHub.start()
    server = await startTestServer({ modelsDir: mountPoint, env: { HEARTH_HF_ENDPOINT: hub.url } })
  })

  afterAll(async () => {
    await server?.stop()
    await hub?.close()
    if (mounted) execFileSync('umount', [mountPoint])
    rmSync(mountPoint, { recursive: true, force: true })
  })

  async function api(method: string, path: string, body?: unknown) {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${server.apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    return { status: res.status, json: (await res.json()) as any }
  }

  async function waitForDownload(id: string, done: (d: any) => boolean, timeoutMs = 20_000) {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const d = (await api('GET', `/api/downloads/${id}`)).json
      if (done(d)) return d
      if (Date.now() > deadline) throw new Error(`download ${id} stuck: ${JSON.stringify(d)}`)
      await sleep(50)
    }
  }

  it('fails the download cleanly with insufficient_storage, removes the partial file and keeps serving', async ({ skip }) => {
    if (!mounted) skipTest(skip, 'needs a small tmpfs for the disk-full tests (mounting one needs root)')
    // 3 MB fits in the 6 MB disk when the pull starts; then something else fills the disk.
    hub.put('org/big-GGUF/big.gguf', randomBytes(3 * 1024 * 1024), { chunkSize: 64 * 1024, chunkDelayMs: 40 })
    const pulled = await api('POST', '/api/models/pull', { source: 'hf://org/big-GGUF/big.gguf' })
    expect(pulled.status).toBe(202)
    const id = pulled.json.download.id
    await waitForDownload(id, (d) => d.bytes > 256 * 1024)
    const filler = join(mountPoint, '.filler')
    try {
      writeFileSync(filler, Buffer.alloc(5 * 1024 * 1024))
    } catch (e) {
      expect((e as NodeJS.ErrnoException).code).toBe('ENOSPC') // filled to the brim, as intended
    }
    const failed = await waitForDownload(id, (d) => d.state !== 'downloading' && d.state !== 'queued')
    expect(failed).toMatchObject({ state: 'failed', error_code: 'insufficient_storage' })
    expect(failed.error).toMatch(/disk is full/i)
    // No half file in the folder, and the partial download is gone, so the space comes back.
    expect(existsSync(join(mountPoint, 'big.gguf'))).toBe(false)
    expect(readdirSync(join(mountPoint, '.partial')).filter((f) => !f.endsWith('.json'))).toEqual([])
    expect((await postJson(server, '/v1/embeddings', { model: 'bystander', input: 'still serving' })).status).toBe(200)
    expect((await api('GET', '/v1/models')).json.data.map((m: { id: string }) => m.id)).toEqual(['bystander'])

    rmSync(filler, { force: true })
    // With room again, a pull works.
    hub.put('org/small-GGUF/small.gguf', randomBytes(200 * 1024))
    const again = await api('POST', '/api/models/pull', { source: 'hf://org/small-GGUF/small.gguf' })
    expect(again.status).toBe(202)
    const finished = await waitForDownload(again.json.download.id, (d) => d.state === 'done' || d.state === 'failed')
    expect(finished.state).toBe('done')
  })

  it('refuses up front, with both numbers, a pull that cannot fit', async ({ skip }) => {
    if (!mounted) skipTest(skip, 'needs a small tmpfs for the disk-full tests (mounting one needs root)')
    hub.put('org/huge-GGUF/huge.gguf', Buffer.alloc(16), { announcedSize: 64 * 1024 * 1024 })
    const res = await api('POST', '/api/models/pull', { source: 'hf://org/huge-GGUF/huge.gguf' })
    expectClean(res, [400])
    expect(res.json.error).toMatchObject({ code: 'insufficient_storage', param: 'source' })
    expect(res.json.error.message).toMatch(/needs .* but only .* are free/)
  })
})
