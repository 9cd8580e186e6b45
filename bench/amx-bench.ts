/**
 * What AMX's matrix units give on a Xeon that has them (issues 34 and 54): prompt processing and
 * decode of the real-size model (TinyLlama-1.1B's shape, random weights) in Q8_0, Q4_0, Q4_K_M and
 * Q4_1 (SmolLM2's file as shipped), through
 * - Hearth on its own build (AMX on, with the ggml-01 patch);
 * - Hearth on its build without AMX (comparison-builds.ts: AVX-512 and its repacked weights, what
 *   install builds where AMX crashes);
 * - upstream llama-server built from the same source without Hearth's patches, which crashes on
 *   these files here: the crash is recorded as its figure (`--skip-upstream` leaves it and its
 *   build out);
 * - and, for reference, llama-bench from Hearth's build on the same number of prompt tokens (no
 *   HTTP, no server): what the engine itself reads, which Hearth's prompt should match.
 * One thread, every engine pinned to the engine core, runs interleaved, medians. Targets (issue 54):
 * Hearth's prompt within 5 % of llama-bench's, AMX at least 2.5× the prompt throughput of the path
 * without it for Q4_0 and Q8_0 (2× for the others), and decode no slower. Hearth's prompt is read
 * as the client sees it (prompt tokens over the time to the first token, which includes that
 * token's own decode) and as its engine timed it (`timings.prompt_ms`).
 */
import { copyFileSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { findLlamaBuild, type LlamaBuild } from '../engines/builder/llama-build.ts'
import { llamaServerArgs } from '../engines/llama-server/llama-server-args.ts'
import { startTestServer, type TestServer } from '../test/support/server-process.ts'
import { startUpstreamProgram } from '../test/support/upstream-servers.ts'
import { fmt, median } from './bench-server.ts'
import { llamaBuildWithoutAmx, upstreamLlamaBuild } from './comparison-builds.ts'
import { llamaBench } from './llama-bench.ts'
import { CLIENT_CORES, ENGINE_CORE, pinEngines, pinProcess } from './cores.ts'
import { realSizeModel, say, spec, stream, trainedContext, words, type Endpoint } from './upstream-bench.ts'

export const AMX_WEIGHT_TYPES = ['Q8_0', 'Q4_0', 'Q4_K_M', 'Q4_1'] as const
/** The least prompt gain from AMX each weight type is held to. */
const MIN_PROMPT_GAIN: Record<string, number> = { Q8_0: 2.5, Q4_0: 2.5, Q4_K_M: 2, Q4_1: 2 }
/** Hearth's prompt against llama-bench's on the same build and length. */
const MIN_OF_LLAMA_BENCH = 0.95
const PROMPT_WORDS = 660

interface Side {
  name: string
  endpoint: Endpoint
  stop: () => Promise<void>
}

export interface AmxBenchOptions {
  runs: number
  /** Which of AMX_WEIGHT_TYPES (all by default). */
  types?: readonly string[]
  /** Leave out upstream llama-server (and its build). */
  skipUpstream?: boolean
}

export async function runAmxBench({
  runs,
  types = AMX_WEIGHT_TYPES,
  skipUpstream = false,
}: AmxBenchOptions): Promise<Record<string, Record<string, number | string>>> {
  const unknown = types.filter((t) => !(AMX_WEIGHT_TYPES as readonly string[]).includes(t))
  if (unknown.length) throw new Error(`--amx-types: ${unknown.join(', ')} (known: ${AMX_WEIGHT_TYPES.join(', ')})`)
  const build = findLlamaBuild()
  if (!build) throw new Error('llama.cpp is not built on this machine: npm run build:engines')
  if (!/\bamx_int8\b/.test(readFileSync('/proc/cpuinfo', 'utf8')) || !build.cpuFeatures.includes('AMX_INT8')) {
    console.log('\n# AMX: this CPU has no AMX (or the build left it out); nothing to measure')
    return {}
  }
  const withoutAmx = await llamaBuildWithoutAmx()
  const upstream = skipUpstream ? undefined : await upstreamLlamaBuild()
  console.log(
    `\n# AMX on the real-size model, 1 thread, engines on core ${ENGINE_CORE}: Hearth (AMX) | Hearth without AMX | llama-bench (AMX)${upstream ? ' | llama-server upstream (unpatched)' : ''}`,
  )
  const results: Record<string, Record<string, number | string>> = {}
  for (const type of types) {
    const file = realSizeModel(build, type)
    results[type] = await measureType(file, runs, build, withoutAmx!, upstream)
  }
  return results
}

async function measureType(
  file: string,
  runs: number,
  build: LlamaBuild,
  withoutAmx: LlamaBuild,
  upstream: LlamaBuild | undefined,
): Promise<Record<string, number | string>> {
  const id = basename(file, '.gguf')
  const type = id.slice(id.lastIndexOf('-') + 1)
  const figures: Record<string, number | string> = {}
  // Upstream first, alone: where it crashes there is nothing more to ask of it.
  if (upstream) figures.upstream = await upstreamOutcome(upstream, file, id, await trainedContext(file))
  const sides = [await hearthSide('hearth', file, id), await hearthSide('hearth-without-amx', file, id, withoutAmx)]
  try {
    const samples = new Map(sides.map((s) => [s.name, { prompt: [] as number[], enginePrompt: [] as number[], decode: [] as number[] }]))
    const reference: number[] = []
    for (let run = 0; run < runs; run++) {
      let promptTokens = 0
      for (const side of sides) {
        // A prompt no cache holds (its first words are this run's own).
        const first = await stream(side.endpoint, say(words(PROMPT_WORDS, `${side.name}-${run}-${Math.random()}`)), 1)
        promptTokens = first.promptTokens - first.cachedTokens
        samples.get(side.name)!.prompt.push((promptTokens * 1000) / first.ttftMs)
        samples.get(side.name)!.enginePrompt.push((promptTokens * 1000) / first.enginePromptMs)
        samples.get(side.name)!.decode.push((await stream(side.endpoint, say(`run ${run}: tell a story`), 32)).decodePerSecond)
      }
      const measured = llamaBench(build, file, { promptTokens, decodeTokens: 0, repetitions: 1, cpus: ENGINE_CORE }).prompt
      if (typeof measured !== 'number') throw new Error(`llama-bench on ${id}: ${measured}`)
      reference.push(measured)
    }
    const engineItself = median(reference)
    figures.llama_bench_prompt_tps = engineItself
    for (const [name, s] of samples) {
      figures[`${name}_prompt_tps`] = median(s.prompt)
      figures[`${name}_engine_prompt_tps`] = median(s.enginePrompt)
      figures[`${name}_decode_tps`] = median(s.decode)
    }
    const promptGain = (figures.hearth_prompt_tps as number) / (figures['hearth-without-amx_prompt_tps'] as number)
    const decodeRatio = (figures.hearth_decode_tps as number) / (figures['hearth-without-amx_decode_tps'] as number)
    figures.amx_prompt_gain = promptGain
    figures.amx_decode_ratio = decodeRatio
    const ofEngine = (figures.hearth_prompt_tps as number) / engineItself
    figures.prompt_of_llama_bench = ofEngine
    const upstreamNote = figures.upstream === undefined ? '' : `  llama-server: ${figures.upstream}`
    const row = (what: string, unit: string, key: 'prompt' | 'decode', ratio: number, target: string) =>
      console.log(
        `${id.padEnd(28)} ${what.padEnd(7)} hearth ${fmt(figures[`hearth_${key}_tps`] as number, 1).padStart(7)}  without AMX ${fmt(figures[`hearth-without-amx_${key}_tps`] as number, 1).padStart(7)} ${unit}  ratio ${fmt(ratio, 2)} (target ${target})${upstreamNote}`,
      )
    row('prompt', 'tok/s', 'prompt', promptGain, `≥ ${MIN_PROMPT_GAIN[type] ?? 2}`)
    row('decode', 'tok/s', 'decode', decodeRatio, '≥ 1.0')
    console.log(
      `${id.padEnd(28)} prompt  llama-bench (Hearth's build, AMX) ${fmt(engineItself, 1)} tok/s: Hearth reads at ${fmt(ofEngine, 2)} of it (target ≥ ${MIN_OF_LLAMA_BENCH}); its engine timed ${fmt(figures.hearth_engine_prompt_tps as number, 1)} tok/s`,
    )
  } finally {
    for (const side of sides) await side.stop()
  }
  return figures
}

/** Hearth serving `file` on `build` (its own by default), its engine pinned to the engine core once loaded. */
async function hearthSide(name: string, file: string, id: string, build?: LlamaBuild): Promise<Side> {
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-amx-bench-'))
  copyFileSync(file, join(modelsDir, `${id}.gguf`))
  const server: TestServer = await startTestServer({
    modelsDir,
    threads: 1,
    args: ['--parallel', '1'],
    env: build ? { HEARTH_LLAMA_BUILD_DIR: build.dir } : {},
  })
  pinProcess(server.process.pid!, CLIENT_CORES)
  const endpoint = { url: server.url, headers: { authorization: `Bearer ${server.apiKey}` }, model: id }
  await stream(endpoint, say('warm up'), 2)
  pinEngines(server.process.pid!)
  return { name, endpoint, stop: async () => void (await server.stop()) }
}

/** What upstream llama-server does with `file`: its prompt throughput, or how it died. */
async function upstreamOutcome(build: LlamaBuild, file: string, id: string, context: number): Promise<string> {
  let server
  try {
    server = await startUpstreamProgram(build, 'llama-server', llamaServerArgs(spec(id, file, 1, context), { cpuOnly: true }), { cpus: ENGINE_CORE })
  } catch (e) {
    const signal = /was killed by (\w+)/.exec((e as Error).message)?.[1]
    return signal ? `killed by ${signal} while loading` : `did not load (${(e as Error).message.split('\n')[0]!.slice(0, 80)})`
  }
  try {
    const endpoint = { url: server.url, headers: {}, model: id }
    const first = await stream(endpoint, say(words(PROMPT_WORDS, `upstream-${Math.random()}`)), 1)
    return `${fmt(((first.promptTokens - first.cachedTokens) * 1000) / first.ttftMs, 1)} tok/s prompt`
  } catch (e) {
    await new Promise((resolve) => setTimeout(resolve, 200))
    const signal = server.killedBy()
    return signal ? `killed by ${signal} on its first batch` : `failed the request (${(e as Error).message.slice(0, 80)})`
  } finally {
    await server.stop().catch(() => undefined)
  }
}
