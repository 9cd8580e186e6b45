/** What a test can see of a server process from outside: its engine children, memory and open files (Linux /proc). */
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'

/**
 * The engine processes a server started: llama-server per chat or embedding model, whisper-server
 * per speech model (its other children, such as tsx's esbuild, are not engines).
 */
export function engineProcessIds(serverPid: number | undefined): number[] {
  if (serverPid === undefined) return []
  try {
    const out = execFileSync('pgrep', ['-P', String(serverPid), '-f', '/(llama|whisper)-server ']).toString()
    return out
      .trim()
      .split('\n')
      .filter(Boolean)
      .map(Number)
      .sort((a, b) => a - b)
  } catch {
    return []
  }
}

/** Resident memory in bytes, from /proc/<pid>/status; undefined when the process is gone. */
export function residentBytes(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const kb = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1]
    return kb === undefined ? undefined : Number(kb) * 1024
  } catch {
    return undefined
  }
}

export function openFileCount(pid: number): number | undefined {
  try {
    return readdirSync(`/proc/${pid}/fd`).length
  } catch {
    return undefined
  }
}

export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}
