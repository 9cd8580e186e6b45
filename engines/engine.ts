/**
 * What the scheduler drives: one loaded model behind its engine (llama-server or whisper-server
 * built for this machine, see server-engine.ts; or a remote server, see remote/remote-engine.ts).
 */
import type { EngineJob, EngineModelInfo, EngineResult, JobProgress } from './engine-jobs.ts'

export interface RunOptions {
  onProgress?: (progress: JobProgress) => void
  signal?: AbortSignal
}

/** What the scheduler needs from a loaded model; tests may hand it fakes. */
export interface Engine {
  readonly pid: number | undefined
  readonly info: EngineModelInfo
  readonly alive: boolean
  run(job: EngineJob, options?: RunOptions): Promise<EngineResult>
  /** Resident memory of the engine process, as it reports it. */
  memoryBytes(): Promise<number>
  stop(): Promise<void>
  onExit(listener: () => void): void
}
