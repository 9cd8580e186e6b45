/** The server a benchmark talks to: one given by --base-url, or ours started on a temporary folder. */

import { copyFileSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { startTestServer } from '../test/support/server-process.ts'

export interface BenchTarget {
  baseUrl: string
  apiKey: string
  close(): Promise<void>
}

export async function benchTarget(options: {
  baseUrl?: string
  apiKey?: string
  modelFiles: string[]
  threads: number
  /** Server flags for our own server (ignored with --base-url). */
  extraArgs?: string[]
}): Promise<BenchTarget> {
  if (options.baseUrl) return { baseUrl: options.baseUrl.replace(/\/$/, ''), apiKey: options.apiKey ?? '', close: async () => {} }
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-bench-'))
  for (const file of options.modelFiles) copyFileSync(file, join(modelsDir, basename(file)))
  // A separate process, as `npm run serve` runs it, so the benchmark's own client work is not
  // counted against the server.
  const server = await startTestServer({ modelsDir, threads: options.threads, args: options.extraArgs })
  return {
    baseUrl: server.url,
    apiKey: server.apiKey,
    close: async () => {
      await server.stop()
    },
  }
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

export function fmt(n: number, digits = 1): string {
  return n.toFixed(digits)
}
