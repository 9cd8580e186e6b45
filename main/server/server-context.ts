import type { DownloadManager } from '../../models/downloads/download-manager.ts'
import type { ModelFolder } from '../../models/catalog/model-folder.ts'
import type { EngineBuildInfo } from '../../engines/engine-jobs.ts'
import type { CpuFallback } from '../../engines/llama-server/cpu-faults.ts'
import type { BackendDevice } from '../../engines/llama-server/llama-devices.ts'
import type { ModelScheduler } from '../../engines/scheduler/model-scheduler.ts'
import type { RemotePool } from '../../engines/remote/remote-pool.ts'
import type { ApiKeys } from './services/keys/api-keys.ts'
import type { Lending } from './services/lending/lend-tunnel.ts'
import type { PooledModels } from '../../engines/pool/pooled-engine.ts'
import type { McpHub } from './services/mcp/mcp-hub.ts'
import type { ReasoningSeal } from './services/reasoning-seal.ts'
import type { ServerSettings } from './settings.ts'
import type { RequestHistory } from './http/request-history.ts'
import type { ServerMetrics } from './http/metrics.ts'
import type { QuotaGate } from './services/keys/key-quotas.ts'
import type { DocumentLibrary } from './services/documents/document-library.ts'
import type { AnswerPipeline } from './services/pipeline/answer-pipeline.ts'
import type { ResponseStore } from './protocols/responses/response-store.ts'
import type { OllamaBlobs } from './protocols/ollama/ollama-blobs.ts'
import type { AudioScratch } from './protocols/openai/audio-scratch.ts'

/** What startServer (or a test) gathers first: settings, models, engines, keys. */
export interface ServerBasics {
  settings: ServerSettings
  folder: ModelFolder
  scheduler: ModelScheduler
  /** Undefined when auth is off. */
  keys: ApiKeys | undefined
  /** Model downloads running in the background (pull). */
  downloads: DownloadManager
  log: (line: string) => void
  /** The llama.cpp build in use and the devices it sees, once known. */
  hardware: Promise<Hardware>
  /** The remote servers the catalog's remote models run on, and their health. */
  remotes?: RemotePool
  /** The MCP servers of `<dataDir>/mcp.json`; /api/mcp answers 503 without it. */
  mcp?: McpHub
  /** Models that crashed llama.cpp on this CPU and now run without the kernels that did (cpu-faults.ts). */
  cpuFallbacks?: () => CpuFallback[]
  /** Where the Ollama port listens, once it does (`--ollama-port`). */
  ollamaUrl?: string
  /** Why the Ollama port is not served where it was asked for (Ollama itself holds it, say). */
  ollamaNote?: string
  /** This machine's memory lent to other Hearths (`--lend`); undefined when it lends none. */
  lending?: Lending
  /** The pooled models' lenders' last word (docs/pool.md); absent in tests without pooled models. */
  pools?: PooledModels
  /** Seals the thinking clients carry and send back, under this server's key (`<dataDir>/reasoning-key`). */
  seal: ReasoningSeal
}

/**
 * The objects that keep state between requests, built once per server (`serverParts` in app.ts)
 * and shared by both of its ports: one request log, one set of metrics, one quota gate, one store
 * of each kind, one answer pipeline.
 */
export interface ServerParts {
  requests: RequestHistory
  metrics: ServerMetrics
  gate: QuotaGate | undefined
  /** The documents `/v1/files` keeps and conversations name. */
  library: DocumentLibrary
  pipeline: AnswerPipeline
  /** Stored Responses, for `previous_response_id` and reading back. */
  responses: ResponseStore
  /** Files `ollama create` uploads before it names them. */
  ollamaBlobs: OllamaBlobs
  /** Decoded audio on its way to whisper. */
  audioScratch: AudioScratch
}

/** What the routes share: handed to createApp and createOllamaApp. */
export type ServerContext = ServerBasics & ServerParts

/** The GPU toolkit the llama.cpp build in use drives, where it sees a GPU; `default` is the CPU (or Metal on macOS). */
export type GpuBackend = 'default' | 'cuda' | 'vulkan'

export interface Hardware {
  backend: GpuBackend
  devices: BackendDevice[]
  /** llama.cpp's own build for this machine; undefined when it has not been built here. */
  llamaBuild: EngineBuildInfo | undefined
  /** whisper.cpp's, likewise (tests may leave it out). */
  whisperBuild?: EngineBuildInfo | undefined
  /** One sentence per engine that is not built here: what cannot run, and the command that builds it. */
  notBuilt: string[]
}
