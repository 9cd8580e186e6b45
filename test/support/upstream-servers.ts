/**
 * llama.cpp's own llama-server and whisper.cpp's whisper-server, started directly from the engine
 * builds (no Hearth in between), to compare Hearth's answers with the programs it runs.
 */
import { spawn } from 'node:child_process'
import { createServer } from 'node:net'
import { findLlamaBuild, programPath, type LlamaBuild } from '../../engines/builder/llama-build.ts'
import { findWhisperBuild } from '../../engines/builder/whisper-build.ts'

export interface UpstreamServer {
  url: string
  pid: number
  /** SIGTERM by default; SIGKILL for a crash. */
  stop(signal?: NodeJS.Signals): Promise<void>
  /** The signal that killed it, once it is dead of one. */
  killedBy(): string | null
}

/** Undefined when llama.cpp has not been built on this machine (the server then answers its models 503). */
export const llamaBuild = findLlamaBuild()
export const whisperBuild = findWhisperBuild()

export function startUpstreamLlamaServer(args: string[]): Promise<UpstreamServer> {
  if (!llamaBuild) throw new Error('llama.cpp is not built here: npm run build:engines')
  return startUpstreamProgram(llamaBuild, 'llama-server', [...args, '--no-webui'])
}

export function startUpstreamWhisperServer(args: string[]): Promise<UpstreamServer> {
  if (!whisperBuild) throw new Error('whisper.cpp is not built here: npm run build:engines')
  return startUpstreamProgram(whisperBuild, 'whisper-server', args)
}

/** `program` of `build` on a free loopback port, ready when its /health answers; `cpus` pins it (taskset) for benchmarks. */
export async function startUpstreamProgram(
  build: LlamaBuild,
  program: string,
  args: string[],
  options: { cpus?: string; port?: number; env?: Record<string, string> } = {},
): Promise<UpstreamServer> {
  const port =
    options.port ??
    (await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as { port: number }
        probe.close(() => resolve(port))
      })
    }))
  const command = [programPath(build.dir, program), ...args, '--host', '127.0.0.1', '--port', String(port)]
  const pinned = options.cpus ? ['taskset', '-c', options.cpus, ...command] : command
  const child = spawn(pinned[0]!, pinned.slice(1), { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...options.env } })
  let log = ''
  child.stderr!.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4000)))
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; ; i++) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`${program} ${child.signalCode ? `was killed by ${child.signalCode}` : `exited with ${child.exitCode}`}: ${log}`)
    const ok = await fetch(`${url}/health`).then(
      (r) => r.status === 200,
      () => false,
    )
    if (ok) break
    if (i > 2000) throw new Error(`${program} did not start: ${log}`)
    await new Promise((r) => setTimeout(r, 15))
  }
  return {
    url,
    pid: child.pid!,
    killedBy: () => child.signalCode,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      child.kill(signal)
      await exited
    },
  }
}
