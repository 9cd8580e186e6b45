/**
 * Upstream's llama-bench on a model file: what the engine itself reads and writes, with no server
 * and no HTTP in front, for the benchmarks' reference columns.
 */
import { execFileSync } from 'node:child_process'
import { programPath, type LlamaBuild } from '../engines/builder/llama-build.ts'

export interface LlamaBenchRun {
  promptTokens: number
  /** 0 for the prompt alone. */
  decodeTokens: number
  repetitions: number
  /** More of llama-bench's options (`-ngl 99`, `-fa 1`). */
  args?: readonly string[]
  /** Cores to pin it to (taskset); unpinned without. */
  cpus?: string
}

/** Prompt and decode tokens/s on one thread, or how the run ended (`killed by SIGILL`, `failed`). */
export function llamaBench(build: LlamaBuild, file: string, run: LlamaBenchRun): { prompt: number | string; decode: number | string } {
  const bench = [
    programPath(build.dir, 'llama-bench'),
    '-m',
    file,
    '-p',
    String(run.promptTokens),
    '-n',
    String(run.decodeTokens),
    '-r',
    String(run.repetitions),
    '-t',
    '1',
    ...(run.args ?? []),
    '-o',
    'json',
  ]
  const [command, ...args] = run.cpus ? ['taskset', '-c', run.cpus, ...bench] : bench
  let out
  try {
    out = execFileSync(command!, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
  } catch (e) {
    const signal = (e as { signal?: string }).signal
    const how = signal ? `killed by ${signal}` : 'failed'
    return { prompt: how, decode: how }
  }
  const tests = JSON.parse(out) as Array<{ n_prompt: number; n_gen: number; avg_ts: number }>
  return { prompt: tests.find((t) => t.n_prompt > 0)?.avg_ts ?? NaN, decode: tests.find((t) => t.n_gen > 0)?.avg_ts ?? NaN }
}
