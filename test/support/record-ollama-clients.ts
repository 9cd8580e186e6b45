/**
 * Records what each of Ollama's clients really sends, and how it takes the answers: drives each
 * one at a small recording server that answers as Ollama 0.34.3 does (its shapes and error texts,
 * taken from the real `ollama serve`), and writes every request, filed under the call that made
 * it, with what the call returned or threw, to test/fixtures/ollama-clients/<client>.json. With
 * `server`, it records instead what the real `ollama serve` (test/support/ollama-program.ts) answers
 * to the routes it can answer without its inference runtime, into ollama-server.json. Run it again
 * when a client is updated:
 *
 *   npx tsx test/support/record-ollama-clients.ts [ollama-js|ollama-python|langchain|ai-sdk|cli|server ...] [--modules DIR]
 *
 * The JavaScript clients are imported from the project's node_modules, or from DIR's with
 * `--modules` (a scratch install); Ollama's Python client from the python-clients virtualenv
 * (test/support/agent-programs.ts), or the interpreter named by HEARTH_OLLAMA_PYTHON.
 *
 * The models it serves: `tiny` (completion, tools, thinking), `tiny-vision` (completion, vision),
 * `tiny-embed` (embedding); `pullable` appears once pulled. Any other name is not found (404, in
 * Ollama's words), and `fail-400`, `fail-401`, `fail-500` and `fail-midstream` fail as they say.
 */
import { execFile } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import { OLLAMA_PYTHON_VERSION, pythonClients } from './agent-programs.ts'
import { installOllama, makeOllamaStore, OLLAMA_VERSION, ollamaInstallDir, runOllama, startOllamaServe } from './ollama-program.ts'
import { PROJECT_ROOT } from './server-process.ts'
import { generateTestModels, writeTestPng } from './tiny-models.ts'

const KEY = 'recording-key-0123'
const OUT_DIR = join(PROJECT_ROOT, 'test/fixtures/ollama-clients')
/** Headers that say nothing about the client: the address, the body's framing. */
const HEADERS_DROPPED = new Set(['host', 'content-length', 'connection', 'transfer-encoding'])

interface Recorded {
  call: string
  method: string
  path: string
  query?: string
  headers: Record<string, string>
  body?: unknown
}

type Client = 'ollama-js' | 'ollama-python' | 'langchain' | 'ai-sdk' | 'cli' | 'server'
const CLIENTS: Client[] = ['ollama-js', 'ollama-python', 'langchain', 'ai-sdk', 'cli', 'server']

async function main(): Promise<void> {
  const args = process.argv.slice(2)
  const modulesAt = args.includes('--modules') ? args[args.indexOf('--modules') + 1] : undefined
  const wanted = args.filter((a, i) => !a.startsWith('--') && args[i - 1] !== '--modules') as Client[]
  const unknown = wanted.filter((c) => !CLIENTS.includes(c))
  if (unknown.length > 0) throw new Error(`no client ${unknown.join(', ')}: ${CLIENTS.join(', ')}`)
  mkdirSync(OUT_DIR, { recursive: true })
  const work = mkdtempSync(join(tmpdir(), 'hearth-record-ollama-'))
  const imagePath = join(work, 'picture.png')
  const image = writeTestPng(imagePath, 32).toString('base64')
  try {
    for (const client of wanted.length > 0 ? wanted : CLIENTS) {
      if (client === 'server') {
        await recordRealServer(work)
        continue
      }
      const recorder = await startRecorder()
      const { version, results } = await drive(client, recorder.url, { image, imagePath, work, modulesAt })
      await recorder.close()
      const fixture = { client: CLIENT_NAMES[client], version, recorded: new Date().toISOString().slice(0, 10), key: KEY, requests: recorder.requests, results }
      writeFileSync(join(OUT_DIR, `${client}.json`), `${JSON.stringify(fixture, null, 1).replaceAll(work, '/home/user/work')}\n`)
      console.log(`${CLIENT_NAMES[client]} ${version}: ${recorder.requests.length} requests in ${Object.keys(results).length} calls`)
    }
  } finally {
    rmSync(work, { recursive: true, force: true })
  }
}

const CLIENT_NAMES: Record<Client, string> = {
  'ollama-js': 'ollama (npm)',
  'ollama-python': 'ollama (PyPI)',
  langchain: '@langchain/ollama',
  'ai-sdk': 'ollama-ai-provider-v2 with ai',
  cli: 'the ollama command',
  server: 'ollama serve',
}

interface DriveOptions {
  image: string
  imagePath: string
  work: string
  modulesAt: string | undefined
}

async function drive(client: Exclude<Client, 'server'>, url: string, options: DriveOptions): Promise<{ version: string; results: Record<string, unknown> }> {
  switch (client) {
    case 'cli':
      return { version: OLLAMA_VERSION, results: await driveCli(url, options) }
    case 'ollama-python': {
      const python = process.env.HEARTH_OLLAMA_PYTHON ?? pythonClients()
      if (!python) throw new Error('the python-clients virtualenv is not installed (the engines setup installs it), nor HEARTH_OLLAMA_PYTHON set')
      const script = join(PROJECT_ROOT, 'test/support/ollama-python-calls.py')
      const config = { url, key: KEY, image: options.image, image_path: options.imagePath }
      const { stdout } = await promisify(execFile)(python, [script, JSON.stringify(config)], { maxBuffer: 64 * 1024 * 1024, timeout: 300_000 })
      const { stdout: version } = await promisify(execFile)(python, ['-c', 'import importlib.metadata as m; print(m.version("ollama"))'])
      if (version.trim() !== OLLAMA_PYTHON_VERSION) console.warn(`ollama (PyPI) is ${version.trim()} here, not the pinned ${OLLAMA_PYTHON_VERSION}`)
      return { version: version.trim(), results: lastJsonLine(stdout) }
    }
    default: {
      const modules = options.modulesAt ?? PROJECT_ROOT
      const pkg = { 'ollama-js': 'ollama', langchain: '@langchain/ollama', 'ai-sdk': 'ollama-ai-provider-v2' }[client]
      const manifest = join(modules, 'node_modules', pkg, 'package.json')
      if (!existsSync(manifest)) throw new Error(`${pkg} is not installed in ${modules}`)
      const version = (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version
      // Beside the node_modules it imports from: a bare import resolves from the importing file.
      const script = join(modules, `.ollama-client-calls-${process.pid}.mjs`)
      copyFileSync(join(PROJECT_ROOT, 'test/support/ollama-client-calls.mjs'), script)
      try {
        const config = { client, url, key: KEY, image: options.image }
        const { stdout } = await promisify(execFile)(process.execPath, [script, JSON.stringify(config)], { maxBuffer: 64 * 1024 * 1024, timeout: 300_000 })
        return { version, results: lastJsonLine(stdout) }
      } finally {
        rmSync(script, { force: true })
      }
    }
  }
}

/** The `ollama` command's client commands, each a call of its own, against the recorder. */
async function driveCli(url: string, options: DriveOptions): Promise<Record<string, unknown>> {
  const problem = installOllama()
  if (problem) throw new Error(problem)
  const home = join(options.work, 'cli-home')
  mkdirSync(home, { recursive: true })
  const modelfile = join(options.work, 'Modelfile')
  const models = generateTestModels(join(options.work, 'models'))
  writeFileSync(modelfile, `FROM ${models.llamaChat.path}\nPARAMETER temperature 0.5\nSYSTEM "You are tiny."\n`)
  const runs: Array<[string, string[], Record<string, string>?]> = [
    ['--version', ['--version']],
    ['list', ['list']],
    ['show', ['show', 'tiny']],
    ['show --modelfile', ['show', 'tiny', '--modelfile']],
    ['show --parameters', ['show', 'tiny', '--parameters']],
    ['show -v', ['show', 'tiny', '-v']],
    ['show missing', ['show', 'nope']],
    ['ps', ['ps']],
    ['run', ['run', 'tiny', 'Why is the sky blue?']],
    ['run --think=false --verbose', ['run', 'tiny', '--think=false', '--verbose', 'Why is the sky blue?']],
    ['run --think=high --hidethinking', ['run', 'tiny', '--think=high', '--hidethinking', 'Why is the sky blue?']],
    ['run --format json --keepalive 10m', ['run', 'tiny', '--format', 'json', '--keepalive', '10m', 'A city as JSON']],
    ['run tools answer', ['run', 'tiny', 'Call the weather tool']],
    ['run vision with an image path', ['run', 'tiny-vision', `What is in ${options.imagePath}?`]],
    ['run embedding model', ['run', 'tiny-embed', 'one text']],
    ['run embedding model --dimensions --truncate', ['run', 'tiny-embed', '--dimensions', '8', '--truncate=false', 'one text']],
    ['run missing (pull fails)', ['run', 'nope', 'hi']],
    ['run missing with a tag (pull fails)', ['run', 'nope:7b', 'hi']],
    ['run pullable (pulled, then run)', ['run', 'pullable', 'hi']],
    ['run 400', ['run', 'fail-400', 'hi']],
    ['run 401', ['run', 'fail-401', 'hi']],
    ['run 500', ['run', 'fail-500', 'hi']],
    ['run mid-stream error', ['run', 'fail-midstream', 'hi']],
    ['stop', ['stop', 'tiny']],
    ['stop missing', ['stop', 'nope']],
    ['pull', ['pull', 'pullable']],
    ['pull missing', ['pull', 'missing-model']],
    ['cp', ['cp', 'tiny', 'tiny-copy']],
    ['cp missing', ['cp', 'nope', 'nope-copy']],
    ['rm', ['rm', 'tiny-copy']],
    ['rm missing', ['rm', 'nope']],
    ['create', ['create', 'made', '-f', modelfile]],
    ['list with OLLAMA_AUTH=1', ['list'], { OLLAMA_AUTH: '1' }],
  ]
  // OLLAMA_AUTH=1 signs each request with the key in ~/.ollama, which only `ollama serve` makes.
  mkdirSync(join(home, '.ollama'), { recursive: true })
  await promisify(execFile)('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', '', '-f', join(home, '.ollama/id_ed25519')])
  const results: Record<string, unknown> = {}
  for (const [name, args, env] of runs) {
    await mark(url, name)
    const result = await runOllama(args, { host: url, home, env, cwd: options.work, timeoutMs: 30_000 })
    results[name] = {
      args,
      code: result.code,
      stdout: plainText(result.stdout),
      stderr: plainText(result.stderr),
      ...(result.timedOut ? { timedOut: true } : {}),
    }
  }
  // Against a server that wants a key on every request, as Hearth's /v1 does: the CLI cannot send one.
  const locked = createServer(
    (_req, res) => void res.writeHead(401, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify({ error: 'unauthorized' })),
  )
  await new Promise<void>((resolve) => locked.listen(0, '127.0.0.1', resolve))
  const lockedUrl = `http://127.0.0.1:${(locked.address() as AddressInfo).port}`
  for (const args of [['list'], ['run', 'tiny', 'hi'], ['--version']]) {
    const result = await runOllama(args, { host: lockedUrl, home, cwd: options.work, timeoutMs: 30_000 })
    results[`${args.join(' ')} (every request 401)`] = { args, code: result.code, stdout: plainText(result.stdout), stderr: plainText(result.stderr) }
  }
  await new Promise((resolve) => locked.close(resolve))
  // Interactive, on a terminal: a chat with the history, not a one-shot generate.
  const sessions: Array<[string, string[], string]> = [
    ['run interactive', ['run', 'tiny'], 'Why is the sky blue?\n/set parameter temperature 0.2\n/set system Be brief.\nAnd at night?\n/bye\n'],
    ['run interactive vision', ['run', 'tiny-vision', '--think=false'], `What is in ${options.imagePath} ?\n/bye\n`],
  ]
  for (const [name, args, input] of sessions) {
    await mark(url, name)
    const result = await runOllama(args, { host: url, home, terminal: true, input, cwd: options.work, timeoutMs: 30_000 })
    results[name] = { args, input, code: result.code, stdout: plainText(result.stdout), ...(result.timedOut ? { timedOut: true } : {}) }
  }
  return results
}

/** The calls' outcomes: the last line a driver prints (a client may print progress of its own before it). */
function lastJsonLine(stdout: string): Record<string, unknown> {
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as Record<string, unknown>
}

async function mark(url: string, name: string): Promise<void> {
  await fetch(`${url}/__call`, { method: 'POST', body: JSON.stringify({ name }) })
}

/** A terminal's output as a reader sees it: cursor codes and spinners out, carriage returns as line ends. */
function plainText(text: string): string {
  return text
    .replace(/\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x1b\x07]*(\x1b\\|\x07)/g, '')
    .replace(/[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]/g, '')
    .split(/\r?\n|\r/)
    .map((l) => l.trimEnd())
    .filter((l, i, all) => l !== '' || (i > 0 && all[i - 1] !== ''))
    .join('\n')
    .trim()
}

// --- the recording server: Ollama's answers, as 0.34.3 gives them -------------------------------

interface FakeModel {
  name: string
  size: number
  digest: string
  family: string
  parameterSize: string
  quantization: string
  contextLength: number
  embeddingLength: number
  capabilities: string[]
}

const FAKE_MODELS: FakeModel[] = [
  {
    name: 'tiny:latest',
    size: 1959408,
    digest: 'c954aa23e541585c1663ef76dc67b2eb3f43a41ac3070765e08c4102dfe6a049',
    family: 'llama',
    parameterSize: '473K',
    quantization: 'F32',
    contextLength: 512,
    embeddingLength: 64,
    capabilities: ['completion', 'tools', 'thinking'],
  },
  {
    name: 'tiny-vision:latest',
    size: 2025776,
    digest: 'e7a65105109a1cf9d5fcbb36e6e0e8a7c4a7f0a4fd1e0d6ee26f0c5f3c5e0b1d',
    family: 'llama',
    parameterSize: '473K',
    quantization: 'F32',
    contextLength: 512,
    embeddingLength: 64,
    capabilities: ['completion', 'vision'],
  },
  {
    name: 'tiny-embed:latest',
    size: 156704,
    digest: 'd3220e762eaa5ad4f1e2f8b7a0c0e5f6b1d2c3a4e5f60718293a4b5c6d7e8f90',
    family: 'bert',
    parameterSize: '33K',
    quantization: 'F32',
    contextLength: 512,
    embeddingLength: 32,
    capabilities: ['embedding'],
  },
  ...['fail-400', 'fail-500', 'fail-midstream'].map((name) => ({
    name: `${name}:latest`,
    size: 1959408,
    digest: 'c954aa23e541585c1663ef76dc67b2eb3f43a41ac3070765e08c4102dfe6a049',
    family: 'llama',
    parameterSize: '473K',
    quantization: 'F32',
    contextLength: 512,
    embeddingLength: 64,
    capabilities: ['completion'],
  })),
]
const PULLABLE: FakeModel = { ...FAKE_MODELS[0]!, name: 'pullable:latest', capabilities: ['completion'] }
const MODIFIED_AT = '2026-11-28T06:43:51.336812877Z'

/** `tiny` → `tiny:latest`, as Ollama names a model with no tag. */
function fullName(name: string): string {
  const base = name.replace(/^(registry\.ollama\.ai\/)?(library\/)?/, '')
  return /:[^/]+$/.test(base) ? base : `${base}:latest`
}

function details(m: FakeModel): Record<string, unknown> {
  return { parent_model: '', format: 'gguf', family: m.family, families: [m.family], parameter_size: m.parameterSize, quantization_level: m.quantization }
}

function listed(m: FakeModel): Record<string, unknown> {
  return {
    name: m.name,
    model: m.name,
    modified_at: MODIFIED_AT,
    size: m.size,
    digest: m.digest,
    details: { ...details(m), context_length: m.contextLength, embedding_length: m.embeddingLength },
    capabilities: m.capabilities,
  }
}

function shown(m: FakeModel, verbose: boolean): Record<string, unknown> {
  const arch = m.family
  const template = '{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n'
  return {
    license: 'MIT test licence',
    modelfile: `# Modelfile generated by "ollama show"\n# To build a new Modelfile based on this, replace FROM with:\n# FROM ${m.name}\n\nFROM /home/user/.ollama/models/blobs/sha256-${m.digest}\nTEMPLATE "${template}"\nSYSTEM You are tiny.\nPARAMETER stop <|im_start|>\nPARAMETER stop <|im_end|>\nPARAMETER temperature 0.5\n`,
    parameters: 'stop                           "<|im_start|>"\nstop                           "<|im_end|>"\ntemperature                    0.5',
    template,
    system: 'You are tiny.',
    details: details(m),
    model_info: {
      'general.architecture': arch,
      'general.file_type': 0,
      'general.parameter_count': 472896,
      [`${arch}.context_length`]: m.contextLength,
      [`${arch}.embedding_length`]: m.embeddingLength,
      [`${arch}.block_count`]: 2,
      'tokenizer.ggml.model': 'llama',
      'tokenizer.ggml.tokens': verbose ? ['<unk>', '<s>', '</s>'] : [],
    },
    ...(m.capabilities.includes('vision')
      ? {
          projector_info: {
            'general.architecture': 'clip',
            'clip.has_vision_encoder': true,
            'clip.vision.image_size': 32,
            'clip.vision.embedding_length': 32,
            'clip.vision.projection_dim': 64,
          },
        }
      : {}),
    capabilities: m.capabilities,
    modified_at: MODIFIED_AT,
  }
}

/** A value that fits a JSON schema, for answers in a requested format and tool arguments. */
function sample(schema: Record<string, unknown> | undefined): unknown {
  if (!schema || typeof schema !== 'object') return 'Paris'
  if (Array.isArray(schema.enum)) return schema.enum[0]
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type
  switch (type) {
    case 'object': {
      const properties = (schema.properties ?? {}) as Record<string, Record<string, unknown>>
      return Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, k === 'country' ? 'France' : sample(v)]))
    }
    case 'array':
      return [sample(schema.items as Record<string, unknown>)]
    case 'number':
    case 'integer':
      return 1
    case 'boolean':
      return true
    default:
      return 'Paris'
  }
}

const METRICS = {
  total_duration: 41234567,
  load_duration: 1234567,
  prompt_eval_count: 26,
  prompt_eval_duration: 12345678,
  eval_count: 7,
  eval_duration: 23456789,
}

async function startRecorder(): Promise<{ url: string; requests: Recorded[]; close(): Promise<void> }> {
  const requests: Recorded[] = []
  const pulled = new Set<string>()
  let current = 'setup'
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (d: Buffer) => chunks.push(d))
    req.on('end', () => {
      const raw = Buffer.concat(chunks)
      const [path = '/', query] = req.url!.split('?')
      if (path === '/__call') {
        current = (JSON.parse(raw.toString()) as { name: string }).name
        return void res.writeHead(204).end()
      }
      let body: unknown
      if (raw.length > 0) {
        try {
          body = JSON.parse(raw.toString('utf8'))
        } catch {
          body = { notJson: true, bytes: raw.length }
        }
      }
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([name]) => !HEADERS_DROPPED.has(name)) as Array<[string, string]>)
      requests.push({
        call: current,
        method: req.method!,
        path,
        ...(query ? { query: query.replace(/ts=\d+/, 'ts=<unix time>') } : {}),
        headers,
        ...(body !== undefined ? { body } : {}),
      })
      answer(req, res, path, body as Record<string, unknown> | undefined, pulled)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return { url: `http://127.0.0.1:${port}`, requests, close: () => new Promise((resolve) => server.close(() => resolve())) }
}

function answer(req: IncomingMessage, res: ServerResponse, path: string, body: Record<string, unknown> | undefined, pulled: Set<string>): void {
  const json = (status: number, data: unknown) => void res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(data))
  const ndjson = (lines: unknown[]) => {
    res.writeHead(200, { 'content-type': 'application/x-ndjson' })
    for (const line of lines) res.write(`${JSON.stringify(line)}\n`)
    res.end()
  }
  const find = (name: unknown) => {
    const full = fullName(String(name ?? ''))
    return FAKE_MODELS.find((m) => m.name === full) ?? (pulled.has(full) ? { ...PULLABLE, name: full } : undefined)
  }
  // The ollama command sends both, one of them empty.
  const requested = String(body?.model || body?.name || '')
  const created_at = new Date().toISOString()
  if (path === '/' && (req.method === 'GET' || req.method === 'HEAD'))
    return void res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(req.method === 'HEAD' ? undefined : 'Ollama is running')
  if (path === '/api/version') return json(200, { version: OLLAMA_VERSION })
  if (fullName(requested) === 'fail-401:latest') return json(401, { error: 'unauthorized' })
  if (path === '/api/tags') return json(200, { models: [...FAKE_MODELS.slice(0, 3), ...[...pulled].map((name) => ({ ...PULLABLE, name }))].map(listed) })
  if (path === '/api/ps') {
    const m = FAKE_MODELS[0]!
    return json(200, {
      models: [
        {
          name: m.name,
          model: m.name,
          size: 2813952,
          digest: m.digest,
          details: details(m),
          expires_at: '2026-11-28T07:48:51.336812877Z',
          size_vram: 0,
          context_length: 4096,
        },
      ],
    })
  }
  if (path === '/api/show') {
    const m = find(requested)
    if (!m) return json(404, { error: `model '${fullName(requested)}' not found` })
    return json(200, shown(m, body?.verbose === true))
  }
  if (path.startsWith('/api/blobs/')) return void res.writeHead(req.method === 'HEAD' ? 404 : 201).end()
  if (path === '/api/create') {
    const lines = [
      { status: 'using existing layer sha256:70dd231cf91a81cec023d73a9449da12f87b8a8a830faf1e01f64f19b2be068b' },
      { status: 'writing manifest' },
      { status: 'success' },
    ]
    return body?.stream === false ? json(200, { status: 'success' }) : ndjson(lines)
  }
  if (path === '/api/copy') return find(body?.source) ? void res.writeHead(200).end() : json(404, { error: `model "${String(body?.source)}" not found` })
  if (path === '/api/delete')
    return find(requested) || fullName(requested) === 'tiny-copy:latest'
      ? void res.writeHead(200).end()
      : json(404, { error: `model '${requested}' not found` })
  if (path === '/api/pull' || path === '/api/push') {
    const full = fullName(requested)
    if (path === '/api/pull' && !find(full) && full !== PULLABLE.name) {
      const error = 'pull model manifest: file does not exist'
      return body?.stream === false ? json(500, { error }) : ndjson([{ status: 'pulling manifest' }, { error }])
    }
    if (path === '/api/pull') pulled.add(full)
    const digest = `sha256:${PULLABLE.digest}`
    const verb = path === '/api/pull' ? 'pulling' : 'pushing'
    const lines = [
      { status: `${verb} manifest` },
      { status: `${verb} ${PULLABLE.digest.slice(0, 12)}`, digest, total: 1959104 },
      { status: `${verb} ${PULLABLE.digest.slice(0, 12)}`, digest, total: 1959104, completed: 1959104 },
      { status: 'verifying sha256 digest' },
      { status: 'writing manifest' },
      { status: 'success' },
    ]
    return body?.stream === false ? json(200, { status: 'success' }) : ndjson(lines)
  }
  if (path === '/api/embed' || path === '/api/embeddings') {
    const m = find(requested)
    if (!m) return json(404, { error: `model "${requested}" not found, try pulling it first` })
    if (!m.capabilities.includes('embedding')) return json(400, { error: `"${requested}" does not support embeddings` })
    const size = typeof body?.dimensions === 'number' ? body.dimensions : m.embeddingLength
    const vector = (seed: number) => Array.from({ length: size }, (_, i) => Number(Math.sin(seed + i).toFixed(6)))
    if (path === '/api/embeddings') return json(200, { embedding: vector(1) })
    const inputs = Array.isArray(body?.input) ? body.input : [body?.input]
    return json(200, {
      model: m.name,
      embeddings: inputs.map((_, i) => vector(i + 1)),
      total_duration: 1234567,
      load_duration: 234567,
      prompt_eval_count: 3 * inputs.length,
    })
  }
  if (path === '/api/chat' || path === '/api/generate') {
    const chat = path === '/api/chat'
    const m = find(requested)
    if (!m) return json(404, { error: `model '${requested}' not found` })
    const failure = /^fail-(\d+)/.exec(m.name)
    if (failure) return json(Number(failure[1]), { error: `${m.name}: the request failed with ${failure[1]}` })
    if (m.capabilities.includes('embedding')) return json(400, { error: `"${requested}" does not support ${chat ? 'chat' : 'generate'}` })
    const stream = body?.stream !== false
    const model = requested
    const messages = (body?.messages ?? []) as Array<Record<string, unknown>>
    if ((chat && messages.length === 0) || (!chat && !body?.prompt)) {
      const unload = body?.keep_alive === 0 || body?.keep_alive === '0' || body?.keep_alive === '0s'
      const done = {
        model,
        created_at,
        ...(chat ? { message: { role: 'assistant', content: '' } } : { response: '' }),
        done: true,
        done_reason: unload ? 'unload' : 'load',
      }
      return stream ? ndjson([done]) : json(200, done)
    }
    const tools = Array.isArray(body?.tools) ? (body.tools as Array<{ function?: { name?: string; parameters?: Record<string, unknown> } }>) : []
    const answered = messages.some((msg) => msg.role === 'tool')
    const prompt = String(body?.prompt ?? messages.at(-1)?.content ?? '')
    const callTool = (tools.length > 0 && !answered) || /weather tool/.test(prompt)
    const think = body?.think !== undefined && body.think !== false
    const format = body?.format
    const content = callTool
      ? ''
      : format === 'json'
        ? '{"name": "Paris", "country": "France"}'
        : format && typeof format === 'object'
          ? JSON.stringify(sample(format as Record<string, unknown>))
          : answered
            ? 'It is 22 degrees and sunny in Paris.'
            : 'Paris is the capital of France.'
    const toolCalls = callTool
      ? [
          {
            id: 'call_hmzw3xnl',
            function: {
              index: 0,
              name: tools[0]?.function?.name ?? 'get_weather',
              arguments: tools[0] ? sample(tools[0].function?.parameters) : { city: 'Paris' },
            },
          },
        ]
      : undefined
    const piece = (text: string, thinking?: string) =>
      chat
        ? { model, created_at, message: { role: 'assistant', content: text, ...(thinking ? { thinking } : {}) }, done: false }
        : { model, created_at, response: text, ...(thinking ? { thinking } : {}), done: false }
    const final = {
      model,
      created_at,
      ...(chat ? { message: { role: 'assistant', content: '' } } : { response: '' }),
      done: true,
      done_reason: 'stop',
      ...(chat || body?.raw === true ? {} : { context: [151644, 872, 198, 3838, 374, 151645] }),
      ...METRICS,
    }
    const words = content.match(/\S+\s*/g) ?? []
    if (m.name === 'fail-midstream:latest') {
      if (!stream) return json(500, { error: 'fail-midstream: the runner stopped' })
      return ndjson([piece('Paris '), { error: 'fail-midstream: the runner stopped' }])
    }
    if (!stream) {
      const whole = chat
        ? {
            ...final,
            message: {
              role: 'assistant',
              content,
              ...(think ? { thinking: 'The user asks about France.' } : {}),
              ...(toolCalls ? { tool_calls: toolCalls } : {}),
            },
          }
        : { ...final, response: content, ...(think ? { thinking: 'The user asks about France.' } : {}), ...(toolCalls ? { tool_calls: toolCalls } : {}) }
      return json(200, whole)
    }
    const lines: unknown[] = []
    if (think) lines.push(piece('', 'The user asks '), piece('', 'about France.'))
    for (const word of words) lines.push(piece(word))
    if (toolCalls)
      lines.push(
        chat
          ? { model, created_at, message: { role: 'assistant', content: '', tool_calls: toolCalls }, done: false }
          : { model, created_at, response: '', tool_calls: toolCalls, done: false },
      )
    lines.push(final)
    return ndjson(lines)
  }
  res.writeHead(404, { 'content-type': 'text/plain' }).end('404 page not found')
}

// --- the real `ollama serve`: what it answers where it needs no inference runtime ---------------

/** One request to the real server, and its answer as a client sees it. */
async function exchange(url: string, method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${url}${path}`, { method, ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}) })
  const text = await res.text()
  let parsed: unknown = text
  const type = res.headers.get('content-type') ?? ''
  if (type.includes('ndjson'))
    parsed = text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as unknown)
  else if (type.includes('json') && text) parsed = JSON.parse(text) as unknown
  return { request: { method, path, ...(body !== undefined ? { body } : {}) }, status: res.status, contentType: type, body: parsed }
}

async function recordRealServer(work: string): Promise<void> {
  const problem = installOllama()
  if (problem) throw new Error(problem)
  const models = generateTestModels(join(work, 'models'))
  const store = join(work, 'ollama-store')
  await makeOllamaStore(store, [
    { name: 'tiny', gguf: models.llamaChat.path, modelfileExtra: 'PARAMETER temperature 0.5\nSYSTEM "You are tiny."\nLICENSE "MIT test licence"' },
    { name: 'tiny-vision', gguf: models.llamaChat.path, projector: models.mmproj.path },
    { name: 'tiny-embed', gguf: models.bert.path },
  ])
  const serve = await startOllamaServe(store)
  const exchanges: Array<Record<string, unknown>> = []
  try {
    const requests: Array<[string, string, unknown?]> = [
      ['HEAD', '/'],
      ['GET', '/'],
      ['GET', '/api/version'],
      ['HEAD', '/api/version'],
      ['GET', '/api/tags'],
      ['HEAD', '/api/tags'],
      ['POST', '/api/show', { model: 'tiny' }],
      ['POST', '/api/show', { model: 'tiny-vision' }],
      ['POST', '/api/show', { model: 'tiny-embed' }],
      ['POST', '/api/show', { name: 'tiny' }],
      ['POST', '/api/show', { model: 'nope' }],
      ['POST', '/api/show', {}],
      ['POST', '/api/show', 'not json'],
      ['GET', '/api/ps'],
      ['POST', '/api/chat', { model: 'nope', messages: [{ role: 'user', content: 'hi' }] }],
      ['POST', '/api/chat', { model: 'nope', messages: [{ role: 'user', content: 'hi' }], stream: false }],
      ['POST', '/api/chat', { messages: [{ role: 'user', content: 'hi' }] }],
      ['POST', '/api/chat', { model: 'tiny-embed', messages: [{ role: 'user', content: 'hi' }] }],
      ['POST', '/api/chat', { model: 'tiny', messages: [{ role: 'user', content: 'hi' }], think: true }],
      ['POST', '/api/chat', { model: 'tiny', messages: [{ role: 'user', content: 'hi' }], format: 'yaml' }],
      [
        'POST',
        '/api/chat',
        { model: 'tiny', messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }] },
      ],
      ['POST', '/api/chat', { model: 'tiny', messages: [{ role: 'user', content: 'hi' }], options: { typical_p: 0.5 } }],
      ['POST', '/api/chat', { model: 'tiny', messages: [{ role: 'user', content: 'hi', images: ['bm90IGFuIGltYWdl'] }] }],
      ['POST', '/api/chat', { model: 'tiny', messages: 'hi' }],
      ['POST', '/api/generate', { model: 'nope', prompt: 'hi' }],
      ['POST', '/api/generate', { prompt: 'hi' }],
      ['POST', '/api/generate', { model: 'tiny-embed', prompt: 'hi' }],
      ['POST', '/api/generate', { model: 'tiny', prompt: 'hi', suffix: 'bye' }],
      ['POST', '/api/embed', { model: 'nope', input: 'x' }],
      ['POST', '/api/embed', { model: 'tiny-embed' }],
      ['POST', '/api/embed', { model: 'tiny-embed', input: 3 }],
      ['POST', '/api/embeddings', { model: 'nope', prompt: 'x' }],
      ['POST', '/api/copy', { source: 'nope', destination: 'x' }],
      ['POST', '/api/copy', { source: 'tiny', destination: 'tiny-copy' }],
      ['POST', '/api/copy', { source: 'tiny' }],
      ['DELETE', '/api/delete', { model: 'tiny-copy' }],
      ['DELETE', '/api/delete', { model: 'nope' }],
      ['DELETE', '/api/delete', {}],
      ['POST', '/api/pull', { model: 'nope' }],
      ['POST', '/api/pull', { model: 'nope', stream: false }],
      ['POST', '/api/pull', {}],
      ['POST', '/api/create', { model: 'from-tiny', from: 'tiny', system: 'You are from tiny.', parameters: { temperature: 0.2 } }],
      ['POST', '/api/create', { model: 'from-tiny-quiet', from: 'tiny', stream: false }],
      ['POST', '/api/create', { model: 'from-nothing' }],
      ['POST', '/api/create', { model: 'from-nope', from: 'nope' }],
      ['HEAD', '/api/blobs/sha256:0000000000000000000000000000000000000000000000000000000000000000'],
      ['GET', '/api/nothing'],
      ['GET', '/v1/models'],
    ]
    for (const [method, path, body] of requests) exchanges.push(await exchange(serve.url, method, path, body))
  } finally {
    await serve.stop()
  }
  const text = JSON.stringify({ server: CLIENT_NAMES.server, version: OLLAMA_VERSION, recorded: new Date().toISOString().slice(0, 10), exchanges }, null, 1)
    .replaceAll(store, '/home/user/.ollama/models')
    .replaceAll(ollamaInstallDir(), '/usr/local/bin')
    .replaceAll(dirname(ollamaInstallDir()), '/usr/local')
    .replaceAll(tmpdir(), '/tmp')
    .replace(/"(created_at|modified_at|expires_at)": "[^"]+"/g, '"$1": "2026-11-28T06:43:51.336812877Z"')
  writeFileSync(join(OUT_DIR, 'ollama-server.json'), `${text}\n`)
  console.log(`ollama serve ${OLLAMA_VERSION}: ${exchanges.length} exchanges`)
}

await main()
