/**
 * What the extra hop costs when a model runs on another machine: the same streamed request through
 * Hearth (a catalog `remote` entry) and straight to the remote llama-server, interleaved, medians;
 * the remote pinned to the engine core with one thread, Hearth to the client cores.
 * - first token added, on stories260K (where Hearth's work shows most) and on the real-size model
 *   (whose ~400 ms of prompt varies by ±10 ms, so its figure is only good to a few ms): the median
 *   of the pairs' differences with its 95 % interval, target ≤ 2 ms;
 * - decode rate on the real-size model: target ≥ 0.98×;
 * - requests per second over two copies against one (8 clients, short answers, stories260K). On a
 *   2-core machine the second copy shares its core with Hearth and the clients, so this shows
 *   that both copies are used, not what two GPU servers would give.
 */
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { llamaServerArgs } from '../engines/llama-server/llama-server-args.ts'
import { findLlamaBuild, type LlamaBuild } from '../engines/builder/llama-build.ts'
import { startTestServer } from '../test/support/server-process.ts'
import { startUpstreamProgram, type UpstreamServer } from '../test/support/upstream-servers.ts'
import { fmt, median } from './bench-server.ts'
import { CLIENT_CORES, ENGINE_CORE, pinProcess } from './cores.ts'
import { realSizeModel, say, spec, stream, trainedContext, words, type Endpoint } from './upstream-bench.ts'

const CLIENTS = 8

export async function runRemoteBench(options: { smallChatModel: string; runs: number }): Promise<Record<string, number>> {
  const build = findLlamaBuild()
  if (!build) throw new Error('llama.cpp is not built on this machine: npm run build:engines')
  console.log(`\n# remote models: Hearth in front of llama-server against llama-server straight, ${options.runs} runs`)
  const figures: Record<string, number> = {}
  // A first token on stories260K takes ~20 ms and moves by several ms from one to the next: a
  // 2 ms difference needs a hundred pairs (20 gave ±1 ms between runs), and they cost seconds.
  Object.assign(figures, await hop(build, options.smallChatModel, 'stories260K', { firstTokens: options.runs * 20, decodes: 0, warmUps: 100 }))
  // The real-size model's first token is ~400 ms of prompt that varies by ±10 ms: forty pairs. Those
  // past the first `runs` stop after two tokens, as the decode rate needs only a few.
  Object.assign(figures, await hop(build, realSizeModel(build), 'real size', { firstTokens: options.runs * 8, decodes: options.runs, warmUps: 1 }))
  Object.assign(figures, await throughput(build, options.smallChatModel, Math.max(3, options.runs)))
  return figures
}

/**
 * First token and decode rate through Hearth and straight, on one remote: `firstTokens` pairs of
 * requests, the first `decodes` of them answering 64 tokens, the rest two.
 */
async function hop(
  build: LlamaBuild,
  file: string,
  label: string,
  runs: { firstTokens: number; decodes: number; warmUps: number },
): Promise<Record<string, number>> {
  const remote = await startRemote(build, file, ENGINE_CORE, 1)
  const front = await startFront({ far: [remote.url] })
  const straight: Endpoint = { url: remote.url, headers: {}, model: 'far' }
  const through: Endpoint = { url: front.url, headers: { authorization: `Bearer ${front.apiKey}` }, model: 'far' }
  try {
    // Both sides serve a while before the measured runs, as a server in use has: Hearth's code is
    // compiled by then (its first few dozen requests run in V8's interpreter).
    for (let i = 0; i < runs.warmUps; i++) {
      await stream(through, say(`warm up ${i}`), 2)
      await stream(straight, say(`warm up ${i}`), 2)
    }
    const promptTokens: [Set<string>, Set<string>] = [new Set(), new Set()]
    const ttft: [number[], number[]] = [[], []]
    const decode: [number[], number[]] = [[], []]
    for (let run = 0; run < runs.firstTokens; run++) {
      const maxTokens = run < runs.decodes ? 64 : 2
      // Alternating who goes first, so neither side always follows the other.
      for (const side of run % 2 ? ([1, 0] as const) : ([0, 1] as const)) {
        // A prompt the same size on both sides, of which the remote's cache holds the same part:
        // each starts with its own number, all digits and the same count of them (a word per side
        // tokenized differently, and a token more is ~8 ms of prompt on the real-size model),
        // written backwards so that it differs from the last request's from its first digit on.
        const salt = `${[...String(run * 2 + side).padStart(6, '0')].reverse().join('')}${process.pid}`
        const result = await stream(side ? straight : through, say(words(24, salt)), maxTokens)
        promptTokens[side].add(`${result.promptTokens} (${result.cachedTokens} cached)`)
        ttft[side].push(result.ttftMs)
        if (run < runs.decodes) decode[side].push(result.decodePerSecond)
      }
    }
    const sizes = promptTokens.map((counts) => [...counts].sort().join('/'))
    if (sizes[0] !== sizes[1]) throw new Error(`the two sides' prompts differ: ${sizes[0]} tokens through Hearth, ${sizes[1]} straight`)
    // Each pair's difference, so that the machine's drift between pairs cancels out.
    const { added, within } = medianDifference(ttft[0], ttft[1])
    const key = label.replace(/\W+/g, '_')
    console.log(
      `${`first token, ${label}`.padEnd(34)} through hearth ${fmt(median(ttft[0]), 2)} ms  straight ${fmt(median(ttft[1]), 2)} ms  ` +
        `added ${fmt(added, 2)} ± ${fmt(within, 2)} ms  (target ≤ +2 ms)`,
    )
    const result: Record<string, number> = { [`${key}_ttft_added_ms`]: added, [`${key}_ttft_added_within_ms`]: within }
    if (runs.decodes > 0) {
      const ratio = median(decode[0]) / median(decode[1])
      console.log(
        `${`decode, ${label}`.padEnd(34)} through hearth ${fmt(median(decode[0]), 1)} tok/s  straight ${fmt(median(decode[1]), 1)} tok/s  ratio ${fmt(ratio, 3)}  (target ≥ 0.98)`,
      )
      result[`${key}_decode_ratio`] = ratio
    }
    return result
  } finally {
    await front.stop()
    await remote.stop('SIGKILL')
  }
}

/**
 * The median of the pairs' differences, and how far off it may be: the 95 % interval of a median,
 * ±1.57 interquartile ranges over √n (McGill, Tukey and Larsen's notches).
 */
function medianDifference(through: number[], straight: number[]): { added: number; within: number } {
  const differences = through.map((t, i) => t - straight[i]!).sort((a, b) => a - b)
  const quartile = (q: number) => differences[Math.min(differences.length - 1, Math.floor(q * differences.length))]!
  return { added: median(differences), within: (1.57 * (quartile(0.75) - quartile(0.25))) / Math.sqrt(differences.length) }
}

/** Requests per second from 8 clients over one copy, then over two. */
async function throughput(build: LlamaBuild, file: string, seconds: number): Promise<Record<string, number>> {
  const copies = [await startRemote(build, file, ENGINE_CORE, 4), await startRemote(build, file, '0', 4)]
  const front = await startFront({ one: [copies[0]!.url], two: copies.map((c) => c.url) })
  try {
    const rate = async (model: string) => {
      const endpoint: Endpoint = { url: front.url, headers: { authorization: `Bearer ${front.apiKey}` }, model }
      await stream(endpoint, say('warm up'), 2)
      let done = 0
      const until = performance.now() + seconds * 1000
      await Promise.all(
        Array.from({ length: CLIENTS }, async (_, client) => {
          for (let i = 0; performance.now() < until; i++) {
            await stream(endpoint, say(`story ${client} ${i}`), 16)
            done++
          }
        }),
      )
      return done / seconds
    }
    const one = await rate('one')
    const two = await rate('two')
    console.log(`${'requests/s, 8 clients'.padEnd(34)} one copy ${fmt(one, 1)}  two copies ${fmt(two, 1)}  ratio ${fmt(two / one, 2)}`)
    return { one_copy_rps: one, two_copies_rps: two, two_copies_ratio: two / one }
  } finally {
    await front.stop()
    for (const copy of copies) await copy.stop('SIGKILL')
  }
}

/** llama-server on `file` with Hearth's own command line for it, alias `far`, on `cores`. */
async function startRemote(build: LlamaBuild, file: string, cores: string, parallel: number): Promise<UpstreamServer> {
  // The alias `far` comes from the spec's model id.
  return startUpstreamProgram(build, 'llama-server', llamaServerArgs(spec('far', file, parallel, await trainedContext(file))), { cpus: cores })
}

/** A Hearth whose catalog has one remote entry per name, with those copies; on the client cores. */
async function startFront(entries: Record<string, string[]>) {
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-remote-bench-'))
  const models = Object.entries(entries).map(([id, urls]) => ({ id, replicas: urls.map((url) => ({ base_url: `${url}/v1`, model: 'far' })) }))
  writeFileSync(join(modelsDir, 'models.json'), JSON.stringify({ models }))
  const server = await startTestServer({ modelsDir })
  pinProcess(server.process.pid!, CLIENT_CORES)
  return server
}
