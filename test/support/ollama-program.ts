/**
 * The `ollama` command (github.com/ollama/ollama, pinned in OLLAMA_VERSION), for the suites that
 * check Hearth against Ollama's own client and make Ollama model stores the way a user does
 * (`ollama create NAME -f Modelfile` from a GGUF), never written by hand. Only the Go program is
 * built, with `go install` from the Go module proxy, once per version into a cache outside the
 * clone (beside the agents), by the engines project's setup: its client commands and `ollama serve`
 * (lists, shows, creates, copies and removes models) need none of Ollama's native inference
 * libraries, which are not built.
 *
 * Every run of it gets a HOME and OLLAMA_MODELS of its own and none of this process's OLLAMA_*
 * settings or proxies: the real ~/.ollama (its models, its key, its history) is never read or
 * written. Nothing it does reaches the network: `ollama serve` would prune the store at start and
 * ask ollama.com about cloud models (OLLAMA_NOPRUNE and OLLAMA_NO_CLOUD turn both off), and it
 * pulls from registry.ollama.ai when a client asks (`ollama run` does, for a model it lacks): its
 * proxy is a closed loopback port, so such a request fails at once, here, without even a DNS
 * look-up. Go never sends loopback addresses to a proxy, so a client's requests to a local server
 * go through.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { homedir, tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'

export const OLLAMA_VERSION = '0.34.3'
const OLLAMA_MODULE = 'github.com/ollama/ollama'
/** As Ollama's own release build sets them (scripts/env.sh): its version, and gin's quiet mode. */
const LDFLAGS = `-w -s -X=${OLLAMA_MODULE}/version.Version=${OLLAMA_VERSION} -X=${OLLAMA_MODULE}/server.mode=release`

/** Where this version's `ollama` is (or will be) built: HEARTH_OLLAMA_CACHE moves the cache. */
export function ollamaInstallDir(env: NodeJS.ProcessEnv = process.env): string {
  const cache = env.HEARTH_OLLAMA_CACHE ?? join(env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'hearth/ollama')
  return join(cache, OLLAMA_VERSION)
}

/** The path of the built `ollama`, or undefined (the suites then skip, loudly). */
export function ollamaProgram(): string | undefined {
  const path = join(ollamaInstallDir(), 'ollama')
  return existsSync(path) ? path : undefined
}

/**
 * Builds `ollama` into the cache unless it is there; returns an error message when it cannot (no
 * Go, the module proxy out of reach), so the suites can say why they skip. About 4 minutes on two
 * busy cores, the module downloads included (measured 2026-11-28); Go's own caches make a rebuild
 * quicker.
 */
export function installOllama(log: (line: string) => void = console.log): string | undefined {
  if (ollamaProgram()) return undefined
  const go = findGo()
  if (!go) return 'go is not installed (Go 1.21 or newer: it fetches the toolchain Ollama asks for, 1.26, from the module proxy)'
  const dir = ollamaInstallDir()
  const partial = `${dir}.partial-${process.pid}`
  rmSync(partial, { recursive: true, force: true })
  mkdirSync(partial, { recursive: true })
  log(`building the ollama command ${OLLAMA_VERSION} (Go, from the module proxy) into ${dir} (about 4 minutes, once per version)`)
  const started = performance.now()
  try {
    // A GOFLAGS of the developer's (-mod=vendor, say) or a go.work around the cache must not steer this build.
    const env = { ...process.env, GOBIN: partial, GOFLAGS: '-buildvcs=false', GOWORK: 'off', GO111MODULE: 'on' }
    execFileSync(go, ['install', '-trimpath', `-ldflags=${LDFLAGS}`, `${OLLAMA_MODULE}@v${OLLAMA_VERSION}`], {
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
      maxBuffer: 16 * 1024 * 1024,
    })
  } catch (e) {
    rmSync(partial, { recursive: true, force: true })
    const stderr = (e as { stderr?: Buffer }).stderr?.toString().trim()
    return `go install ${OLLAMA_MODULE}@v${OLLAMA_VERSION} failed: ${stderr ? stderr.slice(-600) : (e as Error).message}`
  }
  rmSync(dir, { recursive: true, force: true })
  renameSync(partial, dir)
  log(`ollama ${OLLAMA_VERSION} built in ${Math.round((performance.now() - started) / 1000)} s`)
  removeEarlierVersions(dir)
  return undefined
}

function findGo(): string | undefined {
  for (const go of ['go', '/usr/local/go/bin/go']) {
    try {
      execFileSync(go, ['version'], { stdio: 'ignore' })
      return go
    } catch {
      // not this one
    }
  }
  return undefined
}

/** An earlier version's build goes once this one's is in (a partial one of another process stays). */
function removeEarlierVersions(current: string): void {
  const cache = dirname(current)
  for (const name of readdirSync(cache)) {
    const other = join(cache, name)
    if (other !== current && /^\d+\.\d+\.\d+$/.test(name)) rmSync(other, { recursive: true, force: true })
  }
}

function requireOllama(): string {
  const program = ollamaProgram()
  if (!program) throw new Error(`ollama ${OLLAMA_VERSION} is not built here (installOllama builds it; the engines project's setup does)`)
  return program
}

/** One HOME for this process's runs of `ollama` that name none: under the run's temporary folder. */
let sharedHome: string | undefined
function defaultHome(): string {
  sharedHome ??= mkdtempSync(join(tmpdir(), 'hearth-ollama-home-'))
  return sharedHome
}

/** Port 9 (discard) on loopback: nothing listens there, so a connection to it is refused at once. */
const CLOSED_PORT = 'http://127.0.0.1:9'

/**
 * What a run of `ollama` sees: PATH, a HOME of its own (Ollama keeps its key and history in
 * ~/.ollama), OLLAMA_MODELS inside it unless given, and nothing else of this process's environment.
 */
function ollamaEnv(home: string, env: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    TMPDIR: tmpdir(),
    OLLAMA_MODELS: join(home, '.ollama/models'),
    OLLAMA_NOPRUNE: '1',
    OLLAMA_NO_CLOUD: '1',
    OLLAMA_NOHISTORY: '1',
    HTTPS_PROXY: CLOSED_PORT,
    HTTP_PROXY: CLOSED_PORT,
  }
  const merged = { ...base, ...env }
  return Object.fromEntries(Object.entries(merged).filter(([, v]) => v !== undefined))
}

export interface OllamaRunOptions {
  /** The server it talks to, as OLLAMA_HOST takes it: `http://127.0.0.1:8181` or `127.0.0.1:8181`. */
  host: string
  /** More environment (OLLAMA_AUTH, TERM, ...); a key set to undefined is left out. */
  env?: Record<string, string | undefined>
  /** HOME for this run (default: one temporary folder shared by this process's runs). */
  home?: string
  /** Written to its standard input, which is then closed (`ollama run` reads a prompt from it). */
  input?: string
  cwd?: string
  /**
   * On a terminal (util-linux `script` gives it one), as a person types at it: `ollama run` is then
   * interactive (its prompt, a chat per line, `/bye` to leave). Its output is the terminal's.
   */
  terminal?: boolean
  /** Killed after this long (default 60 s); the result then has `timedOut`. */
  timeoutMs?: number
}

export interface OllamaRunResult {
  code: number | null
  stdout: string
  stderr: string
  timedOut: boolean
}

/**
 * Runs the `ollama` client against a server (`runOllama(['list'], { host })`), its standard input
 * a pipe as in a script: `ollama run` then answers once and exits, without its interactive prompt.
 * It never throws for the command's own failure: a non-zero `code` and its `stderr` are the finding.
 */
export function runOllama(args: string[], options: OllamaRunOptions): Promise<OllamaRunResult> {
  const program = requireOllama()
  const env = ollamaEnv(options.home ?? defaultHome(), { ...options.env, OLLAMA_HOST: options.host })
  return new Promise((resolvePromise, reject) => {
    const [command, commandArgs] = options.terminal
      ? ['script', ['-qefc', `stty cols 120 rows 40; exec ${[program, ...args].map(shellQuoted).join(' ')}`, '/dev/null']]
      : [program, args]
    const child = spawn(command, commandArgs, {
      cwd: options.cwd ?? tmpdir(),
      env: options.terminal ? { TERM: 'xterm', ...env } : env,
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    let timedOut = false
    let lastOutput = performance.now()
    child.stdout.on('data', (d: Buffer) => {
      stdout += d
      lastOutput = performance.now()
    })
    child.stderr.on('data', (d: Buffer) => (stderr += d))
    child.stdin.on('error', () => {}) // it may exit before reading
    // On a terminal a line typed before the prompt is drawn is lost: each is typed once the screen has been still a while.
    const lines = options.terminal ? (options.input ?? '').split(/(?<=\n)/).filter(Boolean) : []
    const answered = new Map<string, number>()
    const typist = options.terminal
      ? setInterval(() => {
          // It asks the terminal for its background colour and the cursor's place, and reads no line until answered.
          for (const [query, reply] of TERMINAL_REPLIES) {
            const asked = stdout.split(query).length - 1
            for (let i = answered.get(query) ?? 0; i < asked; i++) child.stdin.write(reply)
            answered.set(query, asked)
          }
          if (performance.now() - lastOutput < TERMINAL_QUIET_MS || lines.length === 0) return
          child.stdin.write(lines.shift()!)
          lastOutput = performance.now()
        }, 50)
      : undefined
    if (!options.terminal) child.stdin.end(options.input ?? '')
    const timer = setTimeout(() => {
      timedOut = true
      child.kill('SIGKILL')
    }, options.timeoutMs ?? 60_000)
    const finish = () => {
      clearTimeout(timer)
      clearInterval(typist)
      child.stdin.destroy()
    }
    child.once('error', (e) => {
      finish()
      reject(e)
    })
    child.once('close', (code) => {
      finish()
      resolvePromise({ code, stdout, stderr, timedOut })
    })
  })
}

/** How long a terminal's output stays still before the next line is typed. */
const TERMINAL_QUIET_MS = 400
/** What a terminal answers to the queries `ollama run` sends it: OSC 11 (background colour), DSR (cursor position). */
const TERMINAL_REPLIES: Array<[string, string]> = [
  ['\x1b]11;?', '\x1b]11;rgb:0000/0000/0000\x1b\\'],
  ['\x1b[6n', '\x1b[1;1R'],
]

function shellQuoted(arg: string): string {
  return `'${arg.replaceAll("'", "'\\''")}'`
}

export interface OllamaStoreModel {
  /** The name it gets (`tiny`, `tiny:q8`, `me/tiny:latest`). */
  name: string
  /** The GGUF it is made from. */
  gguf: string
  /** A vision projector GGUF, a second FROM line as Ollama's Modelfiles take it. */
  projector?: string
  /** More Modelfile lines: `PARAMETER temperature 0.5`, `SYSTEM "..."`, `TEMPLATE ...`, `LICENSE ...`. */
  modelfileExtra?: string
}

export interface OllamaServe {
  /** `http://127.0.0.1:<port>` */
  url: string
  process: ChildProcess
  /** Everything it printed so far. */
  output(): string
  stop(): Promise<void>
}

/** Servers still running when this process exits are killed. */
const serving = new Set<ChildProcess>()
process.once('exit', () => {
  for (const child of serving) child.kill('SIGKILL')
})

/**
 * Starts the real `ollama serve` on a free loopback port with its store in `modelsDir`. It loads no
 * model here (its inference runtime is not built): it lists, shows, creates, copies and removes.
 */
export async function startOllamaServe(
  modelsDir: string,
  options: { home?: string; env?: Record<string, string | undefined>; timeoutMs?: number; program?: string; cpus?: string } = {},
): Promise<OllamaServe> {
  // `program`: a copy beside a `lib/ollama/llama-server` of one's choosing (the benchmark's), where Ollama looks for its engine.
  const program = options.program ?? requireOllama()
  mkdirSync(modelsDir, { recursive: true })
  const env = ollamaEnv(options.home ?? defaultHome(), { OLLAMA_HOST: '127.0.0.1:0', ...options.env, OLLAMA_MODELS: resolve(modelsDir) })
  const [command, args] = options.cpus ? ['taskset', ['-c', options.cpus, program, 'serve']] : [program, ['serve']]
  const child = spawn(command, args, { cwd: tmpdir(), env, stdio: ['ignore', 'pipe', 'pipe'] })
  serving.add(child)
  let output = ''
  const exited = new Promise<void>((done) => child.once('exit', () => done()))
  void exited.then(() => serving.delete(child))
  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(
      () => fail(new Error(`ollama serve did not start in ${options.timeoutMs ?? 30_000} ms: ${output.slice(-1500)}`)),
      options.timeoutMs ?? 30_000,
    )
    const fail = (e: Error) => {
      clearTimeout(timer)
      child.kill('SIGKILL')
      reject(e)
    }
    const onData = (d: Buffer) => {
      output += d
      const listening = /Listening on (127\.0\.0\.1:\d+)/.exec(output)
      if (listening) {
        clearTimeout(timer)
        resolveUrl(`http://${listening[1]}`)
      }
    }
    child.stdout.on('data', onData)
    child.stderr.on('data', onData)
    child.once('exit', (code, signal) => fail(new Error(`ollama serve exited (${code ?? signal}) before listening: ${output.slice(-1500)}`)))
    child.once('error', fail)
  })
  return {
    url,
    process: child,
    output: () => output,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM')
        const killer = setTimeout(() => child.kill('SIGKILL'), 10_000)
        await exited
        clearTimeout(killer)
      }
    },
  }
}

/**
 * Makes an Ollama model store in `dir` as a user would: a temporary `ollama serve` on it, and
 * `ollama create NAME -f Modelfile` for each model (its GGUF, and projector, copied in as blobs
 * beside their manifests), then the server is stopped. Throws with what `ollama` said when a
 * create fails.
 */
export async function makeOllamaStore(dir: string, models: OllamaStoreModel[]): Promise<void> {
  const home = mkdtempSync(join(tmpdir(), 'hearth-ollama-create-'))
  const serve = await startOllamaServe(dir, { home })
  try {
    for (const [i, model] of models.entries()) {
      const modelfile = join(home, `Modelfile-${i}`)
      const lines = [
        `FROM ${resolve(model.gguf)}`,
        ...(model.projector ? [`FROM ${resolve(model.projector)}`] : []),
        ...(model.modelfileExtra ? [model.modelfileExtra] : []),
      ]
      writeFileSync(modelfile, `${lines.join('\n')}\n`)
      const result = await runOllama(['create', model.name, '-f', modelfile], { host: serve.url, home, timeoutMs: 120_000 })
      if (result.code !== 0)
        throw new Error(`ollama create ${model.name} failed (${result.timedOut ? 'timed out' : `exit ${result.code}`}): ${lastLines(result.stderr)}`)
    }
  } finally {
    await serve.stop()
    rmSync(home, { recursive: true, force: true })
  }
}

/** The last lines of a progress display, its cursor codes and carriage returns taken out. */
function lastLines(text: string): string {
  return text
    .replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '')
    .split(/[\r\n]+/)
    .map((l) => l.trim())
    .filter(Boolean)
    .slice(-5)
    .join(' | ')
}
