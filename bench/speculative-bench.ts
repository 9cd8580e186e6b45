/**
 * Speculative decoding as Hearth runs it by default (issue 65, item 4; `npm run bench -- --only
 * speculative`), on trained weights (SmolLM2-135M-Instruct Q4_1 and Gemma 3 270M Q4_K_M, `npm run
 * models:fetch`), on the five cases of speculative-cases.ts (an edit that copies most of a file
 * back, a tool-calling agent turn, a summary that quotes, free prose, a translation), against:
 * - Hearth with speculation off for the request (`speculative: false`): the same engine, each token
 *   decoded alone, so the ratio is speculation's own;
 * - llama-server as a person starts it (`-m FILE -t 1 --jinja`, its own defaults: no speculation),
 *   upstream's build from the same source without Hearth's patches (comparison-builds.ts), given the
 *   chat template Hearth gives the model where its file has none (Gemma 3 270M), so the prompts match;
 * - Ollama's server over that same upstream build (ollama-bench.ts says why), SmolLM2 only (Gemma's
 *   file has no template Ollama could use).
 * One thread, every engine pinned to the engine core (cores.ts), the runs interleaved (each side
 * first in turn), medians. Decode is the engine's own rate for the answer (its `timings`, Ollama's
 * eval_count over eval_duration); four streams at once is all four answers' tokens over the wall
 * time, on Hearth's and llama-server's defaults.
 *
 * Then, at real size (the 1B bench model, random weights: no text to draft from), what one
 * verification pass of k rows costs against a pass of one row (llama-bench, the prompt's rows at a
 * context of 256), and the speedup that cost projects with the acceptance the trained models had:
 * a pass yields its accepted tokens and one more, and costs 1 + α·(drafted) one-row passes.
 */
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { programPath } from '../engines/builder/cmake-build.ts'
import { findLlamaBuild, type LlamaBuild } from '../engines/builder/llama-build.ts'
import { fallbackTemplateSource } from '../models/catalog/fallback-templates.ts'
import { realModel } from '../test/support/real-models/real-model.ts'
import { installOllama, makeOllamaStore, ollamaProgram, startOllamaServe, type OllamaServe } from '../test/support/ollama-program.ts'
import { startTestServer, type TestServer } from '../test/support/server-process.ts'
import { startUpstreamProgram, type UpstreamServer } from '../test/support/upstream-servers.ts'
import { fmt, median } from './bench-server.ts'
import { upstreamLlamaBuild } from './comparison-builds.ts'
import { CLIENT_CORES, ENGINE_CORE, pinEngines, pinProcess } from './cores.ts'
import { speculationCases, TOOL_TEMPLATE_FILE, type SpeculationCase } from './speculative-cases.ts'
import { realSizeModel } from './upstream-bench.ts'

type SideName = 'hearth' | 'hearth-off' | 'llama-server' | 'ollama'

interface Answer {
  /** Verification passes that carried a draft (llama-server's draft steps); undefined where unknown. */
  drafts?: number
  decodePerSecond: number
  completionTokens: number
  drafted: number
  accepted: number
  paused: number
  text: string
}

interface Side {
  name: SideName
  ask(model: string, c: SpeculationCase): Promise<Answer>
}

const TARGETS: Record<SpeculationCase['name'], number> = { edit: 2.0, 'tool call': 1.5, quote: 1.5, prose: 1.0, translation: 1.0 }

/** An OpenAI-style chat, not streamed: the engine's own timings. */
async function openAiChat(url: string, headers: Record<string, string>, body: Record<string, unknown>): Promise<Answer> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  })
  const json = (await res.json()) as Record<string, any>
  if (!res.ok) throw new Error(`${url}: ${res.status} ${JSON.stringify(json).slice(0, 300)}`)
  const t = json.timings ?? {}
  const message = json.choices[0].message
  return {
    decodePerSecond: t.predicted_per_second,
    completionTokens: json.usage.completion_tokens,
    drafted: t.draft_n ?? 0,
    accepted: t.draft_n_accepted ?? 0,
    drafts: t.draft_steps,
    paused: t.draft_paused_n ?? 0,
    text: JSON.stringify([message.content, message.tool_calls ?? null]),
  }
}

function chatBody(model: string, c: SpeculationCase, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model, messages: c.messages, ...(c.tools ? { tools: c.tools } : {}), max_tokens: c.maxTokens, temperature: 0, seed: 1, ...extra }
}

async function ollamaChat(url: string, model: string, c: SpeculationCase): Promise<Answer> {
  const res = await fetch(`${url}/api/chat`, {
    method: 'POST',
    body: JSON.stringify({
      model,
      messages: c.messages,
      ...(c.tools ? { tools: c.tools } : {}),
      stream: false,
      options: { temperature: 0, seed: 1, num_predict: c.maxTokens },
    }),
  })
  const json = (await res.json()) as Record<string, any>
  if (!res.ok) throw new Error(`ollama: ${res.status} ${JSON.stringify(json).slice(0, 300)}`)
  return {
    decodePerSecond: json.eval_count / (json.eval_duration / 1e9),
    completionTokens: json.eval_count,
    drafted: 0,
    accepted: 0,
    paused: 0,
    text: json.message?.content ?? '',
  }
}

/**
 * What a pass of r rows costs against a pass of one row, as Hearth's llama-server measures it while
 * it decodes (patch llama-22, `timings.draft_pass_costs`: every row's logits, the drafting and the
 * drafters' share of each pass, which llama-bench's prompt rates leave out): the edit answered with
 * n-gram drafts of every length up to 48 and no pacing, so passes of every size come.
 */
async function passCosts(build: LlamaBuild, model: string, extra: string[] = []): Promise<Array<[number, number]>> {
  const server = await startUpstreamProgram(
    build,
    'llama-server',
    [
      '-m',
      model,
      '-t',
      '1',
      '--jinja',
      '--no-webui',
      '-c',
      '4096',
      '-np',
      '1',
      '--spec-type',
      'ngram-simple',
      '--spec-ngram-simple-size-n',
      '2',
      '--spec-ngram-simple-size-m',
      '48',
      ...extra,
    ],
    { cpus: ENGINE_CORE },
  )
  try {
    const edit = speculationCases()[0]!
    let costs: Array<[number, number]> = []
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        body: JSON.stringify({ messages: edit.messages, max_tokens: edit.maxTokens, temperature: 0 }),
      })
      const json = (await res.json()) as { timings?: { draft_pass_costs?: Array<[number, number]> } }
      costs = json.timings?.draft_pass_costs ?? costs
    }
    return costs
  } finally {
    await server.stop()
  }
}

/** Linear interpolation over measured (rows, cost) points; past the last, its cost per row. */
function costAt(points: Array<[number, number]>, rows: number): number {
  if (points.length === 0) return NaN
  if (rows <= points[0]![0]) return points[0]![1]
  for (let i = 1; i < points.length; i++) {
    const [r0, c0] = points[i - 1]!
    const [r1, c1] = points[i]!
    if (rows <= r1) return c0 + ((c1 - c0) * (rows - r0)) / (r1 - r0)
  }
  const [rl, cl] = points[points.length - 1]!
  return (cl * rows) / rl
}

export async function runSpeculativeBench({ runs }: { runs: number }): Promise<Record<string, number | string>> {
  const build = findLlamaBuild()
  if (!build) throw new Error('llama.cpp is not built on this machine: npm run build:engines')
  const smollm = realModel('smollm2-135m-instruct-q4_1')
  const gemma = realModel('gemma-3-270m-q4_k_m')
  if (!smollm || !gemma) throw new Error('the trained models are not fetched: npm run models:fetch')
  const upstream = await upstreamLlamaBuild()
  const models: Record<string, string> = { smollm2: smollm, gemma3: gemma }
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-speculative-bench-'))
  for (const [id, path] of Object.entries(models)) copyFileSync(path, join(modelsDir, `${id}.gguf`))
  const gemmaTemplate = join(modelsDir, 'gemma.jinja')
  writeFileSync(gemmaTemplate, fallbackTemplateSource('gemma')!)
  // The tool call: SmolLM2 under a ChatML template with tools (speculative-cases.ts says why); not
  // run on Gemma (no template of it has tools) nor through Ollama (its template for SmolLM2 has none).
  writeFileSync(
    join(modelsDir, 'models.json'),
    JSON.stringify({
      models: [
        { id: 'smollm2', file: 'smollm2.gguf' },
        { id: 'smollm2-tools', file: 'smollm2.gguf', modelfile: { template: readFileSync(TOOL_TEMPLATE_FILE, 'utf8') } },
      ],
    }),
  )
  const engineModel = (model: string, c: SpeculationCase) => (c.name === 'tool call' ? (model === 'smollm2' ? 'smollm2-tools' : undefined) : model)

  // Ollama as installed, its engine upstream's llama-server (SmolLM2 only).
  const ollamaProblem = installOllama()
  const ollamaDir = mkdtempSync(join(tmpdir(), 'hearth-speculative-ollama-'))
  if (!ollamaProblem) {
    copyFileSync(ollamaProgram()!, join(ollamaDir, 'ollama'))
    mkdirSync(join(ollamaDir, 'lib/ollama'), { recursive: true })
    symlinkSync(programPath(upstream.dir, 'llama-server'), join(ollamaDir, 'lib/ollama/llama-server'))
    await makeOllamaStore(join(ollamaDir, 'models'), [{ name: 'smollm2', gguf: smollm, modelfileExtra: 'PARAMETER num_thread 1\nPARAMETER num_ctx 8192' }])
  }

  console.log(
    `\n# Speculative decoding, on by default in Hearth, against the same engine with it off, llama-server's defaults (upstream build) and Ollama; 1 thread, engines on core ${ENGINE_CORE}, ${runs} runs interleaved, medians; load ${loadAverage()}`,
  )
  let hearth: TestServer | undefined
  const upstreams: UpstreamServer[] = []
  let ollama: OllamaServe | undefined
  const results: Record<string, number | string> = {}
  try {
    hearth = await startTestServer({ modelsDir, threads: 1, args: ['--request-timeout', '3600'] })
    pinProcess(hearth.process.pid!, CLIENT_CORES)
    const hearthHeaders = { authorization: `Bearer ${hearth.apiKey}` }
    const llamaServers: Record<string, UpstreamServer> = {}
    for (const [id, path] of [...Object.entries(models), ['smollm2-tools', smollm] as const]) {
      const template = id === 'gemma3' ? gemmaTemplate : id === 'smollm2-tools' ? TOOL_TEMPLATE_FILE : undefined
      const server = await startUpstreamProgram(
        upstream,
        'llama-server',
        ['-m', path, '-t', '1', '--jinja', '--no-webui', ...(template ? ['--chat-template-file', template] : [])],
        { cpus: ENGINE_CORE },
      )
      llamaServers[id] = server
      upstreams.push(server)
    }
    if (!ollamaProblem)
      ollama = await startOllamaServe(join(ollamaDir, 'models'), {
        program: join(ollamaDir, 'ollama'),
        cpus: CLIENT_CORES,
        env: { OLLAMA_NUM_PARALLEL: '4', OLLAMA_KEEP_ALIVE: '-1' },
        timeoutMs: 60_000,
      })
    const sides: Side[] = [
      { name: 'hearth', ask: (model, c) => openAiChat(hearth!.url, hearthHeaders, chatBody(model, c)) },
      { name: 'hearth-off', ask: (model, c) => openAiChat(hearth!.url, hearthHeaders, chatBody(model, c, { speculative: false })) },
      { name: 'llama-server', ask: (model, c) => openAiChat(llamaServers[model]!.url, {}, chatBody(model, c)) },
      ...(ollama
        ? [
            {
              name: 'ollama' as const,
              ask: (model: string, c: SpeculationCase) => (model === 'smollm2' ? ollamaChat(ollama!.url, model, c) : Promise.reject(new Error('not run'))),
            },
          ]
        : []),
    ]
    // Warm up (loads every engine), then pin Hearth's and Ollama's engines.
    const warm = speculationCases()[3]!
    for (const model of Object.keys(models))
      for (const side of sides) if (side.name !== 'ollama' || model === 'smollm2') await side.ask(model, { ...warm, maxTokens: 2 })
    for (const side of sides) if (side.name !== 'ollama') await side.ask('smollm2-tools', { ...warm, maxTokens: 2 })
    pinEngines(hearth.process.pid!)
    if (ollama) pinEngines(ollama.process.pid!)

    const cases = speculationCases()
    type Key = `${string}|${string}|${SideName}`
    const samples = new Map<Key, Answer[]>()
    const together = new Map<string, number[]>()
    for (let run = 0; run < runs; run++) {
      const order = sides.map((_, i) => sides[(i + run) % sides.length]!)
      for (const model of Object.keys(models)) {
        for (const c of cases) {
          const id = engineModel(model, c)
          if (!id) continue
          for (const side of order) {
            if (side.name === 'ollama' && (model !== 'smollm2' || c.tools)) continue
            const key: Key = `${model}|${c.name}|${side.name}`
            samples.set(key, [...(samples.get(key) ?? []), await side.ask(id, c)])
          }
        }
        // Four streams at once (the edit, the quote, the prose and the translation), on each server's defaults.
        for (const side of order.filter((s) => s.name === 'hearth' || s.name === 'llama-server')) {
          const started = performance.now()
          const four = await Promise.all(cases.filter((c) => !c.tools).map((c) => side.ask(model, { ...c, maxTokens: 128 })))
          const rate = (four.reduce((n, a) => n + a.completionTokens, 0) * 1000) / (performance.now() - started)
          together.set(`${model}|${side.name}`, [...(together.get(`${model}|${side.name}`) ?? []), rate])
        }
      }
    }

    // Measured with the other engines stopped, each on the engine core alone.
    await hearth.stop()
    for (const server of upstreams) await server.stop()
    await ollama?.stop()
    const costs: Record<string, Array<[number, number]>> = {}
    for (const [id, path] of [...Object.entries(models), ['1b', realSizeModel(build, 'Q4_K_M')] as const]) {
      costs[id] = await passCosts(build, path, id === 'gemma3' ? ['--chat-template-file', gemmaTemplate] : [])
      console.log(`a pass of r rows against one row, ${id}: ${costs[id]!.map(([r, c]) => `${fmt(r, 1)}: ${fmt(c, 2)}×`).join(', ')}`)
      for (const [r, c] of costs[id]!) results[`${id}_pass_cost_${Math.round(r)}_rows`] = c
    }

    console.log(
      `\n${'model'.padEnd(8)} ${'case'.padEnd(12)} ${'hearth'.padStart(7)} ${'off'.padStart(7)} ${'llama-s'.padStart(7)} ${'ollama'.padStart(7)}  ${'×llama-s'.padStart(8)} ${'×ollama'.padStart(8)} ${'target'.padStart(6)}  drafted/accepted/paused  same  projected 1B`,
    )
    for (const model of Object.keys(models)) {
      for (const c of cases) {
        const of = (side: SideName) => samples.get(`${model}|${c.name}|${side}`) ?? []
        const rate = (side: SideName) => (of(side).length ? median(of(side).map((a) => a.decodePerSecond)) : NaN)
        const on = of('hearth')
        if (on.length === 0) continue
        const drafted = median(on.map((a) => a.drafted))
        const accepted = median(on.map((a) => a.accepted))
        const paused = median(on.map((a) => a.paused))
        const tokens = median(on.map((a) => a.completionTokens))
        const same = on.every((a, i) => a.text === of('hearth-off')[i]?.text)
        // At real size: the same passes (each its accepted tokens and one more), each costing what a
        // pass of its rows costs the 1B model; drafts of the mean length, as pacing made them.
        const passes = tokens - accepted
        const drafts = on.length ? median(on.map((a) => a.drafts ?? 0)) : 0
        const meanRows = drafts > 0 ? 1 + drafted / drafts : 1
        const projected = tokens / (passes - drafts + drafts * costAt(costs['1b'] ?? [], meanRows))
        const vsLlama = rate('hearth') / rate('llama-server')
        const vsOllama = rate('hearth') / rate('ollama')
        console.log(
          `${model.padEnd(8)} ${c.name.padEnd(12)} ${fmt(rate('hearth'), 1).padStart(7)} ${fmt(rate('hearth-off'), 1).padStart(7)} ${fmt(rate('llama-server'), 1).padStart(7)} ${fmt(rate('ollama'), 1).padStart(7)}  ${fmt(vsLlama, 2).padStart(7)}× ${fmt(vsOllama, 2).padStart(7)}× ${`≥ ${TARGETS[c.name]}`.padStart(6)}  ${`${drafted}/${accepted}/${paused}`.padEnd(23)} ${same ? 'yes ' : 'NO  '}  ${fmt(projected, 2)}×`,
        )
        results[`${model}_${c.name}_vs_llama_server`] = vsLlama
        results[`${model}_${c.name}_vs_off`] = rate('hearth') / rate('hearth-off')
        if (!Number.isNaN(vsOllama)) results[`${model}_${c.name}_vs_ollama`] = vsOllama
        results[`${model}_${c.name}_projected_1b`] = projected
      }
      const four = median(together.get(`${model}|hearth`) ?? []) / median(together.get(`${model}|llama-server`) ?? [])
      console.log(
        `${model.padEnd(8)} ${'four at once'.padEnd(12)} ${fmt(median(together.get(`${model}|hearth`) ?? []), 1).padStart(7)} ${''.padStart(7)} ${fmt(median(together.get(`${model}|llama-server`) ?? []), 1).padStart(7)} ${''.padStart(7)}  ${fmt(four, 2).padStart(7)}× ${''.padStart(8)} ${'≥ 1'.padStart(6)}  (tokens/s of all four over the wall time)`,
      )
      results[`${model}_four_streams_vs_llama_server`] = four
    }
    results.load = loadAverage()
  } finally {
    await hearth?.stop()
    for (const server of upstreams) await server.stop()
    await ollama?.stop()
  }
  return results
}

function loadAverage(): string {
  return execFileSync('uptime', { encoding: 'utf8' })
    .trim()
    .replace(/.*load average: /, '')
}
