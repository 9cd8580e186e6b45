/**
 * Hearth against Ollama itself (issue 51): the newest Ollama the Go module proxy serves (the one the
 * Ollama suites build, test/support/ollama-program.ts), which since mid-2026 runs llama.cpp's own
 * `llama-server` for GGUF models. Its engine here is llama-server built from Hearth's pinned source
 * without Hearth's patches (comparison-builds.ts), so both sides run the same llama.cpp and the
 * figures are what each does around it. The same GGUF on both: Ollama's copy made by `ollama
 * create` (with `num_thread 1` and the context Hearth gives), Hearth's the file itself.
 *
 * One inference thread each, both engines pinned to the engine core, both servers and this client
 * on the others, runs interleaved, medians, through Ollama's own API (`/api/chat`, which Hearth
 * serves too): decode, prompt, the second turn's first token (the prompt cache), four streams at
 * once (both with two slots: Ollama's OLLAMA_NUM_PARALLEL=2, Hearth's default on a CPU), and a
 * recorded Claude Code session through each one's Anthropic route (`/v1/messages`; Ollama's
 * context set to the session model's, as Ollama tells Claude Code's users to), and every coding
 * agent's recorded requests (test/fixtures/agents) through each one's Ollama port as Ollama's docs
 * set the agents up: no key, the OpenAI- and Anthropic-compatible routes there. Target: Hearth
 * ahead of Ollama on every figure.
 *
 * What it compares: Ollama's server, its scheduling, caching and API, over Hearth's pinned
 * llama.cpp. Ollama's own release ships another llama.cpp build (its vendored, patched copy),
 * which cannot be built here offline; so the figures are each server's work around the same
 * engine, not Ollama's release as a person downloads it.
 */
import { copyFileSync, linkSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { findLlamaBuild } from '../engines/builder/llama-build.ts'
import { programPath } from '../engines/builder/cmake-build.ts'
import { installOllama, makeOllamaStore, OLLAMA_VERSION, ollamaProgram, startOllamaServe, type OllamaServe } from '../test/support/ollama-program.ts'
import { startTestServer, type TestServer } from '../test/support/server-process.ts'
import { fmt, median } from './bench-server.ts'
import { upstreamLlamaBuild } from './comparison-builds.ts'
import { CLIENT_CORES, ENGINE_CORE, pinEngines, pinProcess } from './cores.ts'
import { agentBenchContext, agentBenchModel, claudeSession, replay as replaySession, type AgentSide } from './agents-bench.ts'
import { realSizeModel, say, trainedContext, words } from './upstream-bench.ts'

interface Side {
  name: 'hearth' | 'ollama'
  url: string
  headers: Record<string, string>
  /** Pins the side's engines to the engine core (once loaded). */
  pin: () => void
}

interface Turn {
  ttftMs: number
  decodePerSecond: number
  promptTokens: number
  cachedTokens: number
  completionTokens: number
  /** The engine's own time for the prompt, as the answer reports it (prompt_eval_duration). */
  promptEvalMs: number
  /** When its first token and its last came, ms after the request was sent. */
  firstAt: number
  lastAt: number
}

const BENCH_MODEL = 'bench'
const AGENT_MODEL = 'agent-bench'

/** One chat through Ollama's API, streamed: when the first token came, and how fast the rest did. */
async function chat(side: Side, messages: unknown[], maxTokens: number): Promise<Turn> {
  const started = performance.now()
  const res = await fetch(`${side.url}/api/chat`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...side.headers },
    body: JSON.stringify({ model: BENCH_MODEL, messages, stream: true, options: { temperature: 0, seed: 1, num_predict: maxTokens } }),
  })
  if (!res.ok) throw new Error(`${side.name}: ${res.status} ${await res.text()}`)
  let first = 0
  let last = 0
  let done: Record<string, number> = {}
  let buffered = ''
  const decoder = new TextDecoder()
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(chunk, { stream: true })
    let end
    while ((end = buffered.indexOf('\n')) >= 0) {
      const line = JSON.parse(buffered.slice(0, end)) as { message?: { content?: string }; done?: boolean; error?: string } & Record<string, number>
      buffered = buffered.slice(end + 1)
      if (line.error) throw new Error(`${side.name}: ${line.error}`)
      if (line.message?.content) {
        last = performance.now()
        first ||= last
      }
      if (line.done) done = line
    }
  }
  const completion = done.eval_count ?? 0
  return {
    ttftMs: first - started,
    decodePerSecond: completion > 1 ? ((completion - 1) * 1000) / (last - first) : 0,
    promptTokens: done.prompt_eval_count ?? 0,
    cachedTokens: done.prompt_eval_cached_count ?? 0,
    completionTokens: completion,
    promptEvalMs: (done.prompt_eval_duration ?? 0) / 1e6,
    firstAt: first - started,
    lastAt: last - started,
  }
}

/** The agents whose requests were recorded (test/fixtures/agents), each as Ollama's docs point it at Ollama. */
const RECORDED_AGENTS = ['claude', 'codex', 'opencode', 'qwen', 'continue', 'kilo', 'cline', 'aider'] as const

/** An agent's recorded inference requests, on the bench's agent model, each answer short. */
function recordedRequests(agent: string): Array<{ path: string; body: Record<string, unknown> }> {
  const recorded = JSON.parse(readFileSync(join(import.meta.dirname, '..', 'test/fixtures/agents', `${agent}.json`), 'utf8')) as {
    requests: Array<{ method: string; path: string; body?: Record<string, unknown> }>
  }
  return recorded.requests
    .filter((r) => r.method === 'POST' && r.body && /^\/v1\/(chat\/completions|responses|messages|completions)$/.test(r.path.split('?')[0]!))
    .map((r) => {
      const body: Record<string, unknown> = { ...r.body, model: AGENT_MODEL }
      for (const field of ['max_tokens', 'max_output_tokens', 'max_completion_tokens']) if (field in body) body[field] = 32
      if (!('max_tokens' in body) && !('max_output_tokens' in body) && !('max_completion_tokens' in body))
        body[r.path.includes('responses') ? 'max_output_tokens' : 'max_tokens'] = 32
      return { path: r.path.split('?')[0]!, body }
    })
}

/** The requests one after another, each read to its end (a stream too); the seconds they took. */
async function replayRecorded(side: AgentSide, requests: Array<{ path: string; body: Record<string, unknown> }>): Promise<number> {
  const started = performance.now()
  for (const { path, body } of requests) {
    const res = await fetch(`${side.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...side.headers },
      body: JSON.stringify(body),
    })
    const text = await res.text()
    if (!res.ok) throw new Error(`${side.name} ${path}: ${res.status} ${text.slice(0, 300)}`)
  }
  return (performance.now() - started) / 1000
}

function inTurns<T>(run: number, pair: readonly [T, T]): readonly [T, T] {
  return run % 2 === 0 ? pair : [pair[1], pair[0]]
}

function ratioLine(name: string, hearth: number, ollama: number, unit: string, higherIsBetter: boolean): number {
  const ratio = higherIsBetter ? hearth / ollama : ollama / hearth
  console.log(
    `${name.padEnd(40)} hearth ${fmt(hearth, 1).padStart(9)}  ollama ${fmt(ollama, 1).padStart(9)} ${unit.padEnd(5)} Hearth ${fmt(ratio, 2)}× (target > 1)`,
  )
  return ratio
}

export async function runOllamaBench({ runs, session = true }: { runs: number; session?: boolean }): Promise<Record<string, number>> {
  const build = findLlamaBuild()
  if (!build) throw new Error('llama.cpp is not built on this machine: npm run build:engines')
  const problem = installOllama()
  if (problem) throw new Error(`the ollama command could not be built: ${problem}`)
  const upstream = await upstreamLlamaBuild()
  const file = realSizeModel(build, 'Q4_K_M')
  const agentFile = agentBenchModel(build)

  // Ollama as installed: its program, and beside it (lib/ollama/) the engine it runs.
  const ollamaDir = mkdtempSync(join(tmpdir(), 'hearth-ollama-bench-'))
  copyFileSync(ollamaProgram()!, join(ollamaDir, 'ollama'))
  mkdirSync(join(ollamaDir, 'lib/ollama'), { recursive: true })
  symlinkSync(programPath(upstream.dir, 'llama-server'), join(ollamaDir, 'lib/ollama/llama-server'))
  const store = join(ollamaDir, 'models')
  const context = await trainedContext(file)
  const agentContext = agentBenchContext()
  await makeOllamaStore(store, [
    { name: BENCH_MODEL, gguf: file, modelfileExtra: `PARAMETER num_thread 1\nPARAMETER num_ctx ${context}` },
    { name: AGENT_MODEL, gguf: agentFile, modelfileExtra: `PARAMETER num_thread 1\nPARAMETER num_ctx ${agentContext}` },
  ])
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-ollama-bench-models-'))
  for (const [name, path] of [
    [BENCH_MODEL, file],
    [AGENT_MODEL, agentFile],
  ] as const)
    linkOrCopy(path, join(modelsDir, `${name}.gguf`))

  console.log(
    `\n# Hearth vs Ollama ${OLLAMA_VERSION}'s server over Hearth's pinned llama.cpp (llama-server from the same source, unpatched; Ollama's release ships another llama.cpp build, which cannot be built offline), 1 thread, engines on core ${ENGINE_CORE}, /api/chat`,
  )
  let ollama: OllamaServe | undefined
  let hearth: TestServer | undefined
  try {
    ollama = await startOllamaServe(store, {
      program: join(ollamaDir, 'ollama'),
      cpus: CLIENT_CORES,
      env: { OLLAMA_NUM_PARALLEL: '2', OLLAMA_KEEP_ALIVE: '-1', OLLAMA_LOAD_TIMEOUT: '30m' },
      timeoutMs: 60_000,
    })
    hearth = await startTestServer({ modelsDir, threads: 1, args: ['--request-timeout', '3600', '--ollama-port', '0'] })
    pinProcess(hearth.process.pid!, CLIENT_CORES)
    const sides: [Side, Side] = [
      { name: 'hearth', url: hearth.url, headers: { authorization: `Bearer ${hearth.apiKey}` }, pin: () => void pinEngines(hearth!.process.pid!) },
      { name: 'ollama', url: ollama.url, headers: {}, pin: () => void pinEngines(ollama!.process.pid!) },
    ]
    for (const side of sides) {
      await chat(side, say('warm up'), 2)
      side.pin()
    }
    const samples = { decode: [[], []], prompt: [[], []], turn2: [[], []], turn2_engine: [[], []], together: [[], []] } as Record<string, [number[], number[]]>
    for (let run = 0; run < runs; run++) {
      for (const side of inTurns(run, sides)) {
        const i = side.name === 'hearth' ? 0 : 1
        samples.decode![i].push((await chat(side, say(`run ${run}: tell a story`), 64)).decodePerSecond)
        // A prompt of about 700 tokens no cache holds (its first words are this run's own).
        const long = words(690, `${side.name}-${run}-${Math.random()}`)
        const first = await chat(side, say(long), 1)
        samples.prompt![i].push(((first.promptTokens - first.cachedTokens) * 1000) / first.ttftMs)
        const turn2 = await chat(side, [...say(long), { role: 'assistant', content: 'river' }, ...say('and then?')], 1)
        samples.turn2![i].push(turn2.ttftMs)
        samples.turn2_engine![i].push(turn2.promptEvalMs)
        if (process.env.HEARTH_BENCH_TRACE)
          console.log(
            `  ${side.name} turn 2: first token ${fmt(turn2.ttftMs, 0)} ms, engine prompt ${fmt(turn2.promptEvalMs, 0)} ms for ${turn2.promptTokens - turn2.cachedTokens} of ${turn2.promptTokens} tokens`,
          )
        // Four streams at once, 64 tokens each: the tokens of all four over the wall time.
        const started = performance.now()
        const four = await Promise.all([0, 1, 2, 3].map((k) => chat(side, say(`run ${run}, story ${k}: once`), 64)))
        samples.together![i].push((four.reduce((n, t) => n + t.completionTokens, 0) * 1000) / (performance.now() - started))
        if (process.env.HEARTH_BENCH_TRACE)
          console.log(
            `  ${side.name} four streams: ${four.map((t) => `${fmt(t.firstAt / 1000, 1)}–${fmt(t.lastAt / 1000, 1)} s (${t.completionTokens})`).join(', ')}`,
          )
      }
    }
    const m = (k: string, i: 0 | 1) => median(samples[k]![i])
    const figures: Record<string, number> = {}
    figures.decode = ratioLine('decode (64 tokens)', m('decode', 0), m('decode', 1), 'tok/s', true)
    figures.prompt = ratioLine('prompt (~700 tokens)', m('prompt', 0), m('prompt', 1), 'tok/s', true)
    figures.second_turn_ttft = ratioLine('second turn, first token', m('turn2', 0), m('turn2', 1), 'ms', false)
    figures.four_streams = ratioLine('four streams at once', m('together', 0), m('together', 1), 'tok/s', true)
    for (const k of Object.keys(samples)) {
      figures[`hearth_${k}`] = m(k, 0)
      figures[`ollama_${k}`] = m(k, 1)
    }
    if (session) {
      // Claude Code's session, once each, through each one's Anthropic route; the bench model unloaded first.
      await fetch(`${hearth.url}/api/generate`, { method: 'POST', headers: sides[0].headers, body: JSON.stringify({ model: BENCH_MODEL, keep_alive: 0 }) })
      await fetch(`${ollama.url}/api/generate`, { method: 'POST', body: JSON.stringify({ model: BENCH_MODEL, keep_alive: 0 }) })
      const requests = claudeSession('Find the bug in the step functions and fix it.', '6a1f0c2e-0000-4000-8000-00000000051a', 6)
      const times: number[] = []
      for (const side of sides) {
        const agentSide: AgentSide = { name: side.name, url: side.url, headers: side.headers }
        await fetch(`${side.url}/api/generate`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...side.headers },
          body: JSON.stringify({ model: AGENT_MODEL }),
        })
        side.pin()
        const outcome = await replaySession(agentSide, requests)
        times.push(outcome.ms / 1000)
        console.log(
          `  ${side.name}: ${requests.length} requests in ${fmt(outcome.ms / 1000, 1)} s, ${outcome.promptTokens - outcome.cachedTokens} prompt tokens computed (${outcome.cachedTokens} read from the cache, as each reports it)`,
        )
      }
      figures.claude_code_session = ratioLine(`Claude Code session (${requests.length} requests)`, times[0]!, times[1]!, 's', false)

      // Each agent's recorded requests, through each one's Ollama port as Ollama's docs set the agents up.
      const ports: [AgentSide, AgentSide] = [
        { name: 'hearth', url: hearth.ollamaUrl!, headers: { authorization: 'Bearer ollama' } },
        { name: 'ollama', url: ollama.url, headers: { authorization: 'Bearer ollama' } },
      ]
      for (const agent of RECORDED_AGENTS) {
        const recorded = recordedRequests(agent)
        const took: number[] = []
        for (const side of ports) {
          sides[side.name === 'hearth' ? 0 : 1].pin()
          took.push(await replayRecorded(side, recorded))
        }
        figures[`${agent}_through_ollama_port`] = ratioLine(`${agent}: recorded requests (${recorded.length}), Ollama port`, took[0]!, took[1]!, 's', false)
      }
    }
    return figures
  } finally {
    await hearth?.stop()
    await ollama?.stop()
  }
}

/** A hard link where the folders share a disk (a 2 GB model is not copied), else a copy. */
function linkOrCopy(from: string, to: string): void {
  try {
    linkSync(from, to)
  } catch {
    copyFileSync(from, to)
  }
}
