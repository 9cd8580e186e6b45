/**
 * The whole HTTP app in this process (`createApp`, the real models folder, scheduler, keys and
 * settings), with scripted engines in place of engine processes. Routes, middleware and wire
 * shapes are tested here in milliseconds; what only real engines can show stays in the suites that
 * start the server with them.
 */
import { mkdtempSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { once } from 'node:events'
import { createApp, createOllamaApp, serverParts } from '../../main/server/app.ts'
import { answerClientErrors } from '../../main/server/http/client-errors.ts'
import { ApiKeys } from '../../main/server/services/keys/api-keys.ts'
import { KeyStore } from '../../main/server/services/keys/key-store.ts'
import { REASONING_KEY_FILE, ReasoningSeal } from '../../main/server/services/reasoning-seal.ts'
import { McpHub } from '../../main/server/services/mcp/mcp-hub.ts'
import type { ServerBasics, ServerContext } from '../../main/server/server-context.ts'
import { resolveSettings, type ServerSettings } from '../../main/server/settings.ts'
import type { ModelRecord } from '../../models/catalog/model-record.ts'
import { ModelFolder } from '../../models/catalog/model-folder.ts'
import { DownloadManager } from '../../models/downloads/download-manager.ts'
import type { Engine, RunOptions } from '../../engines/engine.ts'
import type { EngineJob, EngineResult, JobProgress } from '../../engines/engine-jobs.ts'
import { ModelError } from '../../engines/errors.ts'
import { ModelScheduler } from '../../engines/scheduler/model-scheduler.ts'
import { TEST_API_KEY } from './server-process.ts'

/** What a scripted engine does with a job: report progress, then answer (or throw a ModelError). */
export type Script = (job: EngineJob, context: ScriptContext) => Promise<EngineResult> | EngineResult

export interface ScriptContext {
  model: ModelRecord
  emit: (progress: JobProgress) => void
  signal: AbortSignal | undefined
}

/** An engine that answers from a script, and remembers every job it was given. */
export class ScriptedEngine implements Engine {
  readonly pid = undefined
  readonly info = { devices: ['CPU'], loadMs: 1, vision: false }
  alive = true
  readonly jobs: EngineJob[] = []
  private readonly exitListeners: Array<() => void> = []

  constructor(
    readonly model: ModelRecord,
    private readonly script: Script,
  ) {
    this.info.vision = model.capabilities.includes('vision')
  }

  async run(job: EngineJob, options: RunOptions = {}): Promise<EngineResult> {
    this.jobs.push(job)
    return this.script(job, { model: this.model, emit: (p) => options.onProgress?.(p), signal: options.signal })
  }

  async memoryBytes(): Promise<number> {
    return 1024 * 1024
  }

  async stop(): Promise<void> {
    if (!this.alive) return
    this.alive = false
    for (const listener of this.exitListeners) listener()
  }

  onExit(listener: () => void): void {
    this.exitListeners.push(listener)
  }
}

export const SCRIPTED_WORDS = ['Once', ' upon', ' a', ' time', '.']

/**
 * The default script: chat and completions stream SCRIPTED_WORDS (cut at the token limit),
 * embeddings are small unit vectors, rerank scores favour documents sharing words with the query.
 */
export const plainScript: Script = (job, { emit }) => {
  switch (job.type) {
    case 'chat':
    case 'complete': {
      const limit = job.type === 'chat' ? (job.maxTokens ?? job.maxCompletionTokens) : job.maxTokens
      const words = SCRIPTED_WORDS.slice(0, limit)
      for (const text of words) emit({ type: 'text', text })
      const finishReason = words.length < SCRIPTED_WORDS.length ? ('length' as const) : ('stop' as const)
      const counts = { promptTokens: 7, completionTokens: words.length }
      if (job.type === 'complete') return { type: 'complete', text: words.join(''), finishReason, ...counts, logprobs: undefined }
      return {
        type: 'chat',
        text: words.join(''),
        reasoning: '',
        toolCalls: [],
        logprobs: undefined,
        finishReason,
        reasoningTokens: 0,
        ...counts,
        timings: { promptMs: 1, promptPerSecond: 7000, predictedMs: 5, predictedPerSecond: 1000 },
      }
    }
    case 'embed': {
      const dimensions = 4
      const vectors = new Float32Array(job.inputs.length * dimensions)
      job.inputs.forEach((_, i) => (vectors[i * dimensions + (i % dimensions)] = 1))
      return { type: 'embed', vectors, dimensions, promptTokens: job.inputs.length * 3 }
    }
    case 'rerank': {
      const query = new Set(job.query.toLowerCase().split(/\W+/))
      const scores = job.documents.map(
        (d) =>
          d
            .toLowerCase()
            .split(/\W+/)
            .filter((w) => query.has(w)).length,
      )
      return { type: 'rerank', scores, promptTokens: job.documents.length * 4 }
    }
    case 'speech':
      throw new ModelError('model_not_compatible', 'the scripted engine does not transcribe')
    case 'count':
      // A scripted tokenizer: a token per word or mark, roughly what real ones give English.
      return { type: 'count', tokens: job.texts.map((t) => t.match(/\w+|[^\s\w]/g)?.length ?? 0) }
  }
}

export interface InProcessServer {
  url: string
  /** The Ollama port (loopback, keyless), where `--ollama-port` was among the args. */
  ollamaUrl?: string
  apiKey: string
  settings: ServerSettings
  context: ServerContext
  /** Every engine started so far, in order. */
  engines: ScriptedEngine[]
  /** Lines the server logged. */
  output(): string
  stop(): Promise<void>
}

export interface InProcessOptions {
  /** The models folder (empty by default). */
  modelsDir?: string
  /** Where settings.json and the keys live (a fresh folder by default). */
  dataDir?: string
  /** Command-line flags and environment, as `npm run serve` takes them. */
  args?: string[]
  env?: NodeJS.ProcessEnv
  script?: Script
  /** The MCP servers: a hub on the data folder's mcp.json by default, this one, or none (false). */
  mcp?: McpHub | false
}

export async function startInProcessServer(options: InProcessOptions = {}): Promise<InProcessServer> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'hearth-inproc-data-'))
  const modelsDir = options.modelsDir ?? mkdtempSync(join(tmpdir(), 'hearth-inproc-models-'))
  // The Ollama port only where a test asks for it: Ollama's own 11434 is not the tests' to take.
  const ollamaPort = options.args?.includes('--ollama-port') ? [] : ['--ollama-port', 'off']
  const argv = [
    '--port',
    '0',
    '--threads',
    '1',
    '--models-dir',
    modelsDir,
    '--data-dir',
    dataDir,
    '--api-key',
    TEST_API_KEY,
    ...ollamaPort,
    ...(options.args ?? []),
  ]
  const { settings } = resolveSettings(argv, { ...options.env }, 2)
  const lines: string[] = []
  const folder = new ModelFolder(settings.modelsDir, {
    listingMaxAgeMs: settings.listingMaxAgeMs,
    ...(settings.defaultContextLength ? { defaultContextLength: settings.defaultContextLength } : {}),
  })
  const engines: ScriptedEngine[] = []
  const scheduler = new ModelScheduler({
    maxQueuePerModel: settings.maxQueuePerModel,
    slotsFor: () => 1,
    startEngine: async (model) => {
      const engine = new ScriptedEngine(model, options.script ?? plainScript)
      engines.push(engine)
      return engine
    },
  })
  const keys = settings.auth ? new ApiKeys(settings.apiKeys, await KeyStore.open(settings.dataDir)) : undefined
  const basics: ServerBasics = {
    settings,
    folder,
    scheduler,
    keys,
    // Never the real hub: a closed port, unless the test names its stand-in (HEARTH_HF_ENDPOINT).
    downloads: new DownloadManager({ folder, hubEndpoint: options.env?.HEARTH_HF_ENDPOINT ?? 'http://127.0.0.1:9' }),
    log: (line) => lines.push(line),
    hardware: Promise.resolve({ backend: 'default', devices: [], llamaBuild: undefined, notBuilt: [] }),
    seal: ReasoningSeal.load(join(settings.dataDir, REASONING_KEY_FILE)),
  }
  if (options.mcp !== false) basics.mcp = options.mcp ?? (await McpHub.open(dataDir, (line) => lines.push(line)))
  const context: ServerContext = { ...basics, ...serverParts(basics) }
  const http = createServer(createApp(context))
  answerClientErrors(http)
  http.listen(0, settings.host)
  await once(http, 'listening')
  const { port } = http.address() as AddressInfo
  const ollama = settings.ollamaPort === undefined ? undefined : createServer(createOllamaApp(context))
  if (ollama) {
    ollama.listen(settings.ollamaPort, '127.0.0.1')
    await once(ollama, 'listening')
  }
  return {
    url: `http://${settings.host}:${port}`,
    ...(ollama ? { ollamaUrl: `http://127.0.0.1:${(ollama.address() as AddressInfo).port}` } : {}),
    apiKey: TEST_API_KEY,
    settings,
    context,
    engines,
    output: () => lines.join('\n'),
    async stop() {
      const closed = new Promise<void>((resolve) => http.close(() => resolve()))
      http.closeAllConnections()
      ollama?.close()
      ollama?.closeAllConnections()
      await Promise.all([scheduler.shutdown(), context.downloads.shutdown(), keys?.store?.flush(), context.mcp?.close()])
      await closed
    },
  }
}
