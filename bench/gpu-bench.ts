/**
 * What the GPU gives, wherever the engines were built for one (CUDA, Vulkan, Metal): prompt
 * processing and decode of the real-size model (TinyLlama-1.1B's shape, random weights) in Q4_K_M,
 * Q8_0 and F16, through
 * - Hearth with its defaults for a GPU (every layer llama.cpp fits on the device), one slot;
 * - upstream llama-server built from the same source without Hearth's patches, on the command line
 *   Hearth gives its own;
 * - and, for reference, upstream llama-bench on the same prompt and decode lengths (no HTTP, no
 *   chat template: the engine alone).
 * Two untimed rounds each (Node runs its fastest once warm), then the servers interleaved, medians.
 * Target: Hearth at least 0.97× llama-server on both figures.
 */
import { copyFileSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { findLlamaBuild, type LlamaBuild } from '../engines/builder/llama-build.ts'
import { llamaServerArgs } from '../engines/llama-server/llama-server-args.ts'
import { startTestServer } from '../test/support/server-process.ts'
import { startUpstreamProgram } from '../test/support/upstream-servers.ts'
import { fmt, median } from './bench-server.ts'
import { upstreamLlamaBuild } from './comparison-builds.ts'
import { llamaBench } from './llama-bench.ts'
import { realSizeModel, say, spec, stream, trainedContext, words, type Endpoint } from './upstream-bench.ts'

const WEIGHT_TYPES = ['Q4_K_M', 'Q8_0', 'F16'] as const
/** About 1,900 prompt tokens: most of the model's 2,048, so the batched kernels are what is timed. */
const PROMPT_WORDS = 1500
const DECODE_TOKENS = 128

interface Side {
  name: 'hearth' | 'upstream'
  endpoint: Endpoint
  stop: () => Promise<void>
}

export async function runGpuBench(runs: number): Promise<Record<string, Record<string, number | string>>> {
  const build = findLlamaBuild()
  if (!build) throw new Error('llama.cpp is not built on this machine: npm run build:engines')
  if (build.gpu === 'none') {
    console.log('\n# GPU: the engines here are built for the CPU only; nothing to measure')
    return {}
  }
  const upstream = await upstreamLlamaBuild(console.log, build.gpu)
  console.log(`\n# GPU (${build.gpu}) on the real-size model, one slot: Hearth | llama-server upstream (unpatched) | llama-bench upstream`)
  const results: Record<string, Record<string, number | string>> = {}
  for (const type of WEIGHT_TYPES) results[type] = await measureType(realSizeModel(build, type), runs, upstream)
  return results
}

async function measureType(file: string, runs: number, upstream: LlamaBuild): Promise<Record<string, number | string>> {
  const id = basename(file, '.gguf')
  const context = await trainedContext(file)
  const sides = [await hearthSide(file, id)]
  const figures: Record<string, number | string> = {}
  // Upstream may die on this file where Hearth's patches fix ggml (its AMX kernels): that is its figure.
  const other = await upstreamSide(upstream, file, id, context).catch((e: Error) => {
    const signal = /was killed by (\w+)/.exec(e.message)?.[1]
    return signal ? `killed by ${signal} while loading` : `did not start (${e.message.split('\n')[0]!.slice(0, 80)})`
  })
  if (typeof other === 'string') figures.upstream = other
  else sides.push(other)
  const fresh = () => ({ prompt: [] as number[], decode: [] as number[], beyondEngine: [] as number[], promptTokens: 0 })
  const samples = new Map(sides.map((s) => [s.name, fresh()]))
  try {
    // Two untimed rounds first: Hearth's server is Node, whose code runs its fastest once warm.
    for (let run = -2; run < runs; run++) {
      for (const side of sides) {
        const sample = run < 0 ? fresh() : samples.get(side.name)!
        // A prompt no cache holds (its first words are this run's own).
        const first = await stream(side.endpoint, say(words(PROMPT_WORDS, `${side.name}-${run}-${Math.random()}`)), 1)
        sample.promptTokens = first.promptTokens
        sample.prompt.push(((first.promptTokens - first.cachedTokens) * 1000) / first.ttftMs)
        // What the first token waited beyond the engine's own prompt time: the way there and back.
        sample.beyondEngine.push(first.ttftMs - first.enginePromptMs)
        sample.decode.push((await stream(side.endpoint, say(`run ${run}: tell a story`), DECODE_TOKENS)).decodePerSecond)
      }
    }
  } finally {
    for (const side of sides) await side.stop()
  }
  for (const [name, s] of samples) {
    figures[`${name}_prompt_tps`] = median(s.prompt)
    figures[`${name}_decode_tps`] = median(s.decode)
    figures[`${name}_beyond_engine_ms`] = median(s.beyondEngine)
  }
  const promptTokens = samples.get('hearth')!.promptTokens
  // Every layer on the GPU, flash attention on.
  const reference = llamaBench(upstream, file, { promptTokens, decodeTokens: DECODE_TOKENS, repetitions: 3, args: ['-ngl', '99', '-fa', '1'] })
  figures.llama_bench_prompt_tps = reference.prompt
  figures.llama_bench_decode_tps = reference.decode
  const row = (what: string, key: 'prompt' | 'decode') => {
    const hearth = figures[`hearth_${key}_tps`] as number
    const server = figures[`upstream_${key}_tps`]
    const ratio = typeof server === 'number' ? (figures[`${key}_ratio`] = hearth / server) : undefined
    const versus =
      ratio === undefined
        ? `llama-server ${figures.upstream}`
        : `llama-server ${fmt(server as number, 0).padStart(7)} tok/s  ratio ${fmt(ratio, 3)} (target ≥ 0.97)`
    console.log(
      `${id.padEnd(28)} ${what.padEnd(22)} hearth ${fmt(hearth, 0).padStart(7)}  ${versus}  llama-bench ${typeof figures[`llama_bench_${key}_tps`] === 'number' ? fmt(figures[`llama_bench_${key}_tps`] as number, 0) : figures[`llama_bench_${key}_tps`]}`,
    )
  }
  row(`prompt (${promptTokens} tokens)`, 'prompt')
  row(`decode (${DECODE_TOKENS} tokens)`, 'decode')
  // The engines' own prompt times vary from run to run; what each first token waited beyond its
  // engine's time does not, and the difference is what Hearth's layer costs a request.
  if (typeof figures.upstream_beyond_engine_ms === 'number') {
    figures.hearth_added_ms = (figures.hearth_beyond_engine_ms as number) - figures.upstream_beyond_engine_ms
    console.log(
      `${''.padEnd(28)} first token beyond the engine's prompt time: hearth ${fmt(figures.hearth_beyond_engine_ms as number, 2)} ms, llama-server ${fmt(figures.upstream_beyond_engine_ms, 2)} ms: Hearth adds ${fmt(figures.hearth_added_ms, 2)} ms`,
    )
  }
  return figures
}

/** Hearth serving `file` with its own defaults for this machine's GPU, one slot. */
async function hearthSide(file: string, id: string): Promise<Side> {
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-gpu-bench-'))
  copyFileSync(file, join(modelsDir, `${id}.gguf`))
  const server = await startTestServer({ modelsDir, threads: 1, args: ['--parallel', '1'] })
  const endpoint = { url: server.url, headers: { authorization: `Bearer ${server.apiKey}` }, model: id }
  await stream(endpoint, say('warm up'), 2)
  const get = async (path: string) => (await fetch(`${server.url}${path}`, { headers: endpoint.headers })).json()
  const listing = (await get('/api/models')) as { models: Array<{ id: string; devices: string[] }> }
  const system = (await get('/api/system')) as { backend?: string; devices?: unknown }
  console.log(
    `${id}: Hearth placed it on ${listing.models.find((m) => m.id === id)?.devices.join(' + ')}; backend ${system.backend}, devices ${JSON.stringify(system.devices)}`,
  )
  return { name: 'hearth', endpoint, stop: async () => void (await server.stop()) }
}

/** Upstream llama-server with the command line Hearth gives its own engine on a GPU (layers: llama.cpp's fit). */
async function upstreamSide(build: LlamaBuild, file: string, id: string, context: number): Promise<Side> {
  const server = await startUpstreamProgram(build, 'llama-server', llamaServerArgs({ ...spec(id, file, 1, context), gpuLayers: -1 }))
  const endpoint = { url: server.url, headers: {}, model: id }
  await stream(endpoint, say('warm up'), 2)
  return { name: 'upstream', endpoint, stop: () => server.stop() }
}
