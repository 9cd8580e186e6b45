/**
 * llama.cpp's own llama-server, started directly from the engine build (no Hearth in between), to
 * compare Hearth's answers with the program it runs.
 */
import { spawn } from 'node:child_process'
import { createServer } from 'node:net'
import { findLlamaBuild, programPath } from '../../native-models/llama-server/llama-build.ts'

export interface UpstreamServer {
  url: string
  stop(): Promise<void>
}

/** Undefined when llama.cpp has not been built on this machine (the server then runs the fallback binding). */
export const llamaBuild = findLlamaBuild()

export async function startUpstreamLlamaServer(args: string[]): Promise<UpstreamServer> {
  if (!llamaBuild) throw new Error('llama.cpp is not built here: npm run build:engines')
  const port = await new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number }
      probe.close(() => resolve(port))
    })
  })
  const child = spawn(programPath(llamaBuild.dir, 'llama-server'), [...args, '--host', '127.0.0.1', '--port', String(port), '--no-webui'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let log = ''
  child.stderr!.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4000)))
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`llama-server exited: ${log}`)
    const ok = await fetch(`${url}/health`).then((r) => r.status === 200, () => false)
    if (ok) break
    if (i > 2000) throw new Error(`llama-server did not start: ${log}`)
    await new Promise((r) => setTimeout(r, 15))
  }
  return {
    url,
    async stop() {
      child.kill('SIGTERM')
      await exited
    },
  }
}
