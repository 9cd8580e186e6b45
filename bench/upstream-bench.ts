/**
 * Hearth against the program it runs: llama.cpp's own llama-server, built from the same pinned
 * source with the same options, on the same model file, with the same command line (Hearth's
 * llama-server-args), one inference thread each, both engines pinned to the same core (taskset),
 * runs interleaved (each side first in turn), medians. Hearth's own Node process and this client
 * share the other core.
 *
 * Figures and targets (issue 11):
 * - real-size model (TinyLlama-1.1B shape, random weights, Q4_K_M): decode ≥ 0.97×, prompt
 *   processing of a ≈700-token prompt ≥ 0.97×, 4 concurrent streams ≥ 0.95×; second turn's first
 *   token ≤ 1.1× llama-server's and ≥ 5× faster than the first turn's; after an unload and reload
 *   ≤ 1.5× llama-server's warm second turn;
 * - stories260K: first token ≤ +3 ms, CPU per token ≤ 1.10×;
 * - embeddings (256 texts, one request) ≥ 0.95×.
 */
import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { realModelPath } from '../test/support/real-models/catalog.ts'
import { readModelFileHeader } from '../models/catalog/model-file-header.ts'
import type { EngineLoadSpec } from '../engines/engine-jobs.ts'
import { engineCacheDir, findLlamaBuild, programPath, type LlamaBuild } from '../engines/builder/llama-build.ts'
import { upstreamLlamaBuild } from './comparison-builds.ts'
import { llamaServerArgs } from '../engines/llama-server/llama-server-args.ts'
import { writeRealSizeLlama } from '../test/support/real-size-model.ts'
import { startTestServer, type TestServer } from '../test/support/server-process.ts'
import { startUpstreamProgram } from '../test/support/upstream-servers.ts'
import { fmt, median } from './bench-server.ts'
import { CLIENT_CORES, ENGINE_CORE, onClientCores, pinEngines, pinProcess } from './cores.ts'

export interface Endpoint {
  url: string
  headers: Record<string, string>
  model: string
}

interface Stream {
  ttftMs: number
  /** The engine's own time for the prompt (its `timings.prompt_ms`): the first token's wait, less the way to and from it. */
  enginePromptMs: number
  decodePerSecond: number
  promptTokens: number
  cachedTokens: number
  completionTokens: number
}

/** The model file the real-size figures use, made once and kept in the engine cache. */
export function realSizeModel(build: LlamaBuild, quantization = 'Q4_K_M'): string {
  return cachedBenchModel(build, 'random-tinyllama-1.1b', quantization, 'a random-weight TinyLlama-1.1B-shaped model (F16, 2.2 GB)', writeRealSizeLlama)
}

/**
 * A benchmark model in the engine cache (`bench-models/<name>-<quantization>.gguf`), made once:
 * `write` writes it as F16 (kept, so each further quantization starts from it), and the built
 * llama-quantize quantizes it.
 */
export function cachedBenchModel(build: LlamaBuild, name: string, quantization: string, what: string, write: (f16Path: string) => void): string {
  const dir = join(engineCacheDir(), 'bench-models')
  const path = join(dir, `${name}-${quantization}.gguf`)
  if (existsSync(path)) return path
  mkdirSync(dir, { recursive: true })
  const f16 = join(dir, `${name}-F16.gguf`)
  if (!existsSync(f16)) {
    console.log(`writing ${what}…`)
    write(`${f16}.partial`)
    renameSync(`${f16}.partial`, f16)
  }
  console.log(`quantizing ${name} to ${quantization}…`)
  execFileSync(programPath(build.dir, 'llama-quantize'), [f16, `${path}.partial`, quantization, String(availableParallelism())], { stdio: 'ignore' })
  renameSync(`${path}.partial`, path)
  return path
}

/**
 * Upstream llama-server on `file` with the command line Hearth would give it (or `args`, such as
 * llama-server's own defaults), on the engine core.
 */
async function startUpstream(
  build: LlamaBuild,
  spec: EngineLoadSpec,
  args = llamaServerArgs(spec, { cpuOnly: true }),
): Promise<{ endpoint: Endpoint; pid: number; stop: () => Promise<void> }> {
  const upstream = await startUpstreamProgram(build, 'llama-server', args, { cpus: ENGINE_CORE })
  return { endpoint: { url: upstream.url, headers: {}, model: spec.modelId }, pid: upstream.pid, stop: upstream.stop }
}

type Upstream = Awaited<ReturnType<typeof startUpstream>>
type Hearth = Awaited<ReturnType<typeof startHearth>>

/**
 * Both sides on `file`: upstream with `spec`, Hearth with `hearthArgs`. Hearth's engine is loaded by
 * `warmUp`, then pinned to the engine core; `measure` gets both (and the engine's pid), with this
 * client on the client cores; both stop after.
 */
async function withBothSides<T>(
  build: LlamaBuild,
  file: string,
  spec: EngineLoadSpec,
  hearthArgs: string[],
  warmUp: (endpoint: Endpoint) => Promise<unknown>,
  measure: (hearth: Hearth, upstream: Upstream, enginePid: number) => Promise<T>,
  upstreamArgs?: string[],
): Promise<T> {
  return onClientCores(async () => {
    const upstream = await startUpstream(build, spec, upstreamArgs)
    const hearth = await startHearth(file, spec.modelId, hearthArgs)
    try {
      await warmUp(hearth.endpoint)
      const enginePid = hearth.pin()
      await warmUp(upstream.endpoint)
      return await measure(hearth, upstream, enginePid)
    } finally {
      await hearth.server.stop()
      await upstream.stop()
    }
  })
}

const warmChat = (endpoint: Endpoint) => stream(endpoint, say('warm up'), 2)

/**
 * The order of the two sides in one run, Hearth (0) and llama-server (1): turn about, so that
 * neither always runs first (after the other's request, or the client's pause) or always second.
 */
function inTurns(run: number): readonly [0, 1] | readonly [1, 0] {
  return run % 2 === 0 ? [0, 1] : [1, 0]
}

/** Hearth serving `file`, its Node process on the client cores and its engine on the engine core. */
async function startHearth(file: string, modelId: string, extraArgs: string[]): Promise<{ endpoint: Endpoint; server: TestServer; pin: () => number }> {
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-upstream-bench-'))
  copyFileSync(file, join(modelsDir, `${modelId}.gguf`))
  const server = await startTestServer({ modelsDir, threads: 1, args: extraArgs })
  pinProcess(server.process.pid!, CLIENT_CORES)
  const endpoint = { url: server.url, headers: { authorization: `Bearer ${server.apiKey}` }, model: modelId }
  return {
    endpoint,
    server,
    // Called once the engine is up: it goes to the engine core, as upstream's does.
    pin: () => pinEngines(server.process.pid!)[0]!,
  }
}

export async function stream(endpoint: Endpoint, messages: unknown[], maxTokens: number, extra: Record<string, unknown> = {}): Promise<Stream> {
  const started = performance.now()
  const res = await fetch(`${endpoint.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...endpoint.headers },
    body: JSON.stringify({
      model: endpoint.model,
      messages,
      max_tokens: maxTokens,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
      ...extra,
    }),
  })
  if (!res.ok) throw new Error(`${endpoint.url}: ${res.status} ${await res.text()}`)
  let first = 0
  let last = 0
  let usage: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens?: number } } | undefined
  let cacheN = 0
  let enginePromptMs = NaN
  let buffered = ''
  const decoder = new TextDecoder()
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(chunk, { stream: true })
    let end
    while ((end = buffered.indexOf('\n\n')) >= 0) {
      const line = buffered.slice(0, end).replace(/^data: /, '')
      buffered = buffered.slice(end + 2)
      if (!line.startsWith('{')) continue
      const event = JSON.parse(line)
      if (event.choices?.[0]?.delta?.content) {
        last = performance.now()
        first ||= last
      }
      usage = event.usage ?? usage
      cacheN = event.timings?.cache_n ?? cacheN
      enginePromptMs = event.timings?.prompt_ms ?? enginePromptMs
    }
  }
  const completion = usage?.completion_tokens ?? 0
  return {
    ttftMs: first - started,
    enginePromptMs,
    decodePerSecond: completion > 1 ? ((completion - 1) * 1000) / (last - first) : 0,
    promptTokens: usage?.prompt_tokens ?? 0,
    cachedTokens: usage?.prompt_tokens_details?.cached_tokens ?? cacheN,
    completionTokens: completion,
  }
}

/**
 * CPU seconds a process has used (Linux), to the nanosecond: its threads' scheduler times. The
 * tick counts in /proc/<pid>/stat move in 10 ms steps, too coarse for one answer's work.
 */
function cpuSeconds(pids: number[]): number {
  const threadSeconds = (pid: number, tid: string) => {
    try {
      return Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]) / 1e9
    } catch {
      return 0 // the thread has just ended
    }
  }
  return pids.reduce((sum, pid) => {
    try {
      return sum + readdirSync(`/proc/${pid}/task`).reduce((s, tid) => s + threadSeconds(pid, tid), 0)
    } catch {
      return sum
    }
  }, 0)
}

export const words = (n: number, salt: string) =>
  `${salt} ` + Array.from({ length: n }, (_, i) => ['river', 'town', 'light', 'story', 'green', 'quiet', 'morning', 'book'][(i * 7) % 8]).join(' ')
export const say = (text: string) => [{ role: 'user', content: text }]

/** The context Hearth gives a model without a catalog entry: what it was trained with. */
export async function trainedContext(file: string): Promise<number> {
  const header = await readModelFileHeader(file)
  return (header.format === 'gguf' ? header.trainedContext : undefined) ?? 2048
}

export function spec(modelId: string, path: string, parallel: number, contextLength: number): EngineLoadSpec {
  return { modelId, kind: 'chat', path, projectorPath: undefined, contextLength, threads: 1, gpuLayers: 0, parallel }
}

function ratioLine(name: string, hearth: number, upstream: number, unit: string, target: string, digits = 1): number {
  const ratio = hearth / upstream
  console.log(
    `${name.padEnd(34)} hearth ${fmt(hearth, digits).padStart(9)}  llama-server ${fmt(upstream, digits).padStart(9)} ${unit.padEnd(6)} ratio ${fmt(ratio, 3)}  (target ${target})`,
  )
  return ratio
}

/** Decode, prompt processing and the conversation cache on the real-size model; one slot. */
async function realSizeSingle(build: LlamaBuild, file: string, runs: number): Promise<Record<string, number>> {
  const id = basename(file, '.gguf')
  return withBothSides(build, file, spec(id, file, 1, await trainedContext(file)), ['--parallel', '1'], warmChat, async (hearth, upstream) => {
    const samples = { decode: [[], []], prompt: [[], []], turn1: [[], []], turn2: [[], []] } as Record<string, [number[], number[]]>
    for (let run = 0; run < runs; run++) {
      for (const side of inTurns(run)) {
        const endpoint = side ? upstream.endpoint : hearth.endpoint
        const decode = await stream(endpoint, say(`run ${run} tell a story`), 64)
        samples.decode![side].push(decode.decodePerSecond)
        // A prompt of about 700 tokens that no cache holds (it starts with this run's own words).
        const long = words(690, `${side}-${run}-${Math.random()}`)
        const first = await stream(endpoint, say(long), 1)
        samples.prompt![side].push(((first.promptTokens - first.cachedTokens) * 1000) / first.ttftMs)
        samples.turn1![side].push(first.ttftMs)
        const second = await stream(endpoint, [...say(long), { role: 'assistant', content: 'river' }, ...say('and then?')], 1)
        samples.turn2![side].push(second.ttftMs)
      }
    }
    const m = (k: string, side: 0 | 1) => median(samples[k]![side])
    const figures: Record<string, number> = {}
    figures.decode_ratio = ratioLine('decode (64 tokens)', m('decode', 0), m('decode', 1), 'tok/s', '≥ 0.97')
    figures.prompt_ratio = ratioLine('prompt processing (~700 tokens)', m('prompt', 0), m('prompt', 1), 'tok/s', '≥ 0.97')
    figures.second_turn_ttft_ratio = ratioLine('second turn, first token', m('turn2', 0), m('turn2', 1), 'ms', '≤ 1.1', 1)
    figures.second_turn_speedup = m('turn1', 0) / m('turn2', 0)
    console.log(`${'second turn vs first turn (hearth)'.padEnd(34)} ${fmt(figures.second_turn_speedup, 1)}× faster to the first token (target ≥ 5×)`)

    // A conversation after its model was unloaded and loaded again: restored from the slot cache.
    const long = words(690, `reload-${Math.random()}`)
    await stream(hearth.endpoint, say(long), 1)
    await fetch(`${hearth.endpoint.url}/api/models/${id}/unload`, { method: 'POST', headers: hearth.endpoint.headers })
    await fetch(`${hearth.endpoint.url}/api/models/${id}/load`, { method: 'POST', headers: hearth.endpoint.headers })
    hearth.pin()
    const restored = await stream(hearth.endpoint, [...say(long), { role: 'assistant', content: 'river' }, ...say('and then?')], 1)
    figures.reload_ttft_ratio = ratioLine('second turn after unload + reload', restored.ttftMs, m('turn2', 1), 'ms', '≤ 1.5')
    for (const [k, v] of Object.entries(samples)) {
      figures[`hearth_${k}`] = median(v[0])
      figures[`upstream_${k}`] = median(v[1])
    }
    return figures
  })
}

/**
 * Hearth as a person starts it (its default slots, context and cache) against llama-server as a
 * person starts it: upstream's build (without Hearth's patches), `-m FILE -t 1 --jinja`,
 * everything else llama-server's own defaults (issue 54). Decode and a ~700-token prompt,
 * interleaved, medians. Both sides are started afresh every two runs: one process of the same
 * binary and arguments reads up to 5 % faster or slower than the next for its whole life, so one
 * launch a side cannot tell 2 % apart.
 */
async function realSizeAgainstDefaults(file: string, runs: number): Promise<Record<string, number>> {
  const upstreamBuild = await upstreamLlamaBuild()
  const id = basename(file, '.gguf')
  const defaults = ['-m', file, '-t', '1', '--jinja', '--alias', id]
  const loadSpec = spec(id, file, 1, await trainedContext(file))
  const decode: [number[], number[]] = [[], []]
  const prompt: [number[], number[]] = [[], []]
  for (let run = 0; run < runs; run += 2) {
    await withBothSides(
      upstreamBuild,
      file,
      loadSpec,
      [],
      warmChat,
      async (hearth, upstream) => {
        for (let turn = run; turn < Math.min(run + 2, runs); turn++) {
          for (const side of inTurns(turn)) {
            const endpoint = side ? upstream.endpoint : hearth.endpoint
            decode[side].push((await stream(endpoint, say(`run ${turn} tell a story`), 64)).decodePerSecond)
            const first = await stream(endpoint, say(words(690, `${side}-${turn}-${Math.random()}`)), 1)
            prompt[side].push(((first.promptTokens - first.cachedTokens) * 1000) / first.enginePromptMs)
          }
        }
      },
      defaults,
    )
  }
  return {
    defaults_decode_ratio: ratioLine('decode, against its defaults (upstream build)', median(decode[0]), median(decode[1]), 'tok/s', '≥ 1.0'),
    defaults_prompt_ratio: ratioLine('prompt (~700), against its defaults (upstream build)', median(prompt[0]), median(prompt[1]), 'tok/s', '≥ 1.0'),
    hearth_decode: median(decode[0]),
    upstream_decode: median(decode[1]),
    hearth_prompt: median(prompt[0]),
    upstream_prompt: median(prompt[1]),
  }
}

/**
 * What a JSON Schema grammar adds to the first token (building the grammar from the schema, then
 * constraining each sampled token), on the real-size model: Hearth with and without a schema, and
 * llama-server the same, so the cost is seen to be the engine's.
 */
async function grammarCost(build: LlamaBuild, file: string, runs: number): Promise<Record<string, number>> {
  // Called with eight times the runs asked for (forty by default): a first token here moves by several
  // ms from one to the next, and five runs put the two columns anywhere from +2 to +13 ms apart.
  const id = basename(file, '.gguf')
  const schema = {
    type: 'object',
    properties: { city: { type: 'string', maxLength: 20 }, days: { type: 'integer', minimum: 1, maximum: 7 }, units: { enum: ['metric', 'imperial'] } },
    required: ['city', 'days', 'units'],
  }
  const structured = { response_format: { type: 'json_schema', json_schema: { name: 'forecast', schema } } }
  return withBothSides(build, file, spec(id, file, 1, await trainedContext(file)), ['--parallel', '1'], warmChat, async (hearth, upstream) => {
    const ttft: Record<string, [number[], number[]]> = { plain: [[], []], schema: [[], []] }
    for (let run = 0; run < runs; run++) {
      for (const side of inTurns(run)) {
        const endpoint = side ? upstream.endpoint : hearth.endpoint
        // The same short prompt each time, so the prompt cache leaves only the grammar's work and the first token.
        // Whole answers of one token: a structured answer's first piece is held back until it parses.
        ttft.plain![side].push(await oneTokenMs(endpoint, say('The forecast, please.'), {}))
        ttft.schema![side].push(await oneTokenMs(endpoint, say('The forecast, please.'), structured))
      }
    }
    const added = [median(ttft.schema![0]) - median(ttft.plain![0]), median(ttft.schema![1]) - median(ttft.plain![1])]
    console.log(
      `${'json_schema grammar, first token'.padEnd(34)} hearth +${fmt(added[0]!, 1)} ms (${fmt(median(ttft.plain![0]), 1)} → ${fmt(median(ttft.schema![0]), 1)})  llama-server +${fmt(added[1]!, 1)} ms`,
    )
    return {
      hearth_grammar_added_ms: added[0]!,
      upstream_grammar_added_ms: added[1]!,
      hearth_plain_ttft_ms: median(ttft.plain![0]),
      hearth_schema_ttft_ms: median(ttft.schema![0]),
    }
  })
}

/** Wall time of a non-streamed answer of one token. */
async function oneTokenMs(endpoint: Endpoint, messages: unknown[], extra: Record<string, unknown>): Promise<number> {
  const started = performance.now()
  const res = await fetch(`${endpoint.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...endpoint.headers },
    body: JSON.stringify({ model: endpoint.model, messages, max_tokens: 1, temperature: 0, ...extra }),
  })
  if (!res.ok) throw new Error(`${endpoint.url}: ${res.status} ${await res.text()}`)
  await res.text()
  return performance.now() - started
}

/** Four streams at once on four slots: aggregate decode rate. */
async function realSizeConcurrent(build: LlamaBuild, file: string, runs: number): Promise<Record<string, number>> {
  const id = basename(file, '.gguf')
  return withBothSides(build, file, spec(id, file, 4, await trainedContext(file)), ['--parallel', '4'], warmChat, async (hearth, upstream) => {
    const aggregate = async (endpoint: Endpoint, run: number) => {
      const started = performance.now()
      const all = await Promise.all([0, 1, 2, 3].map((k) => stream(endpoint, say(`stream ${k} run ${run}`), 48)))
      return (all.reduce((s, r) => s + r.completionTokens, 0) * 1000) / (performance.now() - started)
    }
    const h: number[] = []
    const u: number[] = []
    for (let run = 0; run < runs; run++) {
      for (const side of inTurns(run)) (side ? u : h).push(await aggregate(side ? upstream.endpoint : hearth.endpoint, run))
    }
    return {
      concurrent_ratio: ratioLine('4 concurrent streams, aggregate', median(h), median(u), 'tok/s', '≥ 0.95'),
      hearth_concurrent: median(h),
      upstream_concurrent: median(u),
    }
  })
}

/** The small model: what Hearth adds per request (first token) and per token (CPU). */
async function overhead(build: LlamaBuild, file: string, runs: number): Promise<Record<string, number>> {
  const id = basename(file, '.gguf')
  return withBothSides(build, file, spec(id, file, 1, await trainedContext(file)), ['--parallel', '1'], warmChat, async (hearth, upstream, enginePid) => {
    const ttft: [number[], number[]] = [[], []]
    const cpu: [number[], number[]] = [[], []]
    for (let run = 0; run < runs * 2; run++) {
      for (const side of inTurns(run)) {
        const endpoint = side ? upstream.endpoint : hearth.endpoint
        const pids = side ? [upstream.pid] : [hearth.server.process.pid!, enginePid]
        ttft[side].push((await stream(endpoint, say(`Once upon a time ${run}`), 1)).ttftMs)
        const before = cpuSeconds(pids)
        const long = await stream(endpoint, say(`The little dog ${run}`), 400)
        cpu[side].push(((cpuSeconds(pids) - before) * 1e6) / long.completionTokens)
      }
    }
    const added = median(ttft[0]) - median(ttft[1])
    console.log(
      `${'first token, stories260K'.padEnd(34)} hearth ${fmt(median(ttft[0]), 2)} ms  llama-server ${fmt(median(ttft[1]), 2)} ms  added ${fmt(added, 2)} ms  (target ≤ +3 ms)`,
    )
    const cpuRatio = ratioLine('CPU per token, stories260K', median(cpu[0]), median(cpu[1]), 'µs', '≤ 1.10')
    return { ttft_added_ms: added, cpu_per_token_ratio: cpuRatio, hearth_cpu_us_per_token: median(cpu[0]), upstream_cpu_us_per_token: median(cpu[1]) }
  })
}

/** 256 short texts in one request. */
async function embeddings(build: LlamaBuild, file: string, runs: number): Promise<Record<string, number>> {
  const id = basename(file, '.gguf')
  const texts = Array.from({ length: 256 }, (_, i) => words(5 + (i % 8), `sentence ${i}`))
  const embed = async (endpoint: Endpoint) => {
    const started = performance.now()
    const res = await fetch(`${endpoint.url}/v1/embeddings`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...endpoint.headers },
      body: JSON.stringify({ model: endpoint.model, input: texts, encoding_format: 'base64' }),
    })
    if (!res.ok) throw new Error(`${endpoint.url}: ${res.status} ${await res.text()}`)
    await res.text()
    return (texts.length * 1000) / (performance.now() - started)
  }
  const embeddingSpec: EngineLoadSpec = { ...spec(id, file, 1, await trainedContext(file)), kind: 'embedding' }
  return withBothSides(build, file, embeddingSpec, [], embed, async (hearth, upstream) => {
    const h: number[] = []
    const u: number[] = []
    for (let run = 0; run < runs; run++) {
      for (const side of inTurns(run)) (side ? u : h).push(await embed(side ? upstream.endpoint : hearth.endpoint))
    }
    return {
      embeddings_ratio: ratioLine('embeddings, 256 texts in one request', median(h), median(u), '/s', '≥ 0.95'),
      hearth_eps: median(h),
      upstream_eps: median(u),
    }
  })
}

/** The same figures on trained models (npm run models:fetch): SmolLM2-135M-Instruct and all-MiniLM-L6-v2. */
async function realWeights(build: LlamaBuild, runs: number): Promise<Record<string, Record<string, number>>> {
  const chat = realModelPath('smollm2-135m-instruct-q4_1')
  const embedder = realModelPath('all-minilm-l6-v2-f16')
  if (!chat || !embedder) {
    console.warn('\n*** real-weights SKIPPED: the trained models are not fetched; run npm run models:fetch ***\n')
    return {}
  }
  console.log('\n## real weights: SmolLM2-135M-Instruct (Q4_1) and all-MiniLM-L6-v2 (F16)')
  return { real_weights_chat: await realSizeSingle(build, chat, runs), real_weights_embeddings: await embeddings(build, embedder, runs) }
}

export async function runUpstreamBench(options: { smallChatModel: string; embeddingModel: string; runs: number; only: (name: string) => boolean }) {
  const build = findLlamaBuild()
  if (!build) throw new Error('llama.cpp is not built on this machine: npm run build:engines')
  console.log(
    `\n# Hearth vs llama-server (llama.cpp ${build.commit.slice(0, 7)}, CPU ${build.cpuFeatures.join(' ')}), 1 thread, engines on core ${ENGINE_CORE}`,
  )
  const results: Record<string, Record<string, number>> = {}
  if (options.only('real-size')) {
    const file = realSizeModel(build)
    results.real_size = await realSizeSingle(build, file, options.runs)
    results.real_size_concurrent = await realSizeConcurrent(build, file, Math.max(2, Math.ceil(options.runs / 2)))
  }
  if (options.only('real-size') || options.only('defaults')) results.against_defaults = await realSizeAgainstDefaults(realSizeModel(build), options.runs)
  if (options.only('grammar')) results.grammar = await grammarCost(build, realSizeModel(build), options.runs * 8)
  if (options.only('overhead')) results.overhead = await overhead(build, options.smallChatModel, options.runs)
  if (options.only('embeddings')) results.embeddings = await embeddings(build, options.embeddingModel, options.runs)
  if (options.only('real-weights')) Object.assign(results, await realWeights(build, options.runs))
  return results
}
