/**
 * The CNCF Distribution registry (github.com/distribution/distribution, the `registry` program
 * behind Docker's registry image), pinned in REGISTRY_VERSION, for the suites that pull Ollama
 * models by name from a real registry on loopback, filled by the real `ollama push --insecure`.
 * Built like the `ollama` command (ollama-program.ts): `go install` from the Go module proxy, once
 * per version, into a cache outside the clone, by the engines project's setup.
 *
 * Each registry started here gets a free loopback port, a storage folder of its own and nothing of
 * this process's environment beyond PATH. Its blobs are served as Ollama's own registry serves
 * them: a GET of `/v2/<repo>/blobs/<digest>` is answered with a redirect to another host (Ollama's
 * goes to a CDN), here a small file server on `localhost` over the registry's storage folder that
 * answers ranges. That is what the real `ollama pull` needs: it asks for the blob, stops at the first
 * redirect to another host and fetches its parts in ranges from there (a blob served in place, with
 * no redirect, fails its pull with "no Location header"). Distribution does this with its own
 * `redirect` storage middleware, so nothing stands between the clients and the registry. Between
 * the clients and the blob server is a TCP link the tests can cut (`blobLink.cutAfter(n)`: the
 * connections drop once n more bytes have gone to the clients, and new ones are refused, as a lost
 * network does) and mend (`blobLink.mend()`); it counts the bytes it lets through.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { createReadStream, existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { createConnection, createServer as createNetServer, type Server as NetServer, type Socket } from 'node:net'
import { homedir, tmpdir } from 'node:os'
import { dirname, join, resolve, sep } from 'node:path'

export const REGISTRY_VERSION = '3.1.2'
const REGISTRY_MODULE = 'github.com/distribution/distribution/v3'

/** Where this version's `registry` is (or will be) built: HEARTH_REGISTRY_CACHE moves the cache. */
export function registryInstallDir(env: NodeJS.ProcessEnv = process.env): string {
  const cache = env.HEARTH_REGISTRY_CACHE ?? join(env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'hearth/registry')
  return join(cache, REGISTRY_VERSION)
}

/** The path of the built `registry`, or undefined (the suites then skip, loudly). */
export function registryProgram(): string | undefined {
  const path = join(registryInstallDir(), 'registry')
  return existsSync(path) ? path : undefined
}

/**
 * Builds `registry` into the cache unless it is there; returns an error message when it cannot (no
 * Go, the module proxy out of reach). About 2 minutes on two busy cores, the module downloads
 * included; Go's own caches make a rebuild quicker.
 */
export function installRegistry(log: (line: string) => void = console.log): string | undefined {
  if (registryProgram()) return undefined
  const go = findGo()
  if (!go) return 'go is not installed (Go 1.23 or newer builds the registry)'
  const dir = registryInstallDir()
  const partial = `${dir}.partial-${process.pid}`
  rmSync(partial, { recursive: true, force: true })
  mkdirSync(partial, { recursive: true })
  log(`building the Distribution registry ${REGISTRY_VERSION} (Go, from the module proxy) into ${dir} (about 2 minutes, once per version)`)
  const started = performance.now()
  try {
    const env = { ...process.env, GOBIN: partial, GOFLAGS: '-buildvcs=false', GOWORK: 'off', GO111MODULE: 'on', CGO_ENABLED: '0' }
    execFileSync(go, ['install', '-trimpath', '-ldflags=-w -s', `${REGISTRY_MODULE}/cmd/registry@v${REGISTRY_VERSION}`], {
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
      maxBuffer: 16 * 1024 * 1024,
    })
  } catch (e) {
    rmSync(partial, { recursive: true, force: true })
    const stderr = (e as { stderr?: Buffer }).stderr?.toString().trim()
    return `go install ${REGISTRY_MODULE}/cmd/registry@v${REGISTRY_VERSION} failed: ${stderr ? stderr.slice(-600) : (e as Error).message}`
  }
  rmSync(dir, { recursive: true, force: true })
  renameSync(partial, dir)
  log(`registry ${REGISTRY_VERSION} built in ${Math.round((performance.now() - started) / 1000)} s`)
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

function removeEarlierVersions(current: string): void {
  const cache = dirname(current)
  for (const name of readdirSync(cache)) {
    const other = join(cache, name)
    if (other !== current && /^\d+\.\d+\.\d+$/.test(name)) rmSync(other, { recursive: true, force: true })
  }
}

export interface RunningRegistry {
  /** `127.0.0.1:<port>`: the host part of a model name (`127.0.0.1:5000/library/tiny:1`). */
  host: string
  /** `http://127.0.0.1:<port>` */
  url: string
  /** The registry's storage root (`docker/registry/v2/...` below it). */
  storageDir: string
  /** Where the registry redirects blobs: the link in front of the blob server, `http://localhost:<port>`. */
  blobUrl: string
  /**
   * What the blob server was asked so far: each request's path and Range header, the blob bytes it
   * sent, and the most requests it served at once.
   */
  blobStats(): BlobStats
  /** The link between the clients and the blob server. */
  blobLink: CuttableLink
  /** Everything the registry printed so far. */
  output(): string
  stop(): Promise<void>
}

const running = new Set<ChildProcess>()
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL')
})

/** Starts the registry on a free loopback port, with its storage in a new temporary folder unless given. */
export async function startRegistry(options: { storageDir?: string; timeoutMs?: number } = {}): Promise<RunningRegistry> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startRegistryOnce(options)
    } catch (e) {
      // The free port found may be taken by another process before the registry binds it: another port then.
      if (attempt >= 3 || !/address already in use/.test((e as Error).message)) throw e
    }
  }
}

async function startRegistryOnce(options: { storageDir?: string; timeoutMs?: number }): Promise<RunningRegistry> {
  const program = registryProgram()
  if (!program) throw new Error(`the registry ${REGISTRY_VERSION} is not built here (installRegistry builds it; the engines project's setup does)`)
  const work = mkdtempSync(join(tmpdir(), 'hearth-registry-'))
  const storageDir = resolve(options.storageDir ?? join(work, 'storage'))
  mkdirSync(storageDir, { recursive: true })
  const blobs = await startBlobServer(storageDir)
  const link = await startCuttableLink(blobs.port)
  const port = await freePort()
  const config = join(work, 'config.yml')
  writeFileSync(
    config,
    [
      'version: 0.1',
      'log:',
      '  level: warn',
      '  accesslog:',
      '    disabled: true',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${JSON.stringify(storageDir)}`,
      '  delete:',
      '    enabled: true',
      'middleware:',
      '  storage:',
      '    - name: redirect',
      '      options:',
      `        baseurl: ${link.url}`,
      'http:',
      `  addr: 127.0.0.1:${port}`,
      '  draintimeout: 1s',
      '',
    ].join('\n'),
  )
  const child = spawn(program, ['serve', config], {
    cwd: work,
    env: { PATH: process.env.PATH, HOME: work, TMPDIR: tmpdir() },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  running.add(child)
  let output = ''
  child.stdout.on('data', (d: Buffer) => (output += d))
  child.stderr.on('data', (d: Buffer) => (output += d))
  const exited = new Promise<void>((done) => child.once('exit', () => done()))
  void exited.then(() => running.delete(child))
  const url = `http://127.0.0.1:${port}`
  const deadline = performance.now() + (options.timeoutMs ?? 30_000)
  while (true) {
    if (child.exitCode !== null || child.signalCode !== null) {
      await Promise.all([blobs.close(), link.close()])
      rmSync(work, { recursive: true, force: true })
      throw new Error(`the registry exited (${child.exitCode ?? child.signalCode}) before answering: ${output.slice(-1500)}`)
    }
    const ok = await fetch(`${url}/v2/`).then(
      (r) => r.ok,
      () => false,
    )
    if (ok) break
    if (performance.now() > deadline) {
      child.kill('SIGKILL')
      await Promise.all([blobs.close(), link.close()])
      throw new Error(`the registry did not answer on ${url} in ${options.timeoutMs ?? 30_000} ms: ${output.slice(-1500)}`)
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  return {
    host: `127.0.0.1:${port}`,
    url,
    storageDir,
    blobUrl: link.url,
    blobStats: blobs.stats,
    blobLink: link,
    output: () => output,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM')
        const killer = setTimeout(() => child.kill('SIGKILL'), 5_000)
        await exited
        clearTimeout(killer)
      }
      await Promise.all([blobs.close(), link.close()])
      rmSync(work, { recursive: true, force: true })
    },
  }
}

/** The path of a blob's data in the registry's storage, as its filesystem driver lays it out. */
export function registryBlobPath(storageDir: string, digest: string): string {
  const hex = digest.replace(/^sha256:/, '')
  return join(storageDir, 'docker/registry/v2/blobs/sha256', hex.slice(0, 2), hex, 'data')
}

async function freePort(): Promise<number> {
  const server = createNetServer()
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  const { port } = server.address() as { port: number }
  await new Promise<void>((done) => server.close(() => done()))
  return port
}

export interface BlobStats {
  requests: Array<{ method: string; path: string; range: string | undefined }>
  bytes: number
  maxInFlight: number
}

/**
 * The registry's "CDN": files under its storage root, GET and HEAD, one `Range: bytes=a-b` (or
 * `a-`) at a time.
 */
async function startBlobServer(root: string): Promise<{ port: number; stats: () => BlobStats; close: () => Promise<void> }> {
  let bytes = 0
  let inFlight = 0
  let maxInFlight = 0
  const requests: BlobStats['requests'] = []
  const server: Server = createServer((req, res) => {
    const pathname = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname)
    requests.push({ method: req.method ?? '', path: pathname, range: req.headers.range })
    inFlight++
    maxInFlight = Math.max(maxInFlight, inFlight)
    res.on('close', () => inFlight--)
    const path = resolve(root, `.${pathname}`)
    const info = path.startsWith(root + sep) ? statSync(path, { throwIfNoEntry: false }) : undefined
    if (!info?.isFile() || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404).end()
      return
    }
    const size = info.size
    let start = 0
    let end = size - 1
    const range = req.headers.range
    if (range) {
      const m = /^bytes=(\d+)-(\d*)$/.exec(range)
      if (!m || Number(m[1]) >= size) {
        res.writeHead(416, { 'content-range': `bytes */${size}` }).end()
        return
      }
      start = Number(m[1])
      end = m[2] ? Math.min(Number(m[2]), size - 1) : size - 1
      res.writeHead(206, {
        'content-length': end - start + 1,
        'content-range': `bytes ${start}-${end}/${size}`,
        'accept-ranges': 'bytes',
        'content-type': 'application/octet-stream',
      })
    } else {
      res.writeHead(200, { 'content-length': size, 'accept-ranges': 'bytes', 'content-type': 'application/octet-stream' })
    }
    if (req.method === 'HEAD' || size === 0) {
      res.end()
      return
    }
    const stream = createReadStream(path, { start, end })
    stream.on('data', (chunk) => (bytes += chunk.length))
    stream.pipe(res)
    res.on('close', () => stream.destroy())
  })
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  const { port } = server.address() as { port: number }
  return {
    port,
    stats: () => ({ requests: [...requests], bytes, maxInFlight }),
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections()
        server.close(() => done())
      }),
  }
}

export interface CuttableLink {
  /** `http://localhost:<port>`: not the registry's host, as a CDN is not. */
  url: string
  /** Bytes sent to the clients since it started. */
  bytesToClients(): number
  /** After n more bytes to the clients every connection drops, and new ones are refused until mended. */
  cutAfter(n: number): void
  mend(): void
  close(): Promise<void>
}

/** A TCP link to the blob server on loopback that can be cut, as a network is lost, and mended. */
async function startCuttableLink(targetPort: number): Promise<CuttableLink & { close(): Promise<void> }> {
  const sockets = new Set<Socket>()
  let sent = 0
  let budget: number | undefined
  const cut = () => {
    for (const s of sockets) s.destroy()
  }
  const server: NetServer = createNetServer((client) => {
    if (budget !== undefined && budget <= 0) {
      client.destroy()
      return
    }
    const upstream = createConnection({ host: '127.0.0.1', port: targetPort })
    for (const s of [client, upstream]) {
      sockets.add(s)
      s.on('error', () => undefined)
      s.on('close', () => {
        sockets.delete(s)
        ;(s === client ? upstream : client).destroy()
      })
    }
    client.pipe(upstream)
    upstream.on('data', (chunk: Buffer) => {
      if (budget !== undefined && chunk.length >= budget) {
        const part = chunk.subarray(0, budget)
        sent += part.length
        budget = 0
        client.write(part, () => cut())
        return
      }
      if (budget !== undefined) budget -= chunk.length
      sent += chunk.length
      if (!client.write(chunk)) {
        upstream.pause()
        client.once('drain', () => upstream.resume())
      }
    })
    upstream.on('end', () => client.end())
  })
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  const { port } = server.address() as { port: number }
  return {
    url: `http://localhost:${port}`,
    bytesToClients: () => sent,
    cutAfter(n: number) {
      budget = n
      if (n <= 0) cut()
    },
    mend() {
      budget = undefined
    },
    close: () =>
      new Promise<void>((done) => {
        cut()
        server.close(() => done())
      }),
  }
}
