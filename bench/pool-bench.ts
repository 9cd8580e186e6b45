/**
 * One model over several machines (docs/pool.md): the real-size model whole, and split over two and
 * three lenders, on loopback and on links of 0.2 ms / 1 Gbit and 2 ms / 300 Mbit (each way, made by
 * a delaying proxy: this kernel has no netem). Each split through Hearth (lenders with `--lend`, the
 * borrower's `pool`, the authenticated tunnel) against llama-server started by hand with the same
 * arguments and `--rpc` to bare ggml-rpc-servers behind the same links: what Hearth's tunnel and
 * front cost, target ≤ 5 %. Every lender lends a share of the model's size, so llama.cpp's fit
 * must split it. Engines and rpc-servers share the engine core (a split model computes on one
 * machine at a time); Hearth's processes, the proxies and the client the others. Interleaved, medians.
 * Then the loads over the slow link: the first, and the next from the lenders' tensor caches.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { copyFileSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { findLlamaBuild, programPath, type LlamaBuild } from '../engines/builder/llama-build.ts'
import { freeLoopbackPort } from '../engines/engine-server-process.ts'
import { hugePagesEnvironment, llamaServerArgs } from '../engines/llama-server/llama-server-args.ts'
import { fitMarginMiB } from '../engines/pool/pooled-engine.ts'
import { knock } from '../engines/pool/rpc-lender.ts'
import { startDelayingProxy, type DelayingProxy, type LinkShape } from '../test/support/delaying-proxy.ts'
import { startTestServer, type TestServer } from '../test/support/server-process.ts'
import { startUpstreamProgram, type UpstreamServer } from '../test/support/upstream-servers.ts'
import { fmt, median } from './bench-server.ts'
import { CLIENT_CORES, ENGINE_CORE, onClientCores, pinProcess } from './cores.ts'
import { realSizeModel, say, spec, stream, words, type Endpoint } from './upstream-bench.ts'

interface PoolShape {
  label: string
  lenders: number
  link: LinkShape | undefined
}

const SHAPES: PoolShape[] = [
  { label: 'whole', lenders: 0, link: undefined },
  { label: '2 lenders, loopback', lenders: 2, link: undefined },
  { label: '3 lenders, loopback', lenders: 3, link: undefined },
  { label: '2 lenders, 0.2 ms / 1 Gbit', lenders: 2, link: { delayMs: 0.2, bitsPerSecond: 1e9 } },
  { label: '2 lenders, 2 ms / 300 Mbit', lenders: 2, link: { delayMs: 2, bitsPerSecond: 300e6 } },
]
const KEY = 'pool-bench-key-0123456789'
const PROMPT_WORDS = 96
const DECODE_TOKENS = 32
const CONTEXT = 2048

interface Side {
  endpoint: Endpoint
  /** How long the model's first load took (ms): the lenders' tensor caches empty. */
  firstLoadMs: number
  /** Loads the model again (the lenders keep their tensor caches) and says how long it took (ms). */
  reload(): Promise<number>
  stop(): Promise<void>
}

export async function runPoolBench(options: { runs: number; loadsOnly?: boolean }): Promise<Record<string, Record<string, number>>> {
  const build = findLlamaBuild()
  if (!build) throw new Error('llama.cpp is not built on this machine: npm run build:engines')
  const model = realSizeModel(build)
  const modelMiB = statSync(model).size / 1024 ** 2
  console.log(
    `\n# one model over several machines: ${Math.round(modelMiB)} MiB real-size Q4_K_M, Hearth's pool against llama-server --rpc to bare rpc-servers, ${options.runs} runs`,
  )
  const figures: Record<string, Record<string, number>> = {}
  for (const shape of options.loadsOnly ? [] : SHAPES) {
    // Each lender lends a share: the model (and its context) fits only over all the machines.
    const lentMiB = shape.lenders === 0 ? 0 : Math.ceil(modelMiB / (shape.lenders + 1))
    const hearth = await startHearthPool(build, model, shape, lentMiB)
    const upstream = await startUpstreamPool(build, model, shape, lentMiB)
    try {
      figures[shape.label] = await onClientCores(() => measure(hearth.endpoint, upstream.endpoint, options.runs))
    } finally {
      await hearth.stop()
      await upstream.stop()
    }
    const f = figures[shape.label]!
    console.log(
      `${shape.label.padEnd(28)} decode ${fmt(f.hearth_decode!)} vs ${fmt(f.upstream_decode!)} tok/s (${fmt(f.decode_ratio!, 2)}x)  ` +
        `prompt ${fmt(f.hearth_prompt!)} vs ${fmt(f.upstream_prompt!)} tok/s (${fmt(f.prompt_ratio!, 2)}x)  ` +
        `first token ${fmt(f.hearth_first_token_ms!, 0)} vs ${fmt(f.upstream_first_token_ms!, 0)} ms`,
    )
  }
  figures.loads = await measureLoads(build)
  return figures
}

async function measure(hearth: Endpoint, upstream: Endpoint, runs: number): Promise<Record<string, number>> {
  const sides = [hearth, upstream] as const
  for (const side of sides) await stream(side, say('warm up'), 4)
  const decode: [number[], number[]] = [[], []]
  const prompt: [number[], number[]] = [[], []]
  const first: [number[], number[]] = [[], []]
  for (let run = 0; run < runs; run++) {
    for (const i of run % 2 ? ([1, 0] as const) : ([0, 1] as const)) {
      // A new prompt each time (its first word differs), so no cache helps either side.
      const result = await stream(sides[i], say(words(PROMPT_WORDS, `${run}${i}x${process.pid}`)), DECODE_TOKENS)
      decode[i].push(result.decodePerSecond)
      prompt[i].push(((result.promptTokens - result.cachedTokens) * 1000) / result.enginePromptMs)
      first[i].push(result.ttftMs)
    }
  }
  const m = (values: number[]) => median(values)
  return {
    hearth_decode: m(decode[0]),
    upstream_decode: m(decode[1]),
    decode_ratio: m(decode[0]) / m(decode[1]),
    hearth_prompt: m(prompt[0]),
    upstream_prompt: m(prompt[1]),
    prompt_ratio: m(prompt[0]) / m(prompt[1]),
    hearth_first_token_ms: m(first[0]),
    upstream_first_token_ms: m(first[1]),
  }
}

/**
 * The load a person waits for, over the slow link: the first sends every lent tensor over it, the
 * next (after an unload, or llama-server's restart) gets the tensors llama.cpp's cache on each
 * lender holds from that lender's disk. That cache keeps only tensors over 10 MiB, so this runs the
 * Q8_0 file, whose layers' large tensors are over it (as a 7B model's are at any quantization);
 * the Q4_K_M file's are under it, and its loads would send nearly everything again.
 */
async function measureLoads(build: LlamaBuild): Promise<Record<string, number>> {
  const model = realSizeModel(build, 'Q8_0')
  const shape = SHAPES.at(-1)!
  const lentMiB = Math.ceil(statSync(model).size / 1024 ** 2 / (shape.lenders + 1))
  const figures: Record<string, number> = {}
  for (const [name, start] of [
    ['hearth', startHearthPool],
    ['upstream', startUpstreamPool],
  ] as const) {
    const side = await start(build, model, shape, lentMiB)
    try {
      figures[`${name}_first_load_s`] = side.firstLoadMs / 1000
      figures[`${name}_second_load_s`] = (await onClientCores(() => side.reload())) / 1000
    } finally {
      await side.stop()
    }
  }
  console.log(
    `load of the ${Math.round(statSync(model).size / 1024 ** 2)} MiB Q8_0 file over ${shape.label}: lenders' caches empty ` +
      `${fmt(figures.hearth_first_load_s!, 1)} vs ${fmt(figures.upstream_first_load_s!, 1)} s; again, from their tensor caches ` +
      `${fmt(figures.hearth_second_load_s!, 1)} vs ${fmt(figures.upstream_second_load_s!, 1)} s`,
  )
  return figures
}

/** Lender Hearths with `--lend`, each behind its link, and a borrower whose models.json pools them. */
async function startHearthPool(build: LlamaBuild, model: string, shape: PoolShape, lentMiB: number): Promise<Side> {
  const lenders: TestServer[] = []
  const links: DelayingProxy[] = []
  const pool: Array<{ url: string; api_key_env: string }> = []
  const scratchDirs: string[] = []
  for (let i = 0; i < shape.lenders; i++) {
    // A data folder of its own (its tensor cache empty), removed after like the borrower's models folder.
    const dataDir = mkdtempSync(join(tmpdir(), 'hearth-pool-lender-data-'))
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-pool-lender-'))
    scratchDirs.push(dataDir, modelsDir)
    const lender = await startTestServer({ dataDir, modelsDir, args: ['--lend', '--lend-memory', String(lentMiB), '--api-key', KEY] })
    lenders.push(lender)
    pinProcess(lender.process.pid!, CLIENT_CORES)
    const target = new URL(lender.url)
    const link = shape.link ? await startDelayingProxy({ host: target.hostname, port: Number(target.port) }, shape.link) : undefined
    if (link) links.push(link)
    pool.push({ url: link ? `http://${link.address}` : lender.url, api_key_env: 'POOL_BENCH_KEY' })
  }
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-pool-borrower-'))
  scratchDirs.push(modelsDir)
  copyFileSync(model, join(modelsDir, 'real-size.gguf'))
  writeFileSync(
    join(modelsDir, 'models.json'),
    JSON.stringify({ models: [{ id: 'pooled', file: 'real-size.gguf', context_length: CONTEXT, ...(pool.length ? { pool } : {}) }] }),
  )
  const borrower = await startTestServer({ modelsDir, threads: 1, args: ['--parallel', '1'], env: { POOL_BENCH_KEY: KEY } })
  pinProcess(borrower.process.pid!, CLIENT_CORES)
  const endpoint = { url: borrower.url, headers: { authorization: `Bearer ${borrower.apiKey}` }, model: 'pooled' }
  const manage = async (action: 'load' | 'unload') => {
    const res = await fetch(`${borrower.url}/api/models/pooled/${action}`, { method: 'POST', headers: endpoint.headers })
    if (!res.ok) throw new Error(`${action}: HTTP ${res.status} ${await res.text()}`)
    return (await res.json()) as { load_ms?: number; restore_ms?: number }
  }
  // The engines compute one machine at a time: all of them on the engine core.
  const pinEngines = () => {
    for (const pid of pidsOf(
      ['llama-server', 'ggml-rpc-server'],
      [borrower, ...lenders].map((s) => s.process.pid!),
    ))
      pinProcess(pid, ENGINE_CORE)
  }
  const load = async () => {
    const started = performance.now()
    const loaded = await manage('load')
    const ms = performance.now() - started
    console.log(
      `  Hearth's load: ${fmt(ms / 1000, 2)} s, of which llama-server's start ${fmt((loaded.load_ms ?? 0) / 1000, 2)} s, the slots' restore ${fmt((loaded.restore_ms ?? 0) / 1000, 2)} s`,
    )
    pinEngines()
    await stream(endpoint, say('load'), 2)
    return ms
  }
  const firstLoadMs = await load()
  return {
    endpoint,
    firstLoadMs,
    reload: async () => {
      await manage('unload')
      return load()
    },
    stop: async () => {
      await borrower.stop()
      for (const link of links) await link.close()
      for (const lender of lenders) await lender.stop()
      for (const dir of scratchDirs) rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** llama-server by hand, with Hearth's own arguments for the model, and `--rpc` to bare rpc-servers behind the same links. */
async function startUpstreamPool(build: LlamaBuild, model: string, shape: PoolShape, lentMiB: number): Promise<Side> {
  const rpcServers: ChildProcess[] = []
  const links: DelayingProxy[] = []
  const endpoints: Array<{ endpoint: string; name: string }> = []
  const caches: string[] = []
  for (let i = 0; i < shape.lenders; i++) {
    const port = await freeLoopbackPort()
    const cache = mkdtempSync(join(tmpdir(), 'hearth-pool-bench-rpc-cache-'))
    caches.push(cache)
    const rpc = spawn(
      'taskset',
      ['-c', ENGINE_CORE, programPath(build.dir, 'ggml-rpc-server'), '--host', '127.0.0.1', '--port', String(port), '--threads', '1', '--cache'],
      {
        stdio: 'ignore',
        env: { ...process.env, GGML_RPC_MEM_CAP_MB: String(lentMiB), LLAMA_CACHE: cache },
      },
    )
    rpcServers.push(rpc)
    await listening(port)
    const link = shape.link ? await startDelayingProxy({ host: '127.0.0.1', port }, shape.link) : undefined
    if (link) links.push(link)
    endpoints.push({ endpoint: link ? link.address : `127.0.0.1:${port}`, name: `rpc-${i}` })
  }
  const loadSpec = {
    ...spec('pooled', model, 1, CONTEXT),
    ...(endpoints.length ? { gpuLayers: -1, rpc: { endpoints, fitMarginMiB: fitMarginMiB(lentMiB) } } : {}),
  }
  const start = async () => {
    const started = performance.now()
    // Hearth's arguments and environment (the weights on huge pages), so the figures differ by the tunnel alone.
    const upstreamServer = await startUpstreamProgram(build, 'llama-server', llamaServerArgs(loadSpec, { cpuOnly: endpoints.length === 0 }), {
      cpus: ENGINE_CORE,
      env: hugePagesEnvironment(),
    })
    return { server: upstreamServer, ms: performance.now() - started }
  }
  const first = await start()
  let server: UpstreamServer = first.server
  return {
    get endpoint() {
      return { url: server.url, headers: {}, model: 'pooled' }
    },
    firstLoadMs: first.ms,
    reload: async () => {
      await server.stop()
      const again = await start()
      server = again.server
      return again.ms
    },
    stop: async () => {
      await server.stop()
      for (const link of links) await link.close()
      for (const rpc of rpcServers) rpc.kill('SIGKILL')
      for (const cache of caches) rmSync(cache, { recursive: true, force: true })
    },
  }
}

/** Until something listens on loopback `port`. */
async function listening(port: number): Promise<void> {
  const deadline = performance.now() + 10_000
  while (performance.now() < deadline) {
    if (await knock(port)) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`nothing listens on 127.0.0.1:${port}`)
}

/** The processes named `names` among the descendants of `roots`. */
function pidsOf(names: string[], roots: number[]): number[] {
  const found: number[] = []
  const walk = (pid: number) => {
    let children: number[] = []
    try {
      children = execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
        .trim()
        .split('\n')
        .filter(Boolean)
        .map(Number)
    } catch {
      // none
    }
    for (const child of children) {
      const comm = execFileSync('ps', ['-o', 'comm=', '-p', String(child)], { encoding: 'utf8' }).trim()
      if (names.some((n) => comm.startsWith(n.slice(0, 15)))) found.push(child)
      walk(child)
    }
  }
  for (const root of roots) walk(root)
  return found
}
