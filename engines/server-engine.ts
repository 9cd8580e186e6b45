/** What every engine that is a server program (llama-server, whisper-server) does the same way: it is its process. */
import type { Engine, RunOptions } from './engine.ts'
import type { EngineJob, EngineModelInfo, EngineResult } from './engine-jobs.ts'
import type { EngineServerProcess } from './engine-server-process.ts'

export abstract class ServerEngine implements Engine {
  protected constructor(
    protected readonly server: EngineServerProcess,
    readonly info: EngineModelInfo,
  ) {}

  get pid(): number | undefined {
    return this.server.pid
  }

  get alive(): boolean {
    return this.server.alive
  }

  onExit(listener: () => void): void {
    this.server.onExit(listener)
  }

  stop(): Promise<void> {
    return this.server.stop()
  }

  /** Stops the engine at once; what it was doing ends with an error that gives `reason`. */
  stopBecause(reason: string): void {
    this.server.killBecause(reason)
  }

  async memoryBytes(): Promise<number> {
    return this.server.residentBytes()
  }

  abstract run(job: EngineJob, options?: RunOptions): Promise<EngineResult>
}
