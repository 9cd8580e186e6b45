/**
 * Engine processes in the desktop app run as Electron utility processes (Chromium's sandboxable
 * service processes) rather than Node forks. This adapter makes a UtilityProcess look like the
 * part of a ChildProcess that native-models/engine/engine-process.ts uses (message, exit, error,
 * send, kill, stdout/stderr), so the engine protocol and the handle stay the same; the child side
 * is engine-utility-entry.ts.
 *
 * It plugs in through startServer's `spawnEngine` option (main.ts).
 */
import { EventEmitter } from 'node:events'
import type { ForkOptions, UtilityProcess } from 'electron'
import type { EngineChild } from '../../native-models/engine/engine-process.ts'

export type UtilityFork = (modulePath: string, args?: string[], options?: ForkOptions) => UtilityProcess

class UtilityEngineChild extends EventEmitter implements EngineChild {
  private exited = false

  constructor(private readonly child: UtilityProcess) {
    super()
    child.on('message', (message: unknown) => this.emit('message', message))
    child.on('exit', (code: number) => {
      this.exited = true
      this.emit('exit', code, null)
    })
    child.on('error', (type: string, location: string) => this.emit('error', new Error(`utility process ${type} at ${location}`)))
  }

  get pid(): number | undefined {
    return this.child.pid
  }

  get stdout(): NodeJS.ReadableStream | null {
    return this.child.stdout
  }

  get stderr(): NodeJS.ReadableStream | null {
    return this.child.stderr
  }

  get connected(): boolean {
    return !this.exited
  }

  send(message: Parameters<EngineChild['send']>[0]): boolean {
    if (this.exited) return false
    this.child.postMessage(message)
    return true
  }

  /** A utility process has one way to die; the signal is accepted for ChildProcess's sake. */
  kill(_signal?: NodeJS.Signals): boolean {
    return this.exited ? false : this.child.kill()
  }
}

export function forkUtilityEngine(fork: UtilityFork, entryPath: string, env: NodeJS.ProcessEnv = process.env): EngineChild {
  const child = fork(entryPath, [], { serviceName: 'Hearth model engine', stdio: 'pipe', env })
  return new UtilityEngineChild(child)
}
