/**
 * Starts the whole server: settings → models folder → scheduler with engine processes → HTTP.
 * The desktop app and `npm run serve` both call startServer; nothing here touches Electron.
 */
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'
import { createServer, type Server } from 'node:http'
import { ModelFolder } from '../../models/catalog/model-folder.ts'
import { removeLeftoverCatalogWrites } from '../../models/catalog/catalog-writer.ts'
import type { ModelRecord } from '../../models/catalog/model-record.ts'
import { RemoteEngine } from '../../engines/remote/remote-engine.ts'
import { RemotePool } from '../../engines/remote/remote-pool.ts'
import { DownloadManager } from '../../models/downloads/download-manager.ts'
import { ModelScheduler } from '../../engines/scheduler/model-scheduler.ts'
import { ApiKeys, loadOrCreateStoredKey } from './services/keys/api-keys.ts'
import { KeyStore } from './services/keys/key-store.ts'
import { McpHub } from './services/mcp/mcp-hub.ts'
import { createApp, createOllamaApp, serverParts } from './app.ts'
import { answerClientErrors } from './http/client-errors.ts'
import type { GpuBackend, Hardware, ServerBasics, ServerContext } from './server-context.ts'
import type { ServerSettings } from './settings.ts'
import { mkdir } from 'node:fs/promises'
import { memoryBudget } from './services/memory-budget.ts'
import { loadSpecFor, slotsFor, type EngineDefaults } from '../../engines/load-spec.ts'
import { estimateModelMemory, promptCacheBytes } from '../../engines/scheduler/memory-plan.ts'
import { findLlamaBuild, type LlamaBuild } from '../../engines/builder/llama-build.ts'
import { cpuDevice, listLlamaDevices } from '../../engines/llama-server/llama-devices.ts'
import { LlamaServerEngine } from '../../engines/llama-server/llama-server-engine.ts'
import { CpuFallbacks } from '../../engines/llama-server/cpu-faults.ts'
import { selfTestVerdict } from '../../engines/builder/self-test/engine-self-test.ts'
import type { EngineBuildInfo } from '../../engines/engine-jobs.ts'
import { findWhisperBuild } from '../../engines/builder/whisper-build.ts'
import { WhisperServerEngine } from '../../engines/speech/whisper-server-engine.ts'
import type { NativeBuild } from '../../engines/builder/cmake-build.ts'
import { join } from 'node:path'
import { ModelError } from '../../engines/errors.ts'
import { RpcLender } from '../../engines/pool/rpc-lender.ts'
import { PooledModels } from '../../engines/pool/pooled-engine.ts'
import { programPath } from '../../engines/builder/cmake-build.ts'
import { serveLendTunnel, type Lending } from './services/lending/lend-tunnel.ts'
import { REASONING_KEY_FILE, ReasoningSeal } from './services/reasoning-seal.ts'
import { requireWritableFolder } from './services/writable-folder.ts'
import { removeLeftoverTemporaryFiles } from './services/atomic-write.ts'

const CPU_SLOTS = 2
const GPU_SLOTS = 4
/** Requests sent on at once to each copy of a remote model: its server batches them. */
const REMOTE_SLOTS_PER_REPLICA = 16

function remoteSlots(model: ModelRecord): number {
  return model.catalogEntry?.parallel ?? REMOTE_SLOTS_PER_REPLICA * (model.remote?.replicas.length ?? 1)
}

export interface RunningServer {
  url: string
  /** The Ollama port's address, where `ollamaPort` is set and the port could be had. */
  ollamaUrl?: string
  /** Why the Ollama port is not served, where it could not be had (Ollama itself holds it, say). */
  ollamaNote?: string
  context: ServerContext
  /** Where the generated key lives, when the server made or read one. */
  keyFile: string | undefined
  close(): Promise<void>
}

/**
 * Slow clients may not hold a connection: the headers must arrive within HEADERS_TIMEOUT_MS and
 * the whole request (a 25 MB upload included) within REQUEST_TIMEOUT_MS, else Node answers 408 and
 * closes the socket. A streamed answer is not limited by these; --request-timeout covers the work.
 */
const HEADERS_TIMEOUT_MS = 10_000
const REQUEST_TIMEOUT_MS = 120_000

export interface StartOptions {
  /** The llama.cpp build to serve with (found in the engine cache by default); null serves without one. */
  llamaBuild?: LlamaBuild | null
  /** Likewise for whisper.cpp. */
  whisperBuild?: NativeBuild | null
}

export async function startServer(settings: ServerSettings, log: (line: string) => void = console.log, options: StartOptions = {}): Promise<RunningServer> {
  // Checked here as well as in resolveSettings: the desktop app's LAN switch starts servers directly.
  if (!settings.auth && !isLoopbackHost(settings.host)) {
    throw new Error(`refusing to serve ${settings.host} without an API key: anyone on the network could use it`)
  }
  // Keys, documents and the prompt cache live there: a folder it cannot write is said at once, plainly.
  await requireWritableFolder(settings.dataDir, 'data folder', '--data-dir')
  await removeLeftoverTemporaryFiles(settings.dataDir)
  // One seal per server, never shared with another in this process (the desktop app restarts its server).
  const seal = ReasoningSeal.load(join(settings.dataDir, REASONING_KEY_FILE))
  await mkdir(settings.modelsDir, { recursive: true })
  await removeLeftoverCatalogWrites(settings.modelsDir)
  const remotes = new RemotePool({ intervalMs: settings.remoteCheckMs })
  const folder = new ModelFolder(settings.modelsDir, {
    remotes,
    listingMaxAgeMs: settings.listingMaxAgeMs,
    sources: settings.modelSources,
    ...(settings.defaultContextLength ? { defaultContextLength: settings.defaultContextLength } : {}),
  })
  // The remote servers the catalog names are asked once before the first request: what they serve
  // (context lengths, capabilities, whole lists to import) is known from the start.
  await folder.scan()
  await remotes.checkAll()
  const { keys, keyFile } = await resolveKeys(settings, log)
  const onCpu = settings.backend === 'cpu'
  const engineDefaults: EngineDefaults = {
    threads: settings.threads,
    gpuLayers: onCpu ? 0 : settings.gpuLayers,
    parallel: settings.parallel ?? CPU_SLOTS,
  }
  const llamaBuild = options.llamaBuild === null ? undefined : (options.llamaBuild ?? findLlamaBuild())
  const whisperBuild = options.whisperBuild === null ? undefined : (options.whisperBuild ?? findWhisperBuild())
  // An engine that is not built: the server runs all the same (remote models, the UI, downloads),
  // says so at start and in /api/system, and every request for a model that needs it gets a 503.
  const notBuilt = { llama: llamaBuild ? undefined : engineNotBuilt('llama'), whisper: whisperBuild ? undefined : engineNotBuilt('whisper') }
  for (const message of [notBuilt.llama, notBuilt.whisper]) if (message) log(`warning: ${message}`)
  // The devices llama.cpp sees, found out once in the background; engines wait for the answer.
  const hardware: Promise<Hardware> = (llamaBuild ? listLlamaDevices(llamaBuild) : Promise.resolve([cpuDevice()])).then((devices) => {
    const gpu = devices.some((d) => d.type === 'gpu')
    const backend: GpuBackend = gpu && (llamaBuild?.gpu === 'cuda' || llamaBuild?.gpu === 'vulkan') ? llamaBuild.gpu : 'default'
    if (gpu && !onCpu && settings.gpuLayers !== 0 && settings.parallel === undefined) engineDefaults.parallel = GPU_SLOTS
    return {
      backend,
      devices,
      llamaBuild: llamaBuild ? buildInfo(llamaBuild, 'llama-server') : undefined,
      whisperBuild: whisperBuild ? buildInfo(whisperBuild, 'whisper-server') : undefined,
      notBuilt: [notBuilt.llama, notBuilt.whisper].filter((m): m is string => m !== undefined),
    }
  })
  // A model that crashes llama.cpp on this CPU is loaded again without the kernels that did.
  const cpuFallbacks = llamaBuild && new CpuFallbacks(llamaBuild, log)
  const slotCacheDir = join(settings.dataDir, 'slot-cache')
  await mkdir(slotCacheDir, { recursive: true })
  // Models over several machines: what their lenders had free, and why one last could not run.
  const pools = new PooledModels()
  // A remote model uses the other machine's memory, none of ours; a pooled one, what its lenders do not hold.
  const estimateBytes = (model: ModelRecord) => {
    if (model.remote) return 0
    const total = estimateModelMemory(model, slotsFor(model, engineDefaults)).total
    const pool = model.catalogEntry?.pool
    if (!pool) return total
    // Before the lenders were first asked, each machine is counted an equal share.
    const lent = pools.lastLentMiB(model.id)
    return lent === undefined ? Math.ceil(total / (pool.length + 1)) : Math.max(0, total - lent * 1024 ** 2)
  }
  /** The prompt cache a chat model gets, sized from what the memory plan leaves free once it is loaded. */
  const promptCacheMiB = (model: ModelRecord) => {
    const others = scheduler
      .loaded()
      .filter((m) => m.id !== model.id)
      .reduce((sum, m) => sum + m.estimateBytes, 0)
    return Math.round(promptCacheBytes(memoryBudget(settings, scheduler) - others - estimateBytes(model)) / 1024 ** 2)
  }
  const scheduler: ModelScheduler = new ModelScheduler({
    maxQueuePerModel: settings.maxQueuePerModel,
    slotsFor: (model) => (model.remote ? remoteSlots(model) : slotsFor(model, engineDefaults)),
    estimateBytes,
    idleTtlMs: (model) => (model.catalogEntry?.ttl !== undefined ? model.catalogEntry.ttl * 1000 : settings.idleTtlMs),
    memoryBudget: () => memoryBudget(settings, scheduler),
    afterFailure: async (model, error) => (model.remote || model.kind === 'speech' ? undefined : cpuFallbacks?.after(model, error)),
    cannotStart: (model) => {
      if (model.remote) return undefined
      const missing = model.kind === 'speech' ? notBuilt.whisper : notBuilt.llama
      return missing === undefined ? undefined : new ModelError('engine_not_built', missing)
    },
    startEngine: async (model) => {
      if (model.remote) return new RemoteEngine(model.id, model.remote.replicas, remotes, model.capabilities.includes('vision'))
      await hardware
      const spec = { ...loadSpecFor(model, engineDefaults), ...(model.kind === 'chat' ? { promptCacheMiB: promptCacheMiB(model) } : {}) }
      const forwardLog = process.env.HEARTH_ENGINE_LOG === '1'
      if (model.kind === 'speech') {
        if (!whisperBuild) throw new ModelError('engine_not_built', notBuilt.whisper!)
        return WhisperServerEngine.start(spec, whisperBuild, { forwardLog })
      }
      if (!llamaBuild) throw new ModelError('engine_not_built', notBuilt.llama!)
      const engineOptions = { forwardLog, slotCacheDir, extraArgs: cpuFallbacks?.argsFor(model) }
      const pool = model.catalogEntry?.pool?.map((l) => ({ url: l.url, apiKeyEnv: l.api_key_env }))
      const engine = pool ? await pools.start(spec, llamaBuild, pool, engineOptions) : await LlamaServerEngine.start(spec, llamaBuild, engineOptions)
      const given = engine.info.contextLength
      if (given !== undefined && folder.reportEngineContext(model, given)) {
        log(
          `warning: model "${model.id}" gets ${given} tokens of context per request from llama-server, not the ${model.contextLength} its record says; it is served with ${given}`,
        )
      }
      if (engine.info.callsTools !== undefined) folder.reportEngineToolCalling(model, engine.info.callsTools)
      return engine
    },
  })
  const downloads = new DownloadManager({ folder })
  // Reads mcp.json only: each MCP server starts on first need and stops with the server.
  const mcp = await McpHub.open(settings.dataDir, log)
  const lending = settings.lend ? await startLending(settings, llamaBuild, log) : undefined
  const basics: ServerBasics = {
    settings,
    folder,
    scheduler,
    downloads,
    keys,
    log,
    hardware,
    remotes,
    mcp,
    cpuFallbacks: () => cpuFallbacks?.list() ?? [],
    lending,
    seal,
    pools,
  }
  const context: ServerContext = { ...basics, ...serverParts(basics) }
  const http = await listen(createApp(context), settings.port, settings.host, settings.requestTimeoutMs)
  serveLendTunnel(http, keys, lending, log)
  const { port } = http.address() as AddressInfo
  const host = settings.host.includes(':') ? `[${settings.host}]` : settings.host
  // Ollama's port listens on loopback whatever --host says: its programs may come without a key.
  const ollama = settings.ollamaPort === undefined ? undefined : await listenForOllama(createOllamaApp(context), settings, log)
  if (ollama && 'note' in ollama) context.ollamaNote = ollama.note

  let closing: Promise<void> | undefined
  if (ollama && 'server' in ollama) context.ollamaUrl = `http://127.0.0.1:${(ollama.server.address() as AddressInfo).port}`
  const servers = ollama && 'server' in ollama ? [http, ollama.server] : [http]
  return {
    url: `http://${host}:${port}`,
    ...(context.ollamaUrl ? { ollamaUrl: context.ollamaUrl } : {}),
    ...(context.ollamaNote ? { ollamaNote: context.ollamaNote } : {}),
    context,
    keyFile,
    close: () =>
      (closing ??= (async () => {
        const stopped = servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve())))
        for (const s of servers) s.closeIdleConnections()
        remotes.close()
        lending?.lender.stop()
        await Promise.all([scheduler.shutdown(), downloads.shutdown(), keys?.store?.flush(), mcp.close()])
        for (const s of servers) s.closeAllConnections()
        await Promise.all(stopped)
      })()),
  }
}

/** llama.cpp's rpc-server for `--lend`, on loopback, capped at the memory the person set. */
async function startLending(settings: ServerSettings, build: LlamaBuild | undefined, log: (line: string) => void): Promise<Lending> {
  if (!build) throw new Error(`--lend: ${engineNotBuilt('llama')}`)
  const lender = await RpcLender.start({
    program: programPath(build.dir, 'ggml-rpc-server'),
    memoryMiB: settings.lendMemoryMiB,
    threads: settings.threads,
    cacheDir: join(settings.dataDir, 'lent-tensors'),
    log,
  })
  const devices = lender.devices.map((d) => `${d.name} ${d.freeMiB} MiB`).join(', ')
  log(`lending ${devices || 'memory'} to borrowers with a key that may lend (rpc-server v${lender.protocol}, on loopback only)`)
  return { lender, commit: build.commit, borrowers: new Set() }
}

/**
 * The Ollama port, listening; or, where the port is taken, why: Ollama itself (it answers
 * `/api/version`), or another program. Taken by Ollama at its default port, that is no fault: the
 * person keeps Ollama, and Hearth's own port serves the same API with a key.
 */
async function listenForOllama(
  app: import('express').Express,
  settings: ServerSettings,
  log: (line: string) => void,
): Promise<{ server: Server } | { note: string }> {
  const port = settings.ollamaPort!
  try {
    return { server: await listen(app, port, '127.0.0.1', settings.requestTimeoutMs) }
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    const holder = code === 'EADDRINUSE' ? await ollamaVersionAt(port) : undefined
    const why =
      holder !== undefined
        ? `Ollama ${holder} holds 127.0.0.1:${port}: stop Ollama to let Hearth answer its programs there (the same models, tools and Modelfiles), or pick another --ollama-port`
        : code === 'EADDRINUSE'
          ? `127.0.0.1:${port} is in use by another program: pick another --ollama-port`
          : (e as Error).message
    log(`${settings.ollamaPortIfFree ? 'note' : 'warning'}: Ollama's API is not served on 127.0.0.1:${port}: ${why}`)
    return { note: why }
  }
}

/** The version an Ollama server on this port says it is, or undefined when no Ollama answers there. */
async function ollamaVersionAt(port: number): Promise<string | undefined> {
  try {
    const answer = await fetch(`http://127.0.0.1:${port}/api/version`, { signal: AbortSignal.timeout(1_000) })
    const version = ((await answer.json()) as { version?: unknown }).version
    return typeof version === 'string' ? version : undefined
  } catch {
    return undefined
  }
}

/** An HTTP server for `app`, listening; slow clients are cut off as the comment above says. */
async function listen(app: import('express').Express, port: number, host: string, requestTimeoutMs: number): Promise<Server> {
  const http: Server = createServer(
    {
      headersTimeout: HEADERS_TIMEOUT_MS,
      // Never longer than the work may take: a request that cannot arrive in time would time out anyway.
      requestTimeout: Math.min(REQUEST_TIMEOUT_MS, Math.max(HEADERS_TIMEOUT_MS, requestTimeoutMs)),
      // How often those limits are checked (Node's default, 30 s, lets a slow client linger).
      connectionsCheckingInterval: 1_000,
    },
    app,
  )
  answerClientErrors(http)
  http.listen(port, host)
  await Promise.race([once(http, 'listening'), once(http, 'error').then(([e]) => Promise.reject(e))])
  http.keepAliveTimeout = 65_000
  return http
}

async function resolveKeys(settings: ServerSettings, log: (line: string) => void): Promise<{ keys: ApiKeys | undefined; keyFile: string | undefined }> {
  if (!settings.auth) return { keys: undefined, keyFile: undefined }
  const store = await KeyStore.open(settings.dataDir, log)
  if (settings.apiKeys.length > 0) return { keys: new ApiKeys(settings.apiKeys, store), keyFile: undefined }
  const stored = await loadOrCreateStoredKey(settings.dataDir)
  return { keys: new ApiKeys([stored.key], store), keyFile: stored.path }
}

function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.')
}

function buildInfo(build: LlamaBuild, name: EngineBuildInfo['name']): EngineBuildInfo {
  return {
    name,
    commit: build.commit,
    cpuFeatures: build.cpuFeatures,
    gpu: build.gpu,
    ...(build.selfTest ? { selfTest: { passed: build.selfTest.passed, verdict: selfTestVerdict(build.selfTest), at: build.selfTest.at } } : {}),
    withheld: build.withheld ?? [],
  }
}

/**
 * What a machine without an engine's build is told, at start, in /api/system (the Server page) and
 * in the 503 every request for a model that needs the engine gets.
 */
function engineNotBuilt(engine: 'llama' | 'whisper'): string {
  const [program, models] = engine === 'llama' ? ['llama.cpp', 'chat, embedding and rerank models'] : ['whisper.cpp', 'speech models']
  return `${program} is not built for this machine, so ${models} cannot run. Build it with: npm run build:engines (it needs CMake and a C++ compiler)`
}
