/**
 * Starts the real server as `npm run serve` would (a separate process through tsx) and hands back
 * its address and key. Used by the end-to-end suites; always stop it in afterAll.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import type { MemoryCgroup } from './memory-cgroups.ts'

export const PROJECT_ROOT = resolve(import.meta.dirname, '../..')
export const TEST_API_KEY = 'test-key-0123456789'

export interface TestServer {
  url: string
  /** The Ollama port's address, where the server was started with `--ollama-port`. */
  ollamaUrl?: string
  apiKey: string
  process: ChildProcess
  /** Everything the server printed so far. */
  output(): string
  stop(signal?: NodeJS.Signals): Promise<number | null>
}

export interface TestServerOptions {
  modelsDir: string
  /** Extra flags, e.g. ['--request-timeout', '2']. */
  args?: string[]
  env?: NodeJS.ProcessEnv
  /** Omit the default --api-key flag (to test key generation or --no-auth). */
  noKeyFlag?: boolean
  dataDir?: string
  /** Inference threads per model (1 by default, as tests on a 2-core machine should). */
  threads?: number
  /** Run it in this network namespace (another machine on the test's LAN: lan-namespaces.ts). */
  namespace?: string
  /** Run it, and the engines it starts, inside this memory cgroup (memory-cgroups.ts). */
  memory?: MemoryCgroup
  /** Resolve host names with this file in place of /etc/hosts (a mount namespace of its own: root, Linux; lan-namespaces.ts). */
  hostsFile?: string
}

/** Servers still running when the test process exits are killed, so a failed suite leaves none behind. */
const running = new Set<ChildProcess>()
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL')
})

export async function startTestServer(options: TestServerOptions): Promise<TestServer> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'hearth-data-'))
  const args = [
    '--import',
    'tsx',
    join(PROJECT_ROOT, 'main/cli/serve.ts'),
    '--port',
    '0',
    '--threads',
    String(options.threads ?? 1),
    '--models-dir',
    options.modelsDir,
    '--data-dir',
    dataDir,
    ...(options.noKeyFlag ? [] : ['--api-key', TEST_API_KEY]),
    // The machine's own Ollama, LM Studio and Hugging Face stores stay out of the tests unless a test names them.
    ...(options.args?.includes('--model-sources') ? [] : ['--model-sources', 'none']),
    // The Ollama port only where a test asks for it: Ollama's own 11434 is not the tests' to take.
    ...(options.args?.includes('--ollama-port') ? [] : ['--ollama-port', 'off']),
    ...(options.args ?? []),
  ]
  const withHosts: [string, string[]] = options.hostsFile
    ? [
        'unshare',
        ['--mount', '--propagation', 'private', 'sh', '-c', 'mount --bind "$0" /etc/hosts && exec "$@"', options.hostsFile, process.execPath, ...args],
      ]
    : [process.execPath, args]
  const inNamespace: [string, string[]] = options.namespace ? ['ip', ['netns', 'exec', options.namespace, ...withHosts.flat()]] : withHosts
  const [command, commandArgs] = options.memory ? options.memory.wrap(...inNamespace) : inNamespace
  const child = spawn(command, commandArgs, {
    cwd: PROJECT_ROOT,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()))
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()))
  running.add(child)
  const exited = new Promise<number | null>((r) =>
    child.once('exit', (code) => {
      running.delete(child)
      r(code)
    }),
  )

  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL') // a server that never listened must not outlive the suite
      reject(new Error(`server did not start in time:\n${output}`))
    }, 30_000)
    const check = () => {
      const m = /listening on (http:\/\/\S+)/.exec(output)
      if (m) {
        clearTimeout(timer)
        resolveUrl(m[1]!)
      }
    }
    child.stdout!.on('data', check)
    void exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`server exited with ${code} before listening:\n${output}`))
    })
  })
  // `… on http://127.0.0.1:11434: ollama, its clients …`: the address alone, without the colon after it.
  const ollamaUrl = /Ollama's API .*? on (http:\/\/[^\s/]+:\d+)/.exec(output)?.[1]
  return {
    url,
    ...(ollamaUrl ? { ollamaUrl } : {}),
    apiKey: TEST_API_KEY,
    process: child,
    output: () => output,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal)
      return exited
    },
  }
}

/** Raw HTTP helper: JSON in, status + parsed body out. */
export async function postJson(server: Pick<TestServer, 'url' | 'apiKey'>, path: string, body: unknown, init: RequestInit = {}) {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${server.apiKey}` },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    ...init,
  })
  return readResponse(res)
}

/** Status, headers and body of a response, the body also parsed when it is JSON. */
export async function readResponse(res: Response) {
  const text = await res.text()
  let json: any
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: res.status, headers: res.headers, text, json }
}
