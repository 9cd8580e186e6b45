/**
 * Chaos (issue 64): the real server, killed with SIGKILL at random moments while clients write
 * through it at once: documents uploaded, deleted and embedded, keys made, changed, deleted and
 * the server's key rotated, models.json edited (Ollama's create, copy and delete), MCP servers (the
 * settings the API writes) added and removed, prompt caches saved as a model unloads, and a model
 * downloaded. After each restart every write it acknowledged (answered 2xx) is there, every JSON
 * file parses, every stored document opens, and the download resumes where it stopped.
 * Then a full disk (a small tmpfs as the data and models folder: 507, nothing half-written kept,
 * serving goes on) and a read-only data folder (one clear line at start, no stack trace).
 *
 * The kill moments and the work come from seeds: fixed ones, then one drawn at random and printed
 * (HEARTH_CHAOS_SEED replays it; HEARTH_CHAOS_ROUNDS sets how many rounds it gets, 3 by default).
 */
import { createHash, randomBytes, randomInt } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { FakeHub } from '../support/fake-hub.ts'
import { startTestServer, TEST_API_KEY, type TestServer } from '../support/server-process.ts'
import { describeIf } from '../support/skips.ts'
import { createRng, writeTinyBert, writeTinyLlama } from '../support/tiny-models.ts'
import { llamaBuild } from '../support/upstream-servers.ts'

const FIXED_SEEDS = [11, 23, 37, 41, 53, 67, 79, 83]
const RANDOM_SEED = Number(process.env.HEARTH_CHAOS_SEED ?? randomInt(1, 2 ** 31))
const RANDOM_ROUNDS = Number(process.env.HEARTH_CHAOS_ROUNDS ?? 3)
console.log(`chaos: fixed seeds ${FIXED_SEEDS.join(', ')}, then seed ${RANDOM_SEED} for ${RANDOM_ROUNDS} rounds (HEARTH_CHAOS_SEED=${RANDOM_SEED} replays it)`)

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex')
/** A temporary file of a write in progress (atomic-write.ts, the slot cache, a download): never read as data. */
const TEMPORARY = /(\.[0-9a-f]{8}\.tmp|\.partial|\.part)$/

const WORDS = ['harbor', 'copper', 'meadow', 'lantern', 'river', 'garden', 'window', 'market', 'engine', 'ladder', 'button', 'stone']
function prose(rng: () => number, words: number): string {
  return Array.from({ length: words }, (_, i) => `${WORDS[Math.floor(rng() * WORDS.length)]}${i % 12 === 11 ? '.\n' : ''}`).join(' ')
}

interface Answer {
  status: number
  json: any
  text: string
}

/** What the clients were told was done; each write is checked after every restart. */
class Ledger {
  /** Uploaded files by id: the sha256 of their bytes. */
  readonly files = new Map<string, string>()
  readonly deletedFiles = new Set<string>()
  /** Keys made by id: the key itself. */
  readonly keys = new Map<string, string>()
  readonly deletedKeys = new Set<string>()
  /** The server's own key as last rotated (or first read). */
  serverKey = ''
  rotationInFlight = false
  readonly models = new Set<string>()
  readonly deletedModels = new Set<string>()
  readonly mcp = new Set<string>()
  readonly deletedMcp = new Set<string>()
  /** Downloads reported done: the file and its sha256. */
  readonly downloads = new Map<string, string>()
  readonly acknowledged: Record<string, number> = {}

  ack(kind: string): void {
    this.acknowledged[kind] = (this.acknowledged[kind] ?? 0) + 1
  }

  get total(): number {
    return Object.values(this.acknowledged).reduce((a, b) => a + b, 0)
  }
}

class Chaos {
  server!: TestServer
  readonly dataDir = mkdtempSync(join(tmpdir(), 'hearth-chaos-data-'))
  readonly modelsDir = mkdtempSync(join(tmpdir(), 'hearth-chaos-models-'))
  readonly ledger = new Ledger()
  /** The managed key the workloads write with (the server's own key is rotated under them). */
  workerKey = ''
  kills = 0
  restarts: number[] = []
  resumed = 0
  /** Temporary files of writes the kills cut off, seen after a restart (removed once a minute old). */
  readonly leftovers = new Set<string>()
  /** Set when the server is killed: the workloads stop. */
  private dead = false

  constructor(readonly hub: FakeHub) {}

  async start(): Promise<void> {
    const started = performance.now()
    this.server = await startTestServer({ modelsDir: this.modelsDir, dataDir: this.dataDir, noKeyFlag: true, env: { HEARTH_HF_ENDPOINT: this.hub.url } })
    this.restarts.push(performance.now() - started)
    this.dead = false
  }

  async kill(): Promise<void> {
    this.dead = true
    this.server.process.kill('SIGKILL')
    await this.server.stop()
    this.kills++
  }

  get alive(): boolean {
    return !this.dead
  }

  async request(method: string, path: string, body?: unknown, key = this.workerKey): Promise<Answer> {
    const form = body instanceof FormData
    const res = await fetch(`${this.server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined || form ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : form ? body : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    })
    const text = await res.text()
    let json: any
    try {
      json = JSON.parse(text)
    } catch {
      json = undefined
    }
    return { status: res.status, json, text }
  }

  async upload(name: string, content: string): Promise<Answer> {
    const form = new FormData()
    form.append('purpose', 'user_data')
    form.append('file', new Blob([content]), name)
    return this.request('POST', '/v1/files', form)
  }
}

/** Runs `step` until the server dies; a step that throws (the connection cut by the kill) ends the loop. */
async function loop(chaos: Chaos, step: (n: number) => Promise<void>): Promise<void> {
  for (let n = 0; chaos.alive; n++) {
    try {
      await step(n)
    } catch (e) {
      if (chaos.alive) throw e
      return
    }
  }
}

function workloads(chaos: Chaos, round: number, rng: () => number): Array<Promise<void>> {
  const { ledger } = chaos
  const tag = `r${round}`
  /** What each workload made, so that it removes only its own (never the worker's key, nor a file a chat is reading). */
  const own = { files: [] as string[], keys: [] as string[] }
  const pick = (list: string[]) => list.splice(Math.floor(rng() * list.length), 1)[0]!
  const documents = async (n: number) => {
    const content = prose(rng, 20 + Math.floor(rng() * 3000))
    const answer = await chaos.upload(`${tag}-${n}.txt`, content)
    expect(answer.status, answer.text).toBe(200)
    ledger.files.set(answer.json.id, sha256(content))
    own.files.push(answer.json.id)
    ledger.ack('files uploaded')
    if (n % 4 === 3) {
      const victim = pick(own.files)
      ledger.files.delete(victim) // in doubt until the answer comes
      const deleted = await chaos.request('DELETE', `/v1/files/${victim}`)
      expect(deleted.status, deleted.text).toBe(200)
      ledger.deletedFiles.add(victim)
      ledger.ack('files deleted')
    }
  }
  const embedded = async (n: number) => {
    // Longer than the tiny model's context: its parts are retrieved, and embedded (and kept) first.
    const content = `The ${tag}-${n} gateway code is ${1000 + n}.\n\n${prose(rng, 900)}`
    const upload = await chaos.upload(`${tag}-long-${n}.txt`, content)
    expect(upload.status, upload.text).toBe(200)
    ledger.files.set(upload.json.id, sha256(content))
    ledger.ack('files uploaded')
    const part = n % 2 === 0 ? { file_id: upload.json.id } : { file_data: Buffer.from(content).toString('base64'), filename: `${tag}-inline-${n}.txt` }
    const answer = await chaos.request('POST', '/v1/chat/completions', {
      model: 'tiny',
      max_tokens: 1,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'file', file: part },
            { type: 'text', text: 'What is the gateway code?' },
          ],
        },
      ],
    })
    expect(answer.status, answer.text).toBe(200)
    ledger.ack('documents embedded')
  }
  const keys = async (n: number) => {
    if (n % 5 === 4) {
      ledger.rotationInFlight = true
      const rotated = await chaos.request('POST', '/api/keys/regenerate', undefined, ledger.serverKey)
      expect(rotated.status, rotated.text).toBe(200)
      ledger.serverKey = rotated.json.key
      ledger.rotationInFlight = false
      ledger.ack('server key rotated')
      return
    }
    const made = await chaos.request('POST', '/api/keys', { label: `${tag}-${n}`, requests_per_minute: 1000 }, ledger.serverKey)
    expect(made.status, made.text).toBe(201)
    ledger.keys.set(made.json.id, made.json.key)
    own.keys.push(made.json.id)
    ledger.ack('keys made')
    if (n % 3 === 2) {
      const victim = pick(own.keys)
      ledger.keys.delete(victim)
      const deleted = await chaos.request('DELETE', `/api/keys/${victim}`, undefined, ledger.serverKey)
      expect(deleted.status, deleted.text).toBe(200)
      ledger.deletedKeys.add(victim)
      ledger.ack('keys deleted')
    }
  }
  const catalog = async (n: number) => {
    const name = `${tag}-m${n}`
    const made =
      n % 2 === 0
        ? await chaos.request('POST', '/api/copy', { source: 'tiny', destination: name })
        : await chaos.request('POST', '/api/create', { model: name, from: 'tiny', stream: false })
    expect(made.status, made.text).toBe(200)
    ledger.models.add(name)
    ledger.ack(n % 2 === 0 ? 'models copied' : 'models created')
    if (n % 3 === 2) {
      const victim = [...ledger.models][Math.floor(rng() * ledger.models.size)]!
      ledger.models.delete(victim)
      const deleted = await chaos.request('DELETE', '/api/delete', { model: victim })
      expect(deleted.status, deleted.text).toBe(200)
      ledger.deletedModels.add(victim)
      ledger.ack('models deleted')
    }
  }
  const settings = async (n: number) => {
    const name = `${tag}-s${n}`
    const added = await chaos.request('POST', '/api/mcp/servers', { name, command: 'node', args: ['--version'], disabled: true })
    expect(added.status, added.text).toBe(201)
    ledger.mcp.add(name)
    ledger.ack('MCP servers added')
    if (n % 3 === 2) {
      const victim = [...ledger.mcp][Math.floor(rng() * ledger.mcp.size)]!
      ledger.mcp.delete(victim)
      const removed = await chaos.request('DELETE', `/api/mcp/servers/${victim}`)
      expect(removed.status, removed.text).toBe(200)
      ledger.deletedMcp.add(victim)
      ledger.ack('MCP servers removed')
    }
  }
  const slotCache = async (n: number) => {
    const answer = await chaos.request('POST', '/v1/chat/completions', {
      model: 'tiny',
      max_tokens: 4,
      messages: [{ role: 'user', content: `${tag} story ${n}: once upon a time` }],
    })
    expect(answer.status, answer.text).toBe(200)
    // Unloading saves each slot's prompt cache to the data folder.
    const unloaded = await chaos.request('POST', '/api/models/tiny/unload')
    expect(unloaded.status, unloaded.text).toBe(200)
    ledger.ack('prompt caches saved')
  }
  return [documents, documents, embedded, keys, catalog, settings, slotCache].map((step) => loop(chaos, step))
}

/** A download of its own each round, reported done or (killed) resumed after the restart. */
class Download {
  readonly key: string
  readonly sha256: string
  id: string | undefined
  constructor(
    readonly chaos: Chaos,
    round: number,
  ) {
    this.key = `org/chaos-GGUF/round-${round}.gguf`
    this.sha256 = chaos.hub.put(this.key, randomBytes(3 * 1024 * 1024), { chunkSize: 64 * 1024, chunkDelayMs: 20 }).sha256
  }

  get fileName(): string {
    return this.key.split('/').at(-1)!
  }

  async start(): Promise<void> {
    const pulled = await this.chaos.request('POST', '/api/models/pull', { source: `hf://${this.key}` })
    expect(pulled.status, pulled.text).toBe(202)
    this.id = pulled.json.download.id
  }

  /** Polls until done (an acknowledged write: the file must then stay); returns false where the server died first. */
  async watch(): Promise<boolean> {
    for (;;) {
      let state
      try {
        state = (await this.chaos.request('GET', `/api/downloads/${this.id}`)).json
      } catch {
        return false
      }
      if (state?.state === 'done') {
        this.chaos.ledger.downloads.set(this.fileName, this.sha256)
        this.chaos.ledger.ack('downloads finished')
        return true
      }
      if (state?.state === 'failed' || !this.chaos.alive) return false
      await sleep(50)
    }
  }
}

/** Every JSON file parses; every stored document has all its files. Returns what is wrong. */
function integrityProblems(chaos: Chaos): string[] {
  const problems: string[] = []
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)]))
  for (const file of [...walk(chaos.dataDir), ...walk(chaos.modelsDir)]) {
    const name = relative(chaos.dataDir, file).startsWith('..') ? relative(chaos.modelsDir, file) : relative(chaos.dataDir, file)
    if (TEMPORARY.test(file)) {
      // A download's part is kept on purpose: the pull resumes from it.
      if (!file.endsWith('.part')) chaos.leftovers.add(name)
      continue
    }
    if (file.endsWith('.json')) {
      try {
        JSON.parse(readFileSync(file, 'utf8'))
      } catch (e) {
        problems.push(`${name} does not parse: ${(e as Error).message}`)
      }
    }
  }
  const documents = join(chaos.dataDir, 'documents')
  if (existsSync(documents)) {
    for (const name of readdirSync(documents)) {
      if (/\.(partial|removing)$/.test(name)) problems.push(`documents/${name} was left after the store opened`)
      if (!/^file-/.test(name)) continue
      for (const part of ['meta.json', 'original', 'text.txt']) if (!existsSync(join(documents, name, part))) problems.push(`documents/${name} has no ${part}`)
    }
  }
  return problems
}

/** After a restart: each acknowledged write is there (and each acknowledged removal gone). Returns what was lost. */
async function lostWrites(chaos: Chaos): Promise<{ lost: string[]; checked: number }> {
  const { ledger } = chaos
  const lost: string[] = []
  let checked = 0
  const fileKey = readFileSync(join(chaos.dataDir, 'api-key'), 'utf8').trim()
  if (fileKey !== ledger.serverKey) {
    // Only a rotation whose answer never came may have changed the key.
    if (!ledger.rotationInFlight) lost.push(`the server's key: ${fileKey.slice(0, 12)}… is not the key last rotated to`)
    ledger.serverKey = fileKey
  }
  ledger.rotationInFlight = false
  checked++

  const listed = await chaos.request('GET', '/v1/files?limit=10000')
  const files = new Set<string>(listed.json.data.map((f: { id: string }) => f.id))
  for (const [id, hash] of ledger.files) {
    checked++
    if (!files.has(id)) {
      lost.push(`file ${id} is not listed`)
      continue
    }
    const content = await fetch(`${chaos.server.url}/v1/files/${id}/content`, { headers: { authorization: `Bearer ${chaos.workerKey}` } })
    if (content.status !== 200 || sha256(Buffer.from(await content.arrayBuffer())) !== hash)
      lost.push(`file ${id} does not read back as uploaded (${content.status})`)
  }
  for (const id of ledger.deletedFiles) if ((checked++, files.has(id))) lost.push(`file ${id} was deleted, and is back`)

  const keys = new Map<string, unknown>((await chaos.request('GET', '/api/keys', undefined, ledger.serverKey)).json.keys.map((k: { id: string }) => [k.id, k]))
  for (const [id, key] of ledger.keys) {
    checked++
    if (!keys.has(id)) lost.push(`key ${id} is not listed`)
    else if ((await chaos.request('GET', '/v1/models', undefined, key)).status !== 200) lost.push(`key ${id} is listed but refused`)
  }
  for (const id of ledger.deletedKeys) if ((checked++, keys.has(id))) lost.push(`key ${id} was deleted, and is back`)

  const models = new Set<string>((await chaos.request('GET', '/v1/models')).json.data.map((m: { id: string }) => m.id))
  for (const id of ledger.models) if ((checked++, !models.has(id))) lost.push(`model ${id} is not listed`)
  for (const id of ledger.deletedModels) if ((checked++, models.has(id))) lost.push(`model ${id} was deleted, and is back`)
  if ((checked++, !models.has('tiny'))) lost.push('the model the copies were made of is gone')

  const mcp = new Set<string>((await chaos.request('GET', '/api/mcp/servers')).json.servers.map((s: { name: string }) => s.name))
  for (const name of ledger.mcp) if ((checked++, !mcp.has(name))) lost.push(`MCP server ${name} is not listed`)
  for (const name of ledger.deletedMcp) if ((checked++, mcp.has(name))) lost.push(`MCP server ${name} was removed, and is back`)

  for (const [file, hash] of ledger.downloads) {
    checked++
    const path = join(chaos.modelsDir, file)
    if (!existsSync(path) || sha256(readFileSync(path)) !== hash) lost.push(`downloaded ${file} is gone or changed`)
  }
  return { lost, checked }
}

describeIf(llamaBuild, 'needs llama.cpp built here (npm run build:engines)')('killed at random moments while clients write', () => {
  let hub: FakeHub
  let chaos: Chaos
  const report: string[] = []

  beforeAll(async () => {
    hub = await FakeHub.start()
    chaos = new Chaos(hub)
    writeTinyLlama(join(chaos.modelsDir, 'tiny.gguf'), { contextLength: 512 })
    writeTinyBert(join(chaos.modelsDir, 'bert.gguf'))
    await chaos.start()
    chaos.ledger.serverKey = readFileSync(join(chaos.dataDir, 'api-key'), 'utf8').trim()
    const worker = await chaos.request('POST', '/api/keys', { label: 'chaos worker', mcp: 'manage' }, chaos.ledger.serverKey)
    expect(worker.status, worker.text).toBe(201)
    chaos.workerKey = worker.json.key
    chaos.ledger.keys.set(worker.json.id, worker.json.key)
  })

  afterAll(async () => {
    await chaos?.server?.stop()
    await hub?.close()
    if (report.length) console.log(report.join('\n'))
  })

  it('loses no acknowledged write, leaves no file broken, and resumes the download, round after round', async () => {
    const seeds = [...FIXED_SEEDS, ...Array.from({ length: RANDOM_ROUNDS }, (_, i) => RANDOM_SEED + i)]
    let checkedTotal = 0
    const lostTotal: string[] = []
    const started = performance.now()
    for (const [round, seed] of seeds.entries()) {
      const rng = createRng(seed)
      const download = new Download(chaos, round)
      await download.start()
      const watching = download.watch()
      const work = workloads(chaos, round, rng)
      // Somewhere between the first writes and a few seconds of them.
      await sleep(300 + Math.floor(rng() * 2200))
      await chaos.kill()
      await Promise.all([...work, watching])
      const partial = readdirSync(join(chaos.modelsDir, '.partial'), { withFileTypes: true }).find(
        (e) => e.name.startsWith(download.fileName) && e.name.endsWith('.part'),
      )
      const kept = partial ? statSync(join(chaos.modelsDir, '.partial', partial.name)).size : 0

      await chaos.start()
      // The document store opens on first use, and removes what was left unfinished then.
      const { lost, checked } = await lostWrites(chaos)
      checkedTotal += checked
      lostTotal.push(...lost.map((l) => `seed ${seed}: ${l}`))
      const broken = integrityProblems(chaos)
      lostTotal.push(...broken.map((b) => `seed ${seed}: ${b}`))

      // The download goes on from what it had, when it was not done (or done, but not yet seen done).
      const placed = join(chaos.modelsDir, download.fileName)
      if (!chaos.ledger.downloads.has(download.fileName) && existsSync(placed)) {
        expect(sha256(readFileSync(placed)), `round ${round}: a download placed in the folder is not the file`).toBe(download.sha256)
      } else if (!chaos.ledger.downloads.has(download.fileName)) {
        const before = hub.gets(download.fileName).length
        await download.start()
        expect(await download.watch(), `round ${round}: the download did not finish after the restart`).toBe(true)
        const ranged = hub
          .gets(download.fileName)
          .slice(before)
          .some((r) => Number(/^bytes=(\d+)-/.exec(r.range ?? '')?.[1] ?? 0) > 0)
        if (kept > 0) {
          expect(ranged, `round ${round}: ${kept} bytes were kept, and the download started over`).toBe(true)
          chaos.resumed++
        }
      }
      // Serving goes on: a chat restores the saved prompt caches.
      const answer = await chaos.request('POST', '/v1/chat/completions', {
        model: 'tiny',
        max_tokens: 2,
        messages: [{ role: 'user', content: 'once upon a time' }],
      })
      expect(answer.status, answer.text).toBe(200)
      report.push(
        `chaos round ${round} (seed ${seed}): killed after ${chaos.ledger.total} writes acknowledged so far, ${checked} checked, ${lost.length + broken.length} lost or broken`,
      )
    }
    const seconds = Math.round((performance.now() - started) / 1000)
    const restart = Math.round(chaos.restarts.reduce((a, b) => a + b, 0) / chaos.restarts.length / 100) / 10
    report.push(
      `chaos: ${chaos.kills} kills (SIGKILL) in ${seconds} s, ${chaos.ledger.total} writes acknowledged (${Object.entries(chaos.ledger.acknowledged)
        .map(([k, v]) => `${v} ${k}`)
        .join(
          ', ',
        )}), ${checkedTotal} checks after restarts, ${lostTotal.length} lost or broken, ${chaos.resumed} downloads resumed, ${chaos.leftovers.size} temporary files of cut-off writes seen (${[...chaos.leftovers].map((f) => f.replace(/[0-9a-f]{8,}/g, '…')).join(', ')}), restart ${restart} s on average`,
    )
    expect(lostTotal).toEqual([])
    expect(chaos.kills).toBe(seeds.length)
  }, 300_000)
})

/** A small tmpfs (root only); undefined where none can be mounted here. */
function mountTmpfs(dir: string, options: string): boolean {
  mkdirSync(dir, { recursive: true })
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir], { stdio: 'pipe' })
    return true
  } catch {
    return false
  }
}

function unmount(dir: string): void {
  try {
    execFileSync('umount', [dir], { stdio: 'pipe' })
  } catch {
    // not mounted
  }
  rmSync(dir, { recursive: true, force: true })
}

const canMount = (() => {
  const probe = join(tmpdir(), `hearth-chaos-probe-${process.pid}`)
  const ok = mountTmpfs(probe, 'size=1m')
  unmount(probe)
  return ok
})()

describeIf(canMount && llamaBuild, 'needs root (to mount a small tmpfs) and llama.cpp built here (npm run build:engines)')(
  'a full disk under the data and models folders',
  () => {
    const mount = join(tmpdir(), `hearth-chaos-full-${process.pid}`)
    const filler = join(mount, 'filler')
    let server: TestServer
    let modelsBefore = ''

    beforeAll(async () => {
      expect(mountTmpfs(mount, 'size=16m')).toBe(true)
      mkdirSync(join(mount, 'models'))
      writeTinyBert(join(mount, 'models', 'bert.gguf'))
      writeTinyLlama(join(mount, 'models', 'tiny.gguf'), { contextLength: 256 })
      writeFileSync(join(mount, 'models', 'models.json'), JSON.stringify({ models: [{ id: 'tiny', file: 'tiny.gguf' }] }))
      modelsBefore = readFileSync(join(mount, 'models', 'models.json'), 'utf8')
      server = await startTestServer({ modelsDir: join(mount, 'models'), dataDir: join(mount, 'data') })
      // The disk filled to the last byte by something else.
      try {
        writeFileSync(filler, Buffer.alloc(32 * 1024 * 1024))
      } catch (e) {
        expect((e as NodeJS.ErrnoException).code).toBe('ENOSPC')
      }
    })

    afterAll(async () => {
      await server?.stop()
      unmount(mount)
    })

    async function call(method: string, path: string, body?: unknown): Promise<Answer> {
      const form = body instanceof FormData
      const res = await fetch(`${server.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${TEST_API_KEY}`, ...(body === undefined || form ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : form ? body : JSON.stringify(body),
      })
      const text = await res.text()
      return {
        status: res.status,
        text,
        json: (() => {
          try {
            return JSON.parse(text)
          } catch {
            return undefined
          }
        })(),
      }
    }

    function halfWritten(): string[] {
      const walk = (dir: string): string[] =>
        readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? [join(dir, e.name), ...walk(join(dir, e.name))] : [join(dir, e.name)]))
      return walk(mount)
        .filter((f) => TEMPORARY.test(f) || /\.(partial|removing)$/.test(f))
        .map((f) => relative(mount, f))
    }

    const openAiError = (answer: Answer) => {
      expect(answer.status, answer.text).toBe(507)
      expect(Object.keys(answer.json)).toEqual(['error'])
      expect(answer.json.error).toMatchObject({ type: 'server_error', code: 'insufficient_storage' })
      expect(answer.json.error.message).toMatch(/disk|full|free/i)
    }

    it('refuses each write with 507 (Ollama: its own shape), keeps nothing half-written, and serves on; with room again, writes work', async () => {
      const form = new FormData()
      form.append('purpose', 'user_data')
      form.append('file', new Blob([prose(createRng(1), 4000)]), 'manual.txt')
      const upload = await call('POST', '/v1/files', form)
      openAiError(upload)
      expect(upload.json.error.message).toMatch(/never removed to make room/)
      openAiError(await call('POST', '/api/keys', { label: 'no room' }))
      openAiError(await call('POST', '/api/mcp/servers', { name: 'no-room', command: 'node' }))
      const copy = await call('POST', '/api/copy', { source: 'tiny', destination: 'no-room' })
      expect(copy.status, copy.text).toBe(507)
      expect(Object.keys(copy.json)).toEqual(['error'])
      expect(halfWritten()).toEqual([])
      expect(readFileSync(join(mount, 'models', 'models.json'), 'utf8')).toBe(modelsBefore)

      const embedded = await call('POST', '/v1/embeddings', { model: 'bert', input: 'still serving' })
      expect(embedded.status, embedded.text).toBe(200)
      const chat = await call('POST', '/v1/chat/completions', { model: 'tiny', max_tokens: 2, messages: [{ role: 'user', content: 'once upon a time' }] })
      expect(chat.status, chat.text).toBe(200)

      rmSync(filler)
      expect((await call('POST', '/v1/files', form)).status).toBe(200)
      expect((await call('POST', '/api/keys', { label: 'room again' })).status).toBe(201)
      expect((await call('POST', '/api/copy', { source: 'tiny', destination: 'room-again' })).status).toBe(200)
    }, 120_000)
  },
)

describeIf(canMount, 'needs root (to mount a read-only tmpfs)')('a read-only data folder', () => {
  const mount = join(tmpdir(), `hearth-chaos-ro-${process.pid}`)
  afterAll(() => unmount(mount))

  it('is said in one line at start, naming the folder, without a stack trace', async () => {
    expect(mountTmpfs(mount, 'size=1m')).toBe(true)
    writeFileSync(join(mount, 'api-key'), 'hearth-kept-key-0123456789\n')
    execFileSync('mount', ['-o', 'remount,ro', mount])
    const refused = await startTestServer({ modelsDir: mkdtempSync(join(tmpdir(), 'hearth-chaos-ro-models-')), dataDir: mount, noKeyFlag: true }).then(
      async (s) => {
        await s.stop()
        return expect.unreachable('the server started on a read-only data folder')
      },
      (e: Error) => e.message,
    )
    expect(refused).toContain(`hearth: cannot write to the data folder ${mount}: it is on a read-only file system (EROFS)`)
    expect(refused).toMatch(/--data-dir/)
    expect(refused).not.toMatch(/^\s+at /m)
  })
})
