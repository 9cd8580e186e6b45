import type { DownloadManager } from '../../models/downloads/download-manager.ts'
import type { ModelFolder } from '../../models/catalog/model-folder.ts'
import type { EngineBuildInfo } from '../../engines/engine-jobs.ts'
import type { CpuFallback } from '../../engines/llama-server/cpu-faults.ts'
import type { BackendDevice } from '../../engines/llama-server/llama-devices.ts'
import type { ModelScheduler } from '../../engines/scheduler/model-scheduler.ts'
import type { RemotePool } from '../../engines/remote/remote-pool.ts'
import type { ApiKeys } from './services/keys/api-keys.ts'
import type { Lending } from './services/lending/lend-tunnel.ts'
import type { McpHub } from './services/mcp/mcp-hub.ts'
import type { ReasoningSeal } from './services/reasoning-seal.ts'
import type { ServerSettings } from './settings.ts'

/** What the routes share: built once by startServer (or by a test) and handed to createApp. */
export interface ServerContext {
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
  /** This machine's memory lent to other Hearths (`--lend`); undefined when it lends none. */
  lending?: Lending
  /** Seals the thinking clients carry and send back, under this server's key (`<dataDir>/reasoning-key`). */
  seal: ReasoningSeal
}

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
