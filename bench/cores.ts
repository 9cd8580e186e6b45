/**
 * Where a comparison runs: both engines (ours and upstream) on the last core, Hearth's own Node
 * process and the benchmark's client on the others, so the engines never share a core with them.
 */
import { execFileSync } from 'node:child_process'
import { availableParallelism } from 'node:os'
import { engineProcessIds } from '../test/support/process-stats.ts'

export const ENGINE_CORE = String(availableParallelism() - 1)
export const CLIENT_CORES = availableParallelism() > 1 ? `0-${availableParallelism() - 2}` : '0'
const ALL_CORES = `0-${availableParallelism() - 1}`

/** Every thread of a running process onto `cores` (taskset). */
export function pinProcess(pid: number, cores: string): void {
  execFileSync('taskset', ['-a', '-p', '-c', cores, String(pid)], { stdio: 'ignore' })
}

/** A Hearth server's engine processes onto the engine core; returns their pids. */
export function pinEngines(serverPid: number): number[] {
  const pids = engineProcessIds(serverPid)
  if (pids.length === 0) throw new Error('no engine process to pin')
  for (const pid of pids) pinProcess(pid, ENGINE_CORE)
  return pids
}

/**
 * This process (the benchmark's client) on the client cores while `measure` runs, so it never takes
 * the engines' core from them; on every core again after (quantizing and builds use them all).
 */
export async function onClientCores<T>(measure: () => Promise<T>): Promise<T> {
  pinProcess(process.pid, CLIENT_CORES)
  try {
    return await measure()
  } finally {
    pinProcess(process.pid, ALL_CORES)
  }
}
