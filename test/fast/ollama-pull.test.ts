/**
 * Pulling by Ollama name, the parts that need no registry program: the name parser, Ollama's
 * progress lines, the checks a manifest and its config allow before a download, the part plan,
 * the token challenge, and a whole pull against a small in-process registry that asks for a token
 * and answers no ranges, then the pulled model's removal. The pulls from a real registry, filled by
 * the real `ollama push`, are in ollama-registry.test.ts.
 */
import { createHash } from 'node:crypto'
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ModelFolder } from '../../models/catalog/model-folder.ts'
import { DownloadError } from '../../models/downloads/download-error.ts'
import { hfAlternative } from '../../models/downloads/hf-alternatives.ts'
import { OLLAMA_PART_POLICY, planParts } from '../../models/downloads/ollama-blob-download.ts'
import { ollamaProgressLine, ollamaProgressNdjson, pullOllamaModel, type OllamaPullEvent } from '../../models/downloads/ollama-pull.ts'
import { parsePullName } from '../../models/downloads/ollama-pull-name.ts'
import { parseChallenge } from '../../models/downloads/ollama-registry.ts'
import { removeModel } from '../../models/downloads/model-removal.ts'
import { ollamaManifestProblem } from '../../models/sources/ollama-store.ts'
import { writeTinyLlama } from '../support/tiny-models.ts'

describe('Ollama pull names', () => {
  const registry = (text: string) => {
    const parsed = parsePullName(text)
    if (parsed.kind !== 'registry') throw new Error(`${text} is ${parsed.kind}`)
    return parsed
  }

  it('fills in the defaults as Ollama does', () => {
    expect(registry('qwen3:0.6b')).toMatchObject({
      name: { host: 'registry.ollama.ai', namespace: 'library', model: 'qwen3', tag: '0.6b' },
      shortName: 'qwen3:0.6b',
      repository: 'library/qwen3',
    })
    expect(registry('qwen3').name.tag).toBe('latest')
    expect(registry('user/model:tag')).toMatchObject({
      name: { host: 'registry.ollama.ai', namespace: 'user', model: 'model', tag: 'tag' },
      shortName: 'user/model:tag',
    })
    expect(registry('localhost:5000/team/model:v1.2')).toMatchObject({
      name: { host: 'localhost:5000', namespace: 'team', model: 'model', tag: 'v1.2' },
      shortName: 'localhost:5000/team/model:v1.2',
    })
    expect(registry('127.0.0.1:5000/library/tiny').shortName).toBe('127.0.0.1:5000/library/tiny:latest')
    expect(registry('registry.ollama.ai/library/llama3.2:3b').shortName).toBe('llama3.2:3b')
    expect(registry('http://localhost:5000/library/tiny:1')).toMatchObject({ scheme: 'http', name: { host: 'localhost:5000' } })
  })

  it('tells Hugging Face names and Hearth’s own references apart', () => {
    expect(parsePullName('hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M')).toEqual({
      kind: 'huggingface',
      name: 'hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M',
      owner: 'bartowski',
      repo: 'Llama-3.2-1B-Instruct-GGUF',
      tag: 'Q4_K_M',
    })
    expect(parsePullName('huggingface.co/ggml-org/gemma-3-4b-it-GGUF')).toMatchObject({ kind: 'huggingface', tag: undefined })
    expect(parsePullName('hf://ggml-org/x/y.gguf')).toEqual({ kind: 'reference', reference: 'hf://ggml-org/x/y.gguf' })
    expect(parsePullName('https://example.com/models/x.gguf')).toMatchObject({ kind: 'reference' })
    expect(parsePullName('https://huggingface.co/o/r/resolve/main/x.gguf')).toMatchObject({ kind: 'reference' })
  })

  it('refuses a bad name with an error that names it and what is wrong', () => {
    const problem = (text: unknown) => {
      try {
        parsePullName(text)
      } catch (e) {
        expect(e).toBeInstanceOf(DownloadError)
        expect((e as DownloadError).code).toBe('invalid_value')
        expect((e as DownloadError).param).toBe('model')
        return (e as DownloadError).message
      }
      throw new Error(`${String(text)} was accepted`)
    }
    expect(problem('')).toMatch(/a model name is needed/)
    expect(problem('qwen3:')).toBe('invalid model name "qwen3:": the tag after ":" is empty')
    expect(problem('a/b/c/d:1')).toMatch(/^invalid model name "a\/b\/c\/d:1": a name has at most three parts/)
    expect(problem('my.team/model')).toMatch(/^invalid model name "my.team\/model": the namespace "my.team" may hold only/)
    expect(problem('qwen 3')).toMatch(/the model "qwen 3" may hold only/)
    expect(problem('-x:1')).toMatch(/the model "-x"/)
    expect(problem('x:tag/with')).toMatch(/invalid model name/)
    expect(problem('ftp://host/ns/m')).toMatch(/the scheme "ftp"/)
    expect(problem('hf.co/onlyrepo')).toMatch(/hf\.co\/<owner>\/<repo>/)
    expect(problem(`x:${'a'.repeat(81)}`)).toMatch(/the tag .*at most 80/)
  })
})

describe('Ollama’s progress lines', () => {
  const events: OllamaPullEvent[] = [
    { status: 'pulling manifest' },
    {
      status: 'pulling',
      digest: `sha256:${'ab'.repeat(32)}`,
      mediaType: 'application/vnd.ollama.image.model',
      total: 1000,
      completed: 0,
      pullCompleted: 0,
      pullTotal: 1100,
      rateBps: 0,
    },
    {
      status: 'pulling',
      digest: `sha256:${'ab'.repeat(32)}`,
      mediaType: 'application/vnd.ollama.image.model',
      total: 1000,
      completed: 500,
      pullCompleted: 500,
      pullTotal: 1100,
      rateBps: 10,
    },
    { status: 'verifying sha256 digest' },
    { status: 'writing manifest' },
    { status: 'success', model: { name: 'tiny:1', manifestPath: '/x', size: 1100, downloaded: 1100, reusedFromOllama: [] } },
  ]

  it('are api.ProgressResponse’s: `pulling <12 hex>`, zero fields left out', () => {
    expect(events.map(ollamaProgressLine)).toEqual([
      { status: 'pulling manifest' },
      { status: 'pulling abababababab', digest: `sha256:${'ab'.repeat(32)}`, total: 1000 },
      { status: 'pulling abababababab', digest: `sha256:${'ab'.repeat(32)}`, total: 1000, completed: 500 },
      { status: 'verifying sha256 digest' },
      { status: 'writing manifest' },
      { status: 'success' },
    ])
  })

  it('stream as JSON lines, with an error line last where the pull fails', async () => {
    async function* failing() {
      yield events[0]!
      throw new DownloadError('not_found', 'pull model manifest: file does not exist')
    }
    const lines: string[] = []
    for await (const line of ollamaProgressNdjson(failing())) lines.push(line)
    expect(lines).toEqual(['{"status":"pulling manifest"}\n', '{"error":"pull model manifest: file does not exist"}\n'])
  })
})

describe('what a manifest says before the download', () => {
  const layer = (type: string) => ({ mediaType: `application/vnd.ollama.image.${type}` })

  it('refuses architectures llama.cpp lacks, tensors, cloud models and other formats; passes the rest', () => {
    expect(
      ollamaManifestProblem([layer('model'), layer('template')], { model_format: 'gguf', model_family: 'qwen3', model_families: ['qwen3'] }),
    ).toBeUndefined()
    expect(ollamaManifestProblem([layer('model'), layer('projector')], { model_family: 'llama', model_families: ['llama', 'clip'] })).toBeUndefined()
    expect(ollamaManifestProblem([layer('model')], { model_family: 'mllama', model_families: ['mllama'] })).toMatch(/architecture "mllama".*cannot load/)
    expect(ollamaManifestProblem([layer('model')], { model_family: 'qwen3', model_families: ['qwen3', 'qwen25vl'] })).toMatch(/"qwen25vl"/)
    expect(ollamaManifestProblem([layer('tensor'), layer('tensor')], { model_format: 'safetensors' })).toMatch(/safetensors tensors for Ollama's own engine/)
    expect(ollamaManifestProblem([], { remote_host: 'https://ollama.com:443' })).toMatch(/cloud model/)
    expect(ollamaManifestProblem([layer('model')], { model_format: 'ggml' })).toMatch(/ggml model/)
    expect(ollamaManifestProblem([layer('model'), layer('model')], undefined)).toMatch(/split into 2 files/)
  })

  it('names a Hugging Face repository llama.cpp loads instead, where one is known', () => {
    expect(hfAlternative('gemma3', '4b')).toMatch(/hf\.co\/ggml-org\/gemma-3-4b-it-GGUF:Q4_K_M/)
    expect(hfAlternative('gemma3', 'latest')).toMatch(/gemma-3-4b-it-GGUF/)
    expect(hfAlternative('qwen2.5vl', '7b-q8_0')).toMatch(/Qwen2.5-VL-7B-Instruct-GGUF/)
    expect(hfAlternative('gemma3', '270m')).toMatch(/one of .*gemma-3-12b-it-GGUF/)
    expect(hfAlternative('mllama', 'latest')).toMatch(/hf\.co\/<user>\/<repo>:<quantization>/)
  })
})

describe('parts and tokens', () => {
  it('splits a blob as Ollama does: a sixteenth, 100 MB to 1,000 MB a part', () => {
    expect(planParts(50_000_000, OLLAMA_PART_POLICY)).toEqual([{ N: 0, Offset: 0, Size: 50_000_000, Completed: 0 }])
    const gigabyte = planParts(1_000_000_000, OLLAMA_PART_POLICY)
    expect(gigabyte).toHaveLength(10)
    expect(gigabyte.every((p) => p.Size === 100_000_000)).toBe(true)
    const big = planParts(8_000_000_001, OLLAMA_PART_POLICY)
    expect(big).toHaveLength(17)
    expect(big[0]!.Size).toBe(500_000_000)
    expect(big.at(-1)).toMatchObject({ Offset: 8_000_000_000, Size: 1 })
  })

  it('reads a Bearer challenge, commas inside quotes included', () => {
    expect(parseChallenge('Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push"')).toEqual({
      realm: 'https://auth.example/token',
      service: 'registry.example',
      scope: 'repository:a/b:pull,push',
    })
    expect(parseChallenge('Basic realm="x"')).toEqual({})
  })
})

describe('a pull from a registry that asks for a token and serves no ranges', () => {
  let server: Server
  let url: string
  let modelsDir: string
  const blobs = new Map<string, Buffer>()
  let manifest: Buffer
  const seen: string[] = []

  const sha = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`
  const add = (bytes: Buffer, mediaType: string) => {
    blobs.set(sha(bytes), bytes)
    return { mediaType, digest: sha(bytes), size: bytes.length }
  }

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hearth-fake-registry-'))
    writeTinyLlama(join(dir, 'tiny.gguf'))
    const model = add(readFileSync(join(dir, 'tiny.gguf')), 'application/vnd.ollama.image.model')
    const system = add(Buffer.from('Be brief.'), 'application/vnd.ollama.image.system')
    const config = add(
      Buffer.from(JSON.stringify({ model_format: 'gguf', model_family: 'llama', model_families: ['llama'], file_type: 'F32' })),
      'application/vnd.docker.container.image.v1+json',
    )
    manifest = Buffer.from(
      JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.docker.distribution.manifest.v2+json', config, layers: [model, system] }),
    )
    server = createServer((req, res) => {
      const path = new URL(req.url!, 'http://x').pathname
      seen.push(`${req.method} ${path}${req.headers.range ? ` ${req.headers.range}` : ''}`)
      if (path === '/token') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token: 'good-token' }))
        return
      }
      if (req.headers.authorization !== 'Bearer good-token') {
        res.writeHead(401, { 'www-authenticate': `Bearer realm="${url}/token",service="fake",scope="repository:library/tiny:pull"` }).end()
        return
      }
      if (path === '/v2/library/tiny/manifests/1') {
        expect(req.headers.accept).toBe('application/vnd.docker.distribution.manifest.v2+json')
        res.writeHead(200, { 'content-type': 'application/vnd.docker.distribution.manifest.v2+json' }).end(manifest)
        return
      }
      const blob = /^\/v2\/library\/tiny\/blobs\/(sha256:[0-9a-f]{64})$/.exec(path)
      const bytes = blob ? blobs.get(blob[1]!) : undefined
      if (!bytes) {
        res.writeHead(404).end()
        return
      }
      res.writeHead(200, { 'content-length': bytes.length }).end(bytes) // Range is ignored
    })
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`
    modelsDir = mkdtempSync(join(tmpdir(), 'hearth-pull-'))
  })

  afterAll(() => new Promise<void>((done) => server.close(() => done())))

  const name = () => `${url.slice(7)}/library/tiny:1`

  it('refuses plain http unless the caller allows it', async () => {
    const run = pullOllamaModel(`http://${name()}`, { modelsDir, ollamaStores: [] })
    await expect(run.next()).rejects.toThrow(/insecure protocol http/)
  })

  it('fetches a token, then the manifest and blobs, and serves the model', async () => {
    const lines: string[] = []
    for await (const event of pullOllamaModel(name(), {
      modelsDir,
      insecure: true,
      ollamaStores: [],
      parts: { minPartBytes: 64 * 1024 },
      headerProbeBytes: 16 * 1024,
    }))
      lines.push(ollamaProgressLine(event).status)
    expect(lines[0]).toBe('pulling manifest')
    expect(lines.slice(-3)).toEqual(['verifying sha256 digest', 'writing manifest', 'success'])
    expect(seen).toContain('GET /token')
    const store = join(modelsDir, 'ollama')
    expect(readFileSync(join(store, 'manifests', url.slice(7), 'library/tiny/1')).equals(manifest)).toBe(true)
    for (const [digest, bytes] of blobs) expect(readFileSync(join(store, 'blobs', digest.replace(':', '-'))).equals(bytes)).toBe(true)
    expect(readdirSync(join(store, 'blobs')).filter((f) => f.includes('partial'))).toEqual([])

    const folder = new ModelFolder(modelsDir)
    const { models } = await folder.scan()
    expect(models.find((m) => m.id === name())).toMatchObject({ source: { kind: 'ollama', pulled: true }, ollama: { system: 'Be brief.' } })
  })

  it('says "file does not exist" for a tag the registry lacks', async () => {
    const run = pullOllamaModel(`${url.slice(7)}/library/tiny:2`, { modelsDir, insecure: true, ollamaStores: [] })
    const first = await run.next()
    expect(first.value).toEqual({ status: 'pulling manifest' })
    await expect(run.next()).rejects.toMatchObject({ code: 'not_found', message: expect.stringMatching(/^pull model manifest: file does not exist/) })
  })

  it('removes a pulled model: its manifest and the blobs no other manifest names', async () => {
    const folder = new ModelFolder(modelsDir)
    const removed = await removeModel(folder, name())
    expect(removed.files).toEqual(expect.arrayContaining([join('ollama/manifests', url.slice(7), 'library/tiny/1')]))
    expect(removed.files.filter((f) => f.startsWith('ollama/blobs/'))).toHaveLength(3)
    expect(existsSync(join(modelsDir, 'ollama/manifests', url.slice(7)))).toBe(false)
    expect(readdirSync(join(modelsDir, 'ollama/blobs'))).toEqual([])
    expect((await folder.scan()).models.find((m) => m.id === name())).toBeUndefined()
  })
})

describe('a pull stopped midway, then pulled again', () => {
  let server: Server
  let url: string
  let model: { digest: string; size: number; bytes: Buffer }
  let manifest: Buffer
  let served = 0

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hearth-slow-registry-'))
    writeTinyLlama(join(dir, 'tiny.gguf'), { embd: 128, seed: 3 })
    const bytes = readFileSync(join(dir, 'tiny.gguf'))
    model = { digest: `sha256:${createHash('sha256').update(bytes).digest('hex')}`, size: bytes.length, bytes }
    manifest = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        config: { mediaType: 'x', digest: '', size: 0 },
        layers: [{ mediaType: 'application/vnd.ollama.image.model', digest: model.digest, size: model.size }],
      }),
    )
    // Ranges answered 64 KiB at a time, 20 ms apart: slow enough to stop it midway.
    server = createServer((req, res) => void serve(req, res))
    async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
      const path = new URL(req.url!, 'http://x').pathname
      if (path === '/v2/library/slow/manifests/1') return void res.writeHead(200).end(manifest)
      if (path !== `/v2/library/slow/blobs/${model.digest}`) return void res.writeHead(404).end()
      const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '')
      const [start, end] = m ? [Number(m[1]), Math.min(Number(m[2]), model.size - 1)] : [0, model.size - 1]
      res.writeHead(m ? 206 : 200, { 'content-length': end - start + 1, ...(m ? { 'content-range': `bytes ${start}-${end}/${model.size}` } : {}) })
      for (let at = start; at <= end && !res.destroyed; at += 65536) {
        const chunk = model.bytes.subarray(at, Math.min(end + 1, at + 65536))
        served += chunk.length
        res.write(chunk)
        await new Promise((r) => setTimeout(r, 20))
      }
      res.end()
    }
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`
  })

  afterAll(() => new Promise<void>((done) => server.close(() => done())))

  it('stops when its reader stops reading', async () => {
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-pull-abandoned-'))
    const options = { modelsDir, insecure: true, ollamaStores: [], parts: { minPartBytes: 128 * 1024, concurrency: 2 }, headerProbeBytes: 8 * 1024 }
    const start = served
    for await (const event of pullOllamaModel(`${url.slice(7)}/library/slow:1`, options)) {
      if (event.status === 'pulling' && event.completed > 0) break
    }
    const after = served
    await new Promise((r) => setTimeout(r, 300))
    // A chunk already on its way may still be counted; the rest of the blob is not sent.
    expect(served - after).toBeLessThanOrEqual(2 * 65536)
    expect(served - start).toBeLessThan(model.size / 2)
    expect(existsSync(join(modelsDir, 'ollama', 'manifests'))).toBe(false)
  })

  it('keeps what came, and the next pull fetches only the rest', async () => {
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-pull-resume-'))
    const name = `${url.slice(7)}/library/slow:1`
    const options = { modelsDir, insecure: true, ollamaStores: [], parts: { minPartBytes: 128 * 1024, concurrency: 2 }, headerProbeBytes: 8 * 1024 }
    const controller = new AbortController()
    const stopped = (async () => {
      for await (const event of pullOllamaModel(name, { ...options, signal: controller.signal })) {
        if (event.status === 'pulling' && event.completed > model.size / 3) controller.abort()
      }
    })()
    await expect(stopped).rejects.toMatchObject({ code: 'cancelled' })
    const blobsDir = join(modelsDir, 'ollama', 'blobs')
    const partial = readdirSync(blobsDir).filter((f) => f.includes('partial'))
    expect(partial).toContain(`${model.digest.replace(':', '-')}-partial`)
    expect(existsSync(join(blobsDir, model.digest.replace(':', '-')))).toBe(false)

    // The stopped pull's last chunks may still be on their way: count from when the server is quiet.
    for (let last = -1; last !== served;) {
      last = served
      await new Promise((r) => setTimeout(r, 200))
    }
    const before = served
    let pulled: { downloaded: number } | undefined
    for await (const event of pullOllamaModel(name, options)) if (event.status === 'success') pulled = event.model
    expect(served - before).toBeLessThan(model.size * 0.8)
    // Less the one byte the question where the blob is got (this registry serves blobs itself, without a redirect).
    expect(pulled!.downloaded).toBe(served - before - 1)
    expect(readFileSync(join(blobsDir, model.digest.replace(':', '-'))).equals(model.bytes)).toBe(true)
    expect(readdirSync(blobsDir).filter((f) => f.includes('partial'))).toEqual([])
  })
})
