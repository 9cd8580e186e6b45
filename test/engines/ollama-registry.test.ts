/**
 * Pulling Ollama models by name (models/downloads/ollama-pull.ts) from a real registry: the CNCF
 * Distribution registry on loopback (test/support/registry-program.ts), filled by the real
 * `ollama create` and `ollama push --insecure`, its blobs redirected to a file server as Ollama's
 * registry redirects them to its CDN. Hearth's pull must end with the bytes the real `ollama pull`
 * ends with; resume after the connection is cut; refuse a blob that is not its digest, keeping
 * nothing of it; say Ollama's "file does not exist" for a name the registry lacks; fetch a large
 * blob in parallel ranges; refuse, before its weights are fetched, a model llama.cpp cannot load;
 * link a blob Ollama's own store has instead of downloading it, and list such a model once.
 */
import { spawn } from 'node:child_process'
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ModelFolder } from '../../models/catalog/model-folder.ts'
import { isDownloadError, type DownloadError } from '../../models/downloads/download-error.ts'
import {
  ollamaProgressLine,
  pullOllamaModel,
  type OllamaPullEvent,
  type OllamaPullOptions,
  type PulledOllamaModel,
} from '../../models/downloads/ollama-pull.ts'
import { kv, writeGguf } from '../../models/writers/gguf-writer.ts'
import { ollamaProgram, runOllama, startOllamaServe, type OllamaServe } from '../support/ollama-program.ts'
import { PROJECT_ROOT } from '../support/server-process.ts'
import { registryBlobPath, registryProgram, startRegistry, type RunningRegistry } from '../support/registry-program.ts'
import { describeIf } from '../support/skips.ts'
import { writeTinyLlama } from '../support/tiny-models.ts'
import { startInProcessServer } from '../support/in-process-server.ts'
import { Ollama } from 'ollama'

const missing = [registryProgram() ? undefined : 'the Distribution registry', ollamaProgram() ? undefined : 'the ollama command'].filter((m) => m !== undefined)
const whyNot = `${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} not built (the engines setup builds them from the Go module proxy); the registry pull suite cannot run`

/** Parts small enough that the test model is fetched in many ranges, four at a time. */
const PARTS = { count: 16, minPartBytes: 256 * 1024, concurrency: 4 }
const HEADER_PROBE = 64 * 1024

let root: string
let registry: RunningRegistry
let ollamaHome: string
let ollama: OllamaServe
/** The store the real `ollama pull` filled, and what the pushes left to compare with. */
let ollamaPulledStore: string
const blobs: Record<'tiny' | 'unknownArch' | 'visionInside', { digest: string; size: number }> = {} as never

const name = (model: string) => `${registry.host}/library/${model}:1`

function ollamaCli(args: string[], home = ollamaHome, serve = ollama) {
  return runOllama(args, { host: serve.url, home, timeoutMs: 180_000 })
}

async function pull(
  model: string,
  modelsDir: string,
  extra: Partial<OllamaPullOptions> = {},
): Promise<{ events: OllamaPullEvent[]; model: PulledOllamaModel; ms: number }> {
  const events: OllamaPullEvent[] = []
  const started = performance.now()
  const run = pullOllamaModel(name(model), {
    modelsDir,
    insecure: true,
    ollamaStores: [],
    parts: PARTS,
    headerProbeBytes: HEADER_PROBE,
    retry: { attempts: 1, baseDelayMs: 10, idleTimeoutMs: 10_000 },
    ...extra,
  })
  while (true) {
    const next = await run.next()
    if (next.done) return { events, model: next.value, ms: Math.round(performance.now() - started) }
    events.push(next.value)
  }
}

async function pullFailure(model: string, modelsDir: string, extra: Partial<OllamaPullOptions> = {}): Promise<DownloadError> {
  try {
    await pull(model, modelsDir, extra)
  } catch (e) {
    if (isDownloadError(e)) return e
    throw e
  }
  throw new Error(`pulling ${model} succeeded where it should have failed`)
}

/** Every file under a folder with its bytes' sha256-free identity: its size and content. */
function files(dir: string): Record<string, Buffer> {
  const found: Record<string, Buffer> = {}
  for (const entry of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
    const path = join(dir, entry)
    if (statSync(path).isFile()) found[relative(dir, path)] = readFileSync(path)
  }
  return found
}

/** Blob data requests the registry's file server got for one digest. */
function requestsFor(digest: string): Array<{ method: string; range: string | undefined }> {
  const hex = digest.slice(7)
  return registry.blobStats().requests.filter((r) => r.path.includes(`/${hex}/data`))
}

function freshModels(label: string): string {
  const dir = join(root, `${label}-${Math.random().toString(36).slice(2, 8)}`)
  mkdirSync(dir, { recursive: true })
  return dir
}

describeIf(missing.length === 0, whyNot)('pulling Ollama models by name from a registry', () => {
  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'hearth-registry-pull-'))
    registry = await startRegistry()
    ollamaHome = join(root, 'ollama-home')
    ollama = await startOllamaServe(join(ollamaHome, 'models'), { home: ollamaHome })
    const ggufs = join(root, 'ggufs')
    mkdirSync(ggufs)
    // A model large enough for many parts (about 4 MB), one in an architecture llama.cpp lacks,
    // and one holding its vision tower inside, as Ollama's own engine writes some.
    writeTinyLlama(join(ggufs, 'tiny.gguf'), { embd: 256, layers: 2, ff: 512, seed: 7 })
    const filler = (n: number) => new Float32Array(n).map((_, i) => Math.sin(i))
    writeGguf(join(ggufs, 'unknown-arch.gguf'), {
      metadata: [kv.str('general.architecture', 'hearthformer'), kv.u32('hearthformer.context_length', 256), kv.u32('hearthformer.embedding_length', 64)],
      tensors: [{ name: 'token_embd.weight', shape: [64, 4096], type: 'F32', data: filler(64 * 4096) }],
    })
    writeGguf(join(ggufs, 'vision-inside.gguf'), {
      metadata: [kv.str('general.architecture', 'llama'), kv.u32('llama.context_length', 256), kv.u32('llama.embedding_length', 64)],
      tensors: [
        { name: 'token_embd.weight', shape: [64, 4096], type: 'F32', data: filler(64 * 4096) },
        { name: 'v.blk.0.attn_q.weight', shape: [64, 64], type: 'F32', data: filler(64 * 64) },
        { name: 'mm.0.weight', shape: [64, 64], type: 'F32', data: filler(64 * 64) },
      ],
    })
    for (const [model, file] of [
      ['tiny', 'tiny.gguf'],
      ['unknown-arch', 'unknown-arch.gguf'],
      ['vision-inside', 'vision-inside.gguf'],
    ] as const) {
      const modelfile = join(ggufs, `Modelfile-${model}`)
      writeFileSync(modelfile, `FROM ${join(ggufs, file)}\n${model === 'tiny' ? 'SYSTEM "You are brief."\nPARAMETER temperature 0.5\n' : ''}`)
      const created = await ollamaCli(['create', name(model), '-f', modelfile])
      expect(created.code, `ollama create ${name(model)}: ${created.stderr.slice(-500)}`).toBe(0)
      const pushed = await ollamaCli(['push', '--insecure', name(model)])
      expect(pushed.code, `ollama push ${name(model)}: ${pushed.stderr.slice(-500)}`).toBe(0)
    }
    const layerOf = (model: string) => {
      const manifest = JSON.parse(readFileSync(join(ollamaHome, 'models/manifests', registry.host, 'library', model, '1'), 'utf8')) as {
        layers: Array<{ mediaType: string; digest: string; size: number }>
      }
      return manifest.layers.find((l) => l.mediaType === 'application/vnd.ollama.image.model')!
    }
    blobs.tiny = layerOf('tiny')
    blobs.unknownArch = layerOf('unknown-arch')
    blobs.visionInside = layerOf('vision-inside')

    // The real `ollama pull --insecure` of the same name, into a store of its own.
    const pullerHome = join(root, 'ollama-puller')
    ollamaPulledStore = join(pullerHome, 'models')
    const puller = await startOllamaServe(ollamaPulledStore, { home: pullerHome })
    try {
      const pulled = await ollamaCli(['pull', '--insecure', name('tiny')], pullerHome, puller)
      expect(pulled.code, `ollama pull: ${pulled.stderr.slice(-500)}`).toBe(0)
    } finally {
      await puller.stop()
    }
  }, 600_000)

  afterAll(async () => {
    await ollama?.stop()
    await registry?.stop()
    if (root) rmSync(root, { recursive: true, force: true })
  })

  it('pulls a name into Ollama’s layout with the same bytes as the real `ollama pull`, and serves it under that name', async () => {
    const models = freshModels('same-bytes')
    const before = registry.blobLink.bytesToClients()
    const { events, model, ms } = await pull('tiny', models)
    const fetched = registry.blobLink.bytesToClients() - before
    const ours = files(join(models, 'ollama'))
    const theirs = files(ollamaPulledStore)
    expect(Object.keys(ours).sort()).toEqual(Object.keys(theirs).sort())
    for (const [path, bytes] of Object.entries(theirs)) expect(ours[path]!.equals(bytes), path).toBe(true)
    expect(Object.keys(ours).some((p) => p.startsWith(join('manifests', registry.host, 'library', 'tiny')))).toBe(true)
    console.log(
      `[registry pull] ${name('tiny')}: ${model.size} bytes in ${Object.keys(ours).length - 1} blobs, ${fetched} bytes through the link, ${ms} ms; the same ${Object.keys(theirs).length} files as ollama pull`,
    )

    // Ollama's progress lines, in Ollama's order.
    const lines = events.map(ollamaProgressLine)
    expect(lines[0]).toEqual({ status: 'pulling manifest' })
    expect(lines.slice(-3)).toEqual([{ status: 'verifying sha256 digest' }, { status: 'writing manifest' }, { status: 'success' }])
    const last = lines.filter((l) => l.digest === blobs.tiny.digest).at(-1)
    expect(last).toEqual({ status: `pulling ${blobs.tiny.digest.slice(7, 19)}`, digest: blobs.tiny.digest, total: blobs.tiny.size, completed: blobs.tiny.size })

    const { models: served, broken } = await new ModelFolder(models).scan()
    const record = served.find((m) => m.id === `${registry.host}/library/tiny:1`)
    expect(record, JSON.stringify(broken)).toBeDefined()
    expect(record!.source).toMatchObject({ kind: 'ollama', pulled: true })
    expect(record!.ollama).toMatchObject({ system: 'You are brief.', parameters: { temperature: 0.5 } })
  })

  it('fetches a large blob in parallel ranges', async () => {
    const models = freshModels('parallel')
    await pull('tiny', models)
    const gets = requestsFor(blobs.tiny.digest)
      .slice(-32)
      .filter((r) => r.method === 'GET' && r.range)
    const expected = Math.ceil(blobs.tiny.size / Math.max(PARTS.minPartBytes, Math.floor(blobs.tiny.size / PARTS.count)))
    expect(expected).toBeGreaterThan(4)
    // Its first bytes come first (the header probe); every part then asks for its own range.
    const ranges = new Set(gets.slice(-expected).map((r) => r.range))
    expect(ranges.size).toBe(expected)
    expect(registry.blobStats().maxInFlight).toBeGreaterThan(1)
    console.log(`[registry pull] ${blobs.tiny.size} bytes in ${expected} ranges, at most ${registry.blobStats().maxInFlight} requests at once`)
  })

  it('resumes a pull whose connection was cut, fetching only what was missing', async () => {
    const models = freshModels('resume')
    const start = registry.blobLink.bytesToClients()
    registry.blobLink.cutAfter(Math.floor(blobs.tiny.size / 2))
    const failure = await pullFailure('tiny', models)
    registry.blobLink.mend()
    const first = registry.blobLink.bytesToClients() - start
    expect(failure.code).toBe('network')
    expect(failure.message).toMatch(/pull again to resume/)
    const blobsDir = join(models, 'ollama', 'blobs')
    const hex = blobs.tiny.digest.slice(7)
    expect(existsSync(join(blobsDir, `sha256-${hex}`))).toBe(false)
    expect(existsSync(join(blobsDir, `sha256-${hex}-partial`))).toBe(true)
    expect(existsSync(join(blobsDir, `sha256-${hex}-partial-0`))).toBe(true)
    expect(existsSync(join(models, 'ollama', 'manifests'))).toBe(false)

    const again = registry.blobLink.bytesToClients()
    const { model, ms } = await pull('tiny', models)
    const second = registry.blobLink.bytesToClients() - again
    expect(model.downloaded).toBeLessThan(blobs.tiny.size)
    expect(second).toBeLessThan(blobs.tiny.size)
    expect(readdirSync(blobsDir).filter((f) => f.includes('partial'))).toEqual([])
    expect(files(join(models, 'ollama'))[join('blobs', `sha256-${hex}`)]!.equals(files(ollamaPulledStore)[join('blobs', `sha256-${hex}`)]!)).toBe(true)
    console.log(
      `[registry pull] cut after ${first} bytes; the second pull fetched ${second} bytes (${model.downloaded} of the model's ${blobs.tiny.size}) in ${ms} ms`,
    )
  })

  it('refuses a blob that is not its digest, and keeps nothing of it', async () => {
    const models = freshModels('tampered')
    const data = registryBlobPath(registry.storageDir, blobs.tiny.digest)
    const at = statSync(data).size - 100
    const fd = openSync(data, 'r+')
    const original = Buffer.alloc(1)
    readSync(fd, original, 0, 1, at)
    writeSync(fd, Buffer.from([original[0]! ^ 0xff]), 0, 1, at)
    try {
      const failure = await pullFailure('tiny', models)
      expect(failure.code).toBe('checksum_mismatch')
      expect(failure.message).toContain(blobs.tiny.digest)
    } finally {
      writeSync(fd, original, 0, 1, at)
      closeSync(fd)
    }
    const blobsDir = join(models, 'ollama', 'blobs')
    expect(readdirSync(blobsDir).filter((f) => f.includes(blobs.tiny.digest.slice(7)))).toEqual([])
    expect(existsSync(join(models, 'ollama', 'manifests'))).toBe(false)
  })

  it('says "file does not exist" for a name the registry lacks, as Ollama does', async () => {
    const failure = await pullFailure('nonesuch', freshModels('missing'))
    expect(failure.code).toBe('not_found')
    expect(failure.message).toMatch(/^pull model manifest: file does not exist/)
    const real = await ollamaCli(['pull', '--insecure', name('nonesuch')])
    expect(real.code).not.toBe(0)
    expect(real.stderr).toContain('pull model manifest: file does not exist')
  })

  it('refuses a model of an architecture llama.cpp lacks before fetching its weights', async () => {
    const models = freshModels('unknown-arch')
    const failure = await pullFailure('unknown-arch', models)
    expect(failure.code).toBe('invalid_value')
    expect(failure.message).toMatch(/architecture "hearthformer".*cannot load/)
    expect(failure.message).toMatch(/hf\.co\//)
    expect(requestsFor(blobs.unknownArch.digest).filter((r) => r.method === 'GET')).toEqual([])
    expect(existsSync(join(models, 'ollama', 'manifests'))).toBe(false)
  })

  it('refuses a model holding its vision tower inside after reading only its header', async () => {
    const models = freshModels('vision-inside')
    const failure = await pullFailure('vision-inside', models)
    expect(failure.code).toBe('invalid_value')
    expect(failure.message).toMatch(/vision encoder inside the model file/)
    const gets = requestsFor(blobs.visionInside.digest).filter((r) => r.method === 'GET')
    expect(gets.map((r) => r.range)).toEqual([`bytes=0-${HEADER_PROBE - 1}`])
    expect(HEADER_PROBE).toBeLessThan(blobs.visionInside.size / 10)
    expect(readdirSync(join(models, 'ollama', 'blobs')).filter((f) => f.includes(blobs.visionInside.digest.slice(7)))).toEqual([])
  })

  it('pulls by name from the command line, in Ollama’s lines', async () => {
    const models = freshModels('cli')
    const run = await new Promise<{ code: number | null; out: string }>((done) => {
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', join(PROJECT_ROOT, 'main/cli/models.ts'), 'pull', '--insecure', name('tiny'), '--models-dir', models],
        {
          cwd: PROJECT_ROOT,
          env: { ...process.env, HOME: root, OLLAMA_MODELS: join(root, 'no-ollama-store') },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      )
      let out = ''
      child.stdout.on('data', (d: Buffer) => (out += d))
      child.stderr.on('data', (d: Buffer) => (out += d))
      child.on('close', (code) => done({ code, out }))
    })
    expect(run.code, run.out).toBe(0)
    expect(run.out).toMatch(/^pulling manifest\n/)
    expect(run.out).toContain(`pulling ${blobs.tiny.digest.slice(7, 19)} 100%`)
    expect(run.out).toMatch(/verifying sha256 digest\nwriting manifest\nsuccess\n/)
    expect(
      files(join(models, 'ollama'))[join('manifests', registry.host, 'library', 'tiny', '1')]!.equals(
        files(ollamaPulledStore)[join('manifests', registry.host, 'library', 'tiny', '1')]!,
      ),
    ).toBe(true)
  })

  it('links a blob Ollama’s own store has instead of downloading it, writes nothing there, and lists the model once', async () => {
    const models = freshModels('reuse')
    const ollamaBefore = Object.fromEntries(Object.entries(files(ollamaPulledStore)).map(([p, b]) => [p, b.length]))
    const fetchedBefore = requestsFor(blobs.tiny.digest).length
    const { model, events } = await pull('tiny', models, { ollamaStores: [ollamaPulledStore] })
    expect(requestsFor(blobs.tiny.digest).length).toBe(fetchedBefore)
    expect(model.downloaded).toBe(0)
    expect(model.reusedFromOllama).toContain(blobs.tiny.digest)
    expect(events.some((e) => e.status === 'pulling' && e.digest === blobs.tiny.digest && e.reused === 'ollama')).toBe(true)
    const hex = blobs.tiny.digest.slice(7)
    expect(statSync(join(models, 'ollama/blobs', `sha256-${hex}`)).ino).toBe(statSync(join(ollamaPulledStore, 'blobs', `sha256-${hex}`)).ino)
    expect(Object.fromEntries(Object.entries(files(ollamaPulledStore)).map(([p, b]) => [p, b.length]))).toEqual(ollamaBefore)

    const { models: served, broken } = await new ModelFolder(models, { sources: { ollama: [ollamaPulledStore] } }).scan()
    const id = `${registry.host}/library/tiny:1`
    expect(served.filter((m) => m.id === id)).toHaveLength(1)
    expect(served.find((m) => m.id === id)!.source).toMatchObject({ pulled: true })
    expect(broken.filter((b) => b.id === id)).toEqual([])
  })
  it('serves `ollama pull --insecure NAME` on Hearth’s Ollama port: Ollama’s lines, then the model runs under its name', async () => {
    const models = freshModels('route')
    const hearth = await startInProcessServer({ modelsDir: models, args: ['--ollama-port', '0'], env: { OLLAMA_MODELS: join(root, 'no-ollama-store') } })
    try {
      const pulled = await runOllama(['pull', '--insecure', name('tiny')], { host: hearth.ollamaUrl!, home: join(root, 'cli-home'), timeoutMs: 180_000 })
      expect(pulled.code, pulled.stderr.slice(-500)).toBe(0)
      expect(pulled.stderr + pulled.stdout).toContain('success')
      expect(
        files(join(models, 'ollama'))[join('manifests', registry.host, 'library', 'tiny', '1')]!.equals(
          files(ollamaPulledStore)[join('manifests', registry.host, 'library', 'tiny', '1')]!,
        ),
      ).toBe(true)
      const listed = await runOllama(['list'], { host: hearth.ollamaUrl!, home: join(root, 'cli-home'), timeoutMs: 60_000 })
      expect(listed.stdout).toContain(`${registry.host}/library/tiny:1`)
      // Ollama's JavaScript client: the stream of lines, and a name the registry lacks as Ollama says it.
      const client = new Ollama({ host: hearth.ollamaUrl! })
      const statuses: string[] = []
      for await (const line of await client.pull({ model: name('tiny'), insecure: true, stream: true })) statuses.push(line.status)
      expect(statuses[0]).toBe('pulling manifest')
      expect(statuses.at(-1)).toBe('success')
      expect(await client.pull({ model: name('nothing-here'), insecure: true }).catch((e: unknown) => e)).toMatchObject({
        status_code: 404,
        error: expect.stringContaining('file does not exist'),
      })
      const answer = await client.chat({ model: name('tiny'), messages: [{ role: 'user', content: 'Hello' }] })
      expect(answer.done).toBe(true)
      // Its Modelfile came with it: the system prompt leads every conversation.
      expect(hearth.engines.flatMap((e) => e.jobs).at(-1)).toMatchObject({
        messages: [
          { role: 'system', content: 'You are brief.' },
          { role: 'user', content: 'Hello' },
        ],
      })
    } finally {
      await hearth.stop()
    }
  })
})
