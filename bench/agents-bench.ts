/**
 * Agent sessions, replayed: Hearth against llama-server built from the same source and run with
 * its own defaults (`-t 1 -tb 1` aside), one inference thread each, both engines pinned to the
 * same core, on a random-weight model of a real size with a real tokenizer and tool template
 * (SmolLM2-135M's shape, with Qwen 2.5's vocabulary and template, Q8_0). The prompt dominates an
 * agent's work, and one thread reads Claude Code's 11k-token prompt in about two minutes even at
 * this size (Qwen2.5-Coder-0.5B's shape took ten: 482 s against llama-server's 559 s for the
 * session below, 1.16×).
 *
 * The session is Claude Code's, as recorded (test/fixtures/agents/claude.json): its real system
 * prompt and tools, six turns that each add a tool call and its result, and two title requests in
 * between; every request carries the billing stamp as the interactive Claude Code sends it, with a
 * `cch` that changes per request. Both sides get the same bodies on their Anthropic Messages route
 * (llama-server has its own), with `max_tokens: 16` and `temperature: 0` so that each answer costs
 * the same (a random model writes to its limit).
 *
 * Figures and targets (issue 24):
 * - the session: total time ≥ 1.0× llama-server's; cache reads ≥ llama-server's (tokens computed
 *   again ≤ llama-server's: Hearth's prompts are a little shorter, without the billing stamp and
 *   the tools not yet loaded);
 * - the session's next turn after the model was unloaded (idle TTL), and after a restart: ≥ 10×
 *   faster than llama-server after a restart, which has to read everything again (issue 35; ≥ 3×
 *   before), the turn alone and with each engine's start, and where Hearth's seconds go;
 * - three and five sessions at once on a model with two slots (llama-server with `-np 2` and the
 *   same context per slot as Hearth), of one project (sharing the system prompt) or each of its own
 *   (sharing nothing): ≥ 1.0× (issue 35).
 */
import { request } from 'node:http'
import { copyFileSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { findLlamaBuild, type LlamaBuild } from '../engines/builder/llama-build.ts'
import { SMOLLM2_135M, writeRealSizeFamilyModel } from '../test/support/real-size-model.ts'
import { startTestServer, type TestServer } from '../test/support/server-process.ts'
import { startUpstreamProgram, type UpstreamServer } from '../test/support/upstream-servers.ts'
import { fmt } from './bench-server.ts'
import { CLIENT_CORES, ENGINE_CORE, pinEngines, pinProcess } from './cores.ts'
import { cachedBenchModel } from './upstream-bench.ts'

const MODEL = 'agent-bench'
const ROOT = join(import.meta.dirname, '..')
const TURNS = 6
const TURNS_TOGETHER = 3
const TITLES_AFTER = new Set([2, 4])
const CONTEXT = SMOLLM2_135M.contextLength

export interface Side {
  name: string
  url: string
  headers: Record<string, string>
}

export type { Side as AgentSide }

/** The context the session's model gets (Ollama's copy is made with it in the Ollama bench). */
export function agentBenchContext(): number {
  return CONTEXT
}

interface Outcome {
  ms: number
  promptTokens: number
  cachedTokens: number
}

/**
 * A tiny model with the same tokenizer and template: the same prompts, cached or computed alike, in
 * a fraction of the time. Its figures check the caching policy (tokens computed again) in minutes;
 * its times measure overhead, not speed (`--agents-model tiny`).
 */
const TINY_SHAPE = { layers: 2, embd: 64, heads: 2, kvHeads: 1, ff: 128, contextLength: SMOLLM2_135M.contextLength }

/** The benchmark's model, made once and kept in the engine cache. */
export function agentBenchModel(build: LlamaBuild, size: AgentBenchModel = 'real-size'): string {
  const template = readFileSync(join(ROOT, '..', 'shared', 'fixtures', 'chat-templates', 'Qwen-Qwen2.5-7B-Instruct.jinja'), 'utf8')
  const [name, what, shape] =
    size === 'tiny'
      ? ['random-tiny-qwen-vocab', "a tiny random-weight model with Qwen 2.5's tokenizer and template (F16)", TINY_SHAPE]
      : ['random-smollm2-135m-shape-qwen-vocab', "a random-weight model shaped like SmolLM2-135M with Qwen 2.5's tokenizer and template (F16)", SMOLLM2_135M]
  return cachedBenchModel(build, name, 'Q8_0', what, (f16) =>
    writeRealSizeFamilyModel(f16, { template: 'Qwen-Qwen2.5-7B-Instruct', vocabulary: 'qwen3' }, template, shape),
  )
}

export type AgentBenchModel = 'real-size' | 'tiny'

/** Claude Code's session, built from its recorded first request: one body per request, in order. */
export function claudeSession(
  task: string,
  sessionId: string,
  turns: number,
  project?: string,
): Array<{ kind: 'turn' | 'title'; body: Record<string, unknown> }> {
  const recorded = JSON.parse(readFileSync(join(ROOT, 'test/fixtures/agents/claude.json'), 'utf8')) as {
    requests: Array<{ method: string; body?: Record<string, unknown> }>
  }
  const first = recorded.requests.find((r) => r.method === 'POST' && Array.isArray(r.body?.tools))!.body!
  const recordedSystem = first.system as Array<{ type: string; text: string }>
  // A project of its own first in the prompt: sessions of different projects (or agents) share
  // nothing but the billing stamp, which Hearth leaves out.
  const system = project ? [recordedSystem[0]!, { type: 'text', text: projectNotes(project) }, ...recordedSystem.slice(1)] : recordedSystem
  const version = `2.1.328.${sessionId.slice(0, 3)}`
  // Interactive Claude Code stamps each request with its own `cch`.
  const stamped = (entrypoint: string) => [
    { type: 'text', text: `x-anthropic-billing-header: cc_version=${version}; cc_entrypoint=${entrypoint}; cch=${randomHex(5)};` },
    ...system.slice(1),
  ]
  const metadata = { user_id: JSON.stringify({ device_id: 'bench', account_uuid: '', session_id: sessionId }) }
  const common = { model: MODEL, max_tokens: 16, temperature: 0, stream: false, metadata }
  const opening = (first.messages as Array<{ role: string; content: unknown }>).map((m) =>
    m.role === 'user' && Array.isArray(m.content) ? { ...m, content: [...(m.content as unknown[]).slice(0, -1), { type: 'text', text: task }] } : m,
  )
  const messages: unknown[] = [...opening]
  const requests: Array<{ kind: 'turn' | 'title'; body: Record<string, unknown> }> = []
  const turn = () => ({ ...first, ...common, system: stamped('cli'), messages: [...messages] })
  requests.push({ kind: 'turn', body: turn() })
  for (let i = 1; i <= turns; i++) {
    const id = `toolu_bench_${i}`
    messages.push({
      role: 'assistant',
      content: [
        { type: 'text', text: `Reading part ${i}.` },
        { type: 'tool_use', id, name: 'Read', input: { file_path: `/home/user/project/src/part${i}.ts` } },
      ],
    })
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: sourceFile(i) }] })
    requests.push({ kind: 'turn', body: turn() })
    if (TITLES_AFTER.has(i)) {
      requests.push({
        kind: 'title',
        body: {
          ...common,
          system: [
            ...stamped('cli').slice(0, 1),
            {
              type: 'text',
              text: 'Write a title of three to seven words, in sentence case, for a coding session that starts with the message below. Only the title.',
            },
          ],
          messages: [{ role: 'user', content: task }],
        },
      })
    }
  }
  return requests
}

/** A project's own notes, as a CLAUDE.md would put them first: a hundred or so tokens no other project has. */
function projectNotes(project: string): string {
  return `# ${project}\n\nThis repository is ${project}. Run its tests with \`npm test -- --project ${project}\`; keep ${project}'s public API stable and write its changelog entry under ${project}/CHANGES.md. Code owners: the ${project} team.`
}

/** A made-up source file, the same every run: a tool's result of a few hundred tokens. */
function sourceFile(part: number): string {
  const lines = Array.from(
    { length: 40 },
    (_, i) => `export function step${part}_${i}(input: number): number {\n  return input * ${i + part} + ${(i * 7 + part) % 13}\n}`,
  )
  return `// src/part${part}.ts\n${lines.join('\n')}`
}

function randomHex(n: number): string {
  return Array.from({ length: n }, () => Math.floor(Math.random() * 16).toString(16)).join('')
}

async function send(side: Side, body: Record<string, unknown>): Promise<Outcome> {
  const started = performance.now()
  const { status, text } = await post(`${side.url}/v1/messages`, { 'anthropic-version': '2023-06-01', ...side.headers }, JSON.stringify(body))
  if (status !== 200) throw new Error(`${side.name}: ${status} ${text.slice(0, 500)}`)
  const usage = (JSON.parse(text) as { usage: { input_tokens: number; cache_read_input_tokens?: number } }).usage
  const cached = usage.cache_read_input_tokens ?? 0
  return { ms: performance.now() - started, promptTokens: usage.input_tokens + cached, cachedTokens: cached }
}

/** A POST without a time limit: a whole prompt read on one thread takes minutes (fetch gives up at five). */
function post(url: string, headers: Record<string, string>, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers } },
      (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (d: string) => (text += d))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }))
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

export async function replay(side: Side, requests: Array<{ body: Record<string, unknown> }>): Promise<Outcome> {
  const total: Outcome = { ms: 0, promptTokens: 0, cachedTokens: 0 }
  for (const [i, { body }] of requests.entries()) {
    const o = await send(side, body)
    // HEARTH_BENCH_TRACE=1: each request as it ends, to see which ones computed their prompt again.
    if (process.env.HEARTH_BENCH_TRACE)
      console.log(
        `  ${side.name} ${String((body.metadata as { user_id?: string } | undefined)?.user_id ?? '').slice(-6)} #${i}: ${o.cachedTokens} of ${o.promptTokens} cached, ${fmt(o.ms / 1000, 2)} s`,
      )
    total.ms += o.ms
    total.promptTokens += o.promptTokens
    total.cachedTokens += o.cachedTokens
  }
  return total
}

/** llama-server with its own defaults, one thread, on the engine core. */
async function startUpstream(build: LlamaBuild, file: string, extra: string[] = []): Promise<UpstreamServer & { side: Side }> {
  // No time limit on a request: a whole prompt read on one thread takes minutes (the default is 10).
  const server = await startUpstreamProgram(
    build,
    'llama-server',
    ['--model', file, '--alias', MODEL, '--threads', '1', '--threads-batch', '1', '--timeout', '3600', '--no-webui', ...extra],
    { cpus: ENGINE_CORE },
  )
  return { ...server, side: { name: 'llama-server', url: server.url, headers: {} } }
}

/** Hearth on `modelsDir` (and `dataDir`, to keep its slot cache across a restart), its engine on the engine core. */
async function startHearth(modelsDir: string, dataDir: string, args: string[] = []): Promise<{ server: TestServer; side: Side }> {
  const server = await startTestServer({ modelsDir, dataDir, threads: 1, args: ['--request-timeout', '3600', ...args] })
  pinProcess(server.process.pid!, CLIENT_CORES)
  const side = { name: 'Hearth', url: server.url, headers: { authorization: `Bearer ${server.apiKey}` } }
  // Loaded before the measured requests, as llama-server is once it answers; then pinned.
  const loaded = await fetch(`${server.url}/api/models/${MODEL}/load`, { method: 'POST', headers: side.headers })
  if (!loaded.ok) throw new Error(`Hearth did not load the model: ${loaded.status} ${await loaded.text()}`)
  pinEngines(server.process.pid!)
  return { server, side }
}

function line(name: string, hearth: number, upstream: number, unit: string, target: string): number {
  const ratio = upstream / hearth
  console.log(
    `${name.padEnd(44)} hearth ${fmt(hearth / 1000, 1).padStart(7)} ${unit}  llama-server ${fmt(upstream / 1000, 1).padStart(7)} ${unit}  ${fmt(ratio, 2)}× (target ${target})`,
  )
  return ratio
}

/**
 * The parts run alone with `--only agents-session` or `--only agents-together` (all four shapes of
 * sessions together; `agents-together-3-unshared` and the like pick one); `agents` runs all.
 */
export async function runAgentBench(parts: {
  session: boolean
  together: readonly TogetherShape[]
  model?: AgentBenchModel
  hearthFirst?: boolean
}): Promise<Record<string, number>> {
  const build = findLlamaBuild()
  if (!build) throw new Error('llama.cpp is not built on this machine: npm run build:engines')
  const file = agentBenchModel(build, parts.model)
  if (parts.model === 'tiny') console.log('\n*** a tiny model: tokens computed again tell the caching policy; times are overhead, not speed ***')
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-agent-bench-'))
  copyFileSync(file, join(modelsDir, `${MODEL}.gguf`))
  const figures: Record<string, number> = {}
  if (parts.session) Object.assign(figures, await benchOneSession(build, file, modelsDir))
  if (parts.together.length > 0) Object.assign(figures, await benchSessionsTogether(build, file, modelsDir, parts.together, parts.hearthFirst ?? false))
  return figures
}

async function benchOneSession(build: LlamaBuild, file: string, modelsDir: string): Promise<Record<string, number>> {
  const figures: Record<string, number> = {}
  console.log(
    `\n# agent sessions: Claude Code's session replayed, ${TURNS} turns and ${TITLES_AFTER.size} title requests, Hearth against llama-server (speed-ups: llama-server's time over Hearth's)`,
  )

  // One session from nothing, then its next turns: after a restart (llama-server), after an idle
  // unload and after a restart (Hearth, whose slots are saved in its data folder).
  const [session, next] = [claudeSession('Find the bug in the step functions and fix it.', '6a1f0c2e-0000-4000-8000-000000000001', TURNS + 2)].map(
    (all) => [all.slice(0, -2), all.slice(-2)] as const,
  )[0]!
  let upstream = await startUpstream(build, file)
  let upstreamRun: Outcome
  let upstreamResumed: Outcome
  let upstreamStartMs: number
  try {
    upstreamRun = await replay(upstream.side, session)
    await upstream.stop()
    const starting = performance.now()
    upstream = await startUpstream(build, file)
    upstreamStartMs = performance.now() - starting
    upstreamResumed = await send(upstream.side, next[0]!.body)
  } finally {
    await upstream.stop()
  }
  const dataDir = mkdtempSync(join(tmpdir(), 'hearth-agent-bench-data-'))
  let hearth = await startHearth(modelsDir, dataDir)
  let hearthRun: Outcome
  let afterUnload: Outcome
  let reload: { ms: number; loadMs: number; restoreMs: number }
  let afterRestart: Outcome
  try {
    hearthRun = await replay(hearth.side, session)
    await fetch(`${hearth.side.url}/api/models/${MODEL}/unload`, { method: 'POST', headers: hearth.side.headers })
    const loading = performance.now()
    const loaded = (await (await fetch(`${hearth.side.url}/api/models/${MODEL}/load`, { method: 'POST', headers: hearth.side.headers })).json()) as {
      load_ms: number
      restore_ms?: number
    }
    reload = { ms: performance.now() - loading, loadMs: loaded.load_ms, restoreMs: loaded.restore_ms ?? 0 }
    pinEngines(hearth.server.process.pid!)
    afterUnload = await send(hearth.side, next[0]!.body)
    await hearth.server.stop()
    hearth = await startHearth(modelsDir, dataDir)
    // The turn after: its prompt is a tool result longer than llama-server's resumed one.
    afterRestart = await send(hearth.side, next[1]!.body)
  } finally {
    await hearth.server.stop()
  }
  figures.session_speedup = line('session, total time', hearthRun.ms, upstreamRun.ms, 's', '≥ 1.0×')
  figures.session_cached_tokens = hearthRun.cachedTokens
  figures.session_cached_tokens_upstream = upstreamRun.cachedTokens
  const computed = (o: Outcome) => o.promptTokens - o.cachedTokens
  console.log(
    `${'session, prompt tokens read from cache'.padEnd(44)} hearth ${hearthRun.cachedTokens} of ${hearthRun.promptTokens}  llama-server ${upstreamRun.cachedTokens} of ${upstreamRun.promptTokens}; computed again: ${computed(hearthRun)} against ${computed(upstreamRun)}`,
  )
  figures.resumed_after_unload_speedup = line('next turn after an idle unload', afterUnload.ms, upstreamResumed.ms, 's', '≥ 10×')
  figures.resumed_after_unload_with_start_speedup = line(
    "  the same, with the engine's start",
    reload.ms + afterUnload.ms,
    upstreamStartMs + upstreamResumed.ms,
    's',
    '≥ 10×',
  )
  // Where the seconds go: the engine's start (process, model load and warm-up), the slots' restore,
  // what the load does besides (the template probe), and the turn itself (its new tokens and answer).
  console.log(
    `${''.padEnd(44)} Hearth: start, load and warm-up ${fmt(reload.loadMs / 1000, 2)} s, restore ${fmt(reload.restoreMs / 1000, 2)} s, ` +
      `the rest of the load ${fmt((reload.ms - reload.loadMs - reload.restoreMs) / 1000, 2)} s, the turn ${fmt(afterUnload.ms / 1000, 2)} s ` +
      `(${afterUnload.promptTokens - afterUnload.cachedTokens} tokens computed); llama-server: start ${fmt(upstreamStartMs / 1000, 2)} s, the turn ${fmt(upstreamResumed.ms / 1000, 2)} s`,
  )
  // What resuming costs beyond the turn's own new tokens (which any engine must compute): the
  // engine's start, the model's load and the slots' restore, as a share of the turn (issue 54).
  figures.resume_overhead_share = reload.ms / afterUnload.ms
  console.log(
    `${'resume overhead (start, load, restore)'.padEnd(44)} ${fmt(reload.ms / 1000, 2)} s of a ${fmt(afterUnload.ms / 1000, 1)} s turn: ${fmt(100 * figures.resume_overhead_share, 1)} % (target ≤ 5 %)`,
  )
  figures.resumed_after_unload_restore_ms = reload.restoreMs
  figures.resumed_after_unload_load_ms = reload.loadMs
  figures.resumed_after_restart_speedup = line('next turn after a restart', afterRestart.ms, upstreamResumed.ms, 's', '≥ 10×')
  console.log(
    `${''.padEnd(44)} cache reads: ${afterUnload.cachedTokens} of ${afterUnload.promptTokens} and ${afterRestart.cachedTokens} of ${afterRestart.promptTokens}; llama-server ${upstreamResumed.cachedTokens} of ${upstreamResumed.promptTokens}`,
  )
  return figures
}

/**
 * Sessions at once on two slots, each of TURNS_TOGETHER turns and a title request: shorter than the
 * single session, as three interleaved sessions on one thread take most of an hour per side at six
 * turns (llama-server: 55 min). Three and five sessions, sharing Claude Code's system prompt (one
 * project) or nothing (each its own project first in the prompt).
 */
async function benchSessionsTogether(
  build: LlamaBuild,
  file: string,
  modelsDir: string,
  shapes: readonly TogetherShape[],
  hearthFirst: boolean,
): Promise<Record<string, number>> {
  const figures: Record<string, number> = {}
  const tasks = [
    'Add tests for the step functions.',
    'Document the step functions.',
    'Make the step functions faster.',
    'Rename the step functions.',
    'Find dead code in the step functions.',
  ]
  const projects = ['harbor-api', 'quill-editor', 'tessellate', 'orchard-cli', 'lumen-charts']
  for (const { count, shared } of shapes) {
    const name = `${count === 3 ? 'three' : 'five'} sessions, ${shared ? 'one project' : 'sharing nothing'}`
    console.log(
      `\n# agent sessions together: ${count} Claude Code sessions of ${TURNS_TOGETHER} turns at once, two slots, ${shared ? 'one project (the system prompt shared)' : 'each its own project (nothing shared)'}, Hearth against llama-server`,
    )
    const sessions = tasks
      .slice(0, count)
      .map((task, i) => claudeSession(task, `6a1f0c2e-0000-4000-8000-00000000001${i}`, TURNS_TOGETHER, shared ? undefined : projects[i]))
    const together = async (side: Side) => {
      const started = performance.now()
      const runs = await Promise.all(sessions.map((s) => replay(side, s)))
      return {
        ms: performance.now() - started,
        cachedTokens: runs.reduce((n, r) => n + r.cachedTokens, 0),
        promptTokens: runs.reduce((n, r) => n + r.promptTokens, 0),
      }
    }
    const runUpstream = async () => {
      const two = await startUpstream(build, file, ['--parallel', '2', '--ctx-size', String(2 * CONTEXT)])
      return await together(two.side).finally(() => two.stop())
    }
    const runHearth = async () => {
      const two = await startHearth(modelsDir, mkdtempSync(join(tmpdir(), 'hearth-agent-bench-data-')), ['--parallel', '2'])
      return await together(two.side).finally(() => two.server.stop())
    }
    // One side after the other, each most of an hour at five sessions, on machines whose speed
    // drifts within the hour: --hearth-first turns the order round, for an ABBA pair of runs.
    const earlyHearth = hearthFirst ? await runHearth() : undefined
    const upstream = await runUpstream()
    const hearth = earlyHearth ?? (await runHearth())
    const key = `${count}_sessions_${shared ? 'shared' : 'unshared'}`
    figures[`${key}_speedup`] = line(name, hearth.ms, upstream.ms, 's', '≥ 1.0×')
    console.log(
      `${''.padEnd(44)} cache reads: hearth ${hearth.cachedTokens} of ${hearth.promptTokens}, llama-server ${upstream.cachedTokens} of ${upstream.promptTokens}; computed again: ${hearth.promptTokens - hearth.cachedTokens} against ${upstream.promptTokens - upstream.cachedTokens}`,
    )
    figures[`${key}_cached_tokens`] = hearth.cachedTokens
    figures[`${key}_cached_tokens_upstream`] = upstream.cachedTokens
  }
  return figures
}

/** One run of sessions together: how many, and whether they share Claude Code's system prompt. */
export interface TogetherShape {
  count: 3 | 5
  shared: boolean
}

export const TOGETHER_SHAPES: readonly TogetherShape[] = [
  { count: 3, shared: true },
  { count: 3, shared: false },
  { count: 5, shared: true },
  { count: 5, shared: false },
]
