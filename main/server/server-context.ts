import type { DownloadManager } from '../../native-models/downloads/download-manager.ts'
import type { ModelFolder } from '../../native-models/catalog/model-folder.ts'
import type { BackendDevice, EngineBuildInfo, GpuBackend } from '../../native-models/engine/engine-protocol.ts'
import type { ModelScheduler } from '../../native-models/scheduler/model-scheduler.ts'
import type { RemotePool } from '../../native-models/remote/remote-pool.ts'
import type { ApiKeys } from './keys/api-keys.ts'
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
}

export interface Hardware {
  backend: GpuBackend
  devices: BackendDevice[]
  /** llama.cpp's own build for this machine; undefined when it has not been built here. */
  llamaBuild: EngineBuildInfo | undefined
  /** One sentence per engine that is not built here: what cannot run, and the command that builds it. */
  notBuilt: string[]
}
