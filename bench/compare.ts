/**
 * The same workload against two OpenAI-compatible servers, figure by figure, with the ratio of the
 * second to the first: chat decode tokens/s and time to first token, chat latency p50/p95 at 1, 4
 * and 8 concurrent clients, embeddings/s, translation real-time factor, and GET /v1/models
 * requests/s. Results go to bench/results/<time>.json and .md.
 *
 *   npm run bench -- --base-url A --base-url B [--api-key KA [--api-key KB]]
 *     [--model M [--model M2]] [--embedding-model E [...]] [--translation-model T [...]]
 *     [--audio FILE] [--runs N] [--only chat,latency,embeddings,translation,models]
 *   npx tsx bench/compare.ts --self      two instances of Hearth on small models, to try it out
 *
 * Each figure runs on A, then on B, before the next figure, so a machine that gets busier slows
 * both alike. A figure a server cannot give (no such model, an error) is left empty, not guessed.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { createParser } from 'eventsource-parser'
import { benchTarget, fmt, median, type BenchTarget } from './bench-server.ts'

export interface CompareTarget {
  baseUrl: string
  apiKey: string
  chatModel?: string
  embeddingModel?: string
  translationModel?: string
}

export interface CompareOptions {
  targets: [CompareTarget, CompareTarget]
  audioPath: string
  runs: number
  only?: string[]
  outDir: string
  /** Tokens per streamed chat in the decode figure. */
  tokens?: number
}

export interface Figure {
  name: string
  unit: string
  better: 'higher' | 'lower'
  values: [number | null, number | null]
  /** Second over first; null when either is missing. */
  ratio: number | null
}

const PROMPT = [{ role: 'user', content: 'Once upon a time' }]
const CONCURRENCY = [1, 4, 8]
const SENTENCES = Array.from({ length: 64 }, (_, i) => `sentence ${i} about a quiet river town in the morning light`)

export async function runCompare(options: CompareOptions): Promise<{ figures: Figure[]; jsonPath: string; mdPath: string }> {
  const [a, b] = options.targets
  const wanted = (part: string) => !options.only || options.only.includes(part)
  const figures: Figure[] = []
  const both = async (name: string, unit: string, better: Figure['better'], measure: (t: CompareTarget) => Promise<number | null>) => {
    const values: [number | null, number | null] = [await attempt(name, a, measure), await attempt(name, b, measure)]
    const ratio = values[0] !== null && values[1] !== null && values[0] !== 0 ? values[1] / values[0] : null
    const figure = { name, unit, better, values, ratio }
    figures.push(figure)
    console.log(
      `${name.padEnd(34)} ${show(values[0], unit).padStart(14)} ${show(values[1], unit).padStart(14)}   ${ratio === null ? '—' : `${fmt(ratio, 2)}×`}`,
    )
    return figure
  }

  console.log(`\n# compare: A = ${a.baseUrl}   B = ${b.baseUrl}   (${options.runs} runs per figure)`)
  console.log(`${'figure'.padEnd(34)} ${'A'.padStart(14)} ${'B'.padStart(14)}   B/A`)
  if (wanted('chat')) {
    const samples = new Map<CompareTarget, Array<{ ttftMs: number; tps: number }>>()
    const chatSamples = async (t: CompareTarget) => {
      if (!samples.has(t)) {
        if (!t.chatModel) return []
        await streamChat(t, 8) // loads the model
        const list = []
        for (let i = 0; i < options.runs; i++) list.push(await streamChat(t, options.tokens ?? 128))
        samples.set(t, list)
      }
      return samples.get(t)!
    }
    await both('chat decode', 'tokens/s', 'higher', async (t) => nullIfEmpty((await chatSamples(t)).map((s) => s.tps)))
    await both('chat time to first token', 'ms', 'lower', async (t) => nullIfEmpty((await chatSamples(t)).map((s) => s.ttftMs)))
  }
  if (wanted('latency')) {
    for (const clients of CONCURRENCY) {
      const results = new Map<CompareTarget, { latencies: number[]; perSecond: number }>()
      const run = async (t: CompareTarget) => {
        if (!t.chatModel) return undefined
        if (!results.has(t)) results.set(t, await concurrentChats(t, clients, Math.max(2 * options.runs, 2) * clients))
        return results.get(t)!
      }
      await both(`chat latency p50, ${clients} client(s)`, 'ms', 'lower', async (t) => percentileOf((await run(t))?.latencies, 0.5))
      await both(`chat latency p95, ${clients} client(s)`, 'ms', 'lower', async (t) => percentileOf((await run(t))?.latencies, 0.95))
      await both(`chat requests/s, ${clients} client(s)`, 'req/s', 'higher', async (t) => (await run(t))?.perSecond ?? null)
    }
  }
  if (wanted('embeddings')) {
    await both('embeddings', 'inputs/s', 'higher', async (t) => {
      if (!t.embeddingModel) return null
      await embed(t, SENTENCES.slice(0, 4))
      const rates = []
      for (let i = 0; i < options.runs; i++) {
        const started = performance.now()
        await embed(t, SENTENCES)
        rates.push((SENTENCES.length * 1000) / (performance.now() - started))
      }
      return median(rates)
    })
  }
  if (wanted('translation')) {
    const audio = readFileSync(options.audioPath)
    const seconds = audioSeconds(audio)
    // Seconds of audio per second of work, as the translation bench counts it: higher is faster.
    await both(`translation real-time factor (${seconds === undefined ? '?' : fmt(seconds, 2)} s audio)`, '×', 'higher', async (t) => {
      if (!t.translationModel || seconds === undefined) return null
      await translate(t, audio, basename(options.audioPath))
      const factors = []
      for (let i = 0; i < options.runs; i++) {
        const started = performance.now()
        await translate(t, audio, basename(options.audioPath))
        factors.push(seconds / ((performance.now() - started) / 1000))
      }
      return median(factors)
    })
  }
  if (wanted('models')) {
    await both('GET /v1/models', 'req/s', 'higher', (t) => listingRate(t, 3_000, 8))
  }

  const stamp = new Date().toISOString().replace(/[:.]/g, '-')
  mkdirSync(options.outDir, { recursive: true })
  const jsonPath = join(options.outDir, `${stamp}.json`)
  const mdPath = join(options.outDir, `${stamp}.md`)
  const report = {
    time: new Date().toISOString(),
    runs: options.runs,
    targets: options.targets.map(({ apiKey: _key, ...t }, i) => ({ name: i === 0 ? 'A' : 'B', ...t })),
    figures,
  }
  writeFileSync(jsonPath, `${JSON.stringify(report, null, 2)}\n`)
  writeFileSync(mdPath, markdown(report.targets, figures))
  console.log(`\nwrote ${jsonPath}\nwrote ${mdPath}`)
  return { figures, jsonPath, mdPath }
}

async function attempt(name: string, t: CompareTarget, measure: (t: CompareTarget) => Promise<number | null>): Promise<number | null> {
  try {
    return await measure(t)
  } catch (e) {
    console.warn(`  ${name} on ${t.baseUrl}: ${(e as Error).message.slice(0, 200)}`)
    return null
  }
}

function headers(t: CompareTarget, json = true): Record<string, string> {
  return { ...(t.apiKey ? { authorization: `Bearer ${t.apiKey}` } : {}), ...(json ? { 'content-type': 'application/json' } : {}) }
}

async function streamChat(t: CompareTarget, tokens: number): Promise<{ ttftMs: number; tps: number }> {
  const started = performance.now()
  const res = await fetch(`${t.baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: headers(t),
    body: JSON.stringify({ model: t.chatModel, messages: PROMPT, max_tokens: tokens, temperature: 0, stream: true, stream_options: { include_usage: true } }),
  })
  if (!res.ok) throw new Error(`chat: ${res.status} ${await res.text()}`)
  let first = 0
  let last = 0
  let events = 0
  let generated = 0
  const parser = createParser({
    onEvent: (e) => {
      if (e.data === '[DONE]') return
      const chunk = JSON.parse(e.data)
      if (chunk.usage?.completion_tokens) generated = chunk.usage.completion_tokens
      if (chunk.choices?.[0]?.delta?.content) {
        last = performance.now()
        first ||= last
        events++
      }
    },
  })
  const decoder = new TextDecoder()
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) parser.feed(decoder.decode(chunk, { stream: true }))
  // Servers that leave out the usage chunk: one event per token is the usual shape.
  const count = generated || events
  return { ttftMs: first - started, tps: count > 1 && last > first ? ((count - 1) * 1000) / (last - first) : 0 }
}

async function concurrentChats(t: CompareTarget, clients: number, total: number): Promise<{ latencies: number[]; perSecond: number }> {
  const latencies: number[] = []
  let next = 0
  const started = performance.now()
  const client = async () => {
    while (next < total) {
      const i = next++
      const begun = performance.now()
      const res = await fetch(`${t.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: headers(t),
        body: JSON.stringify({ model: t.chatModel, messages: [{ role: 'user', content: `Story ${i}: once upon a time` }], max_tokens: 32, temperature: 0 }),
      })
      const body = await res.text()
      if (!res.ok) throw new Error(`chat: ${res.status} ${body}`)
      latencies.push(performance.now() - begun)
    }
  }
  await Promise.all(Array.from({ length: clients }, client))
  return { latencies, perSecond: (latencies.length * 1000) / (performance.now() - started) }
}

async function embed(t: CompareTarget, input: string[]): Promise<void> {
  const res = await fetch(`${t.baseUrl}/v1/embeddings`, { method: 'POST', headers: headers(t), body: JSON.stringify({ model: t.embeddingModel, input }) })
  const body = await res.text()
  if (!res.ok) throw new Error(`embeddings: ${res.status} ${body}`)
}

async function translate(t: CompareTarget, audio: Buffer, name: string): Promise<void> {
  const form = new FormData()
  form.append('model', t.translationModel!)
  form.append('file', new Blob([new Uint8Array(audio)]), name)
  const res = await fetch(`${t.baseUrl}/v1/audio/translations`, { method: 'POST', headers: headers(t, false), body: form })
  const body = await res.text()
  if (!res.ok) throw new Error(`translation: ${res.status} ${body}`)
}

async function listingRate(t: CompareTarget, durationMs: number, clients: number): Promise<number> {
  let count = 0
  const deadline = performance.now() + durationMs
  const started = performance.now()
  const client = async () => {
    while (performance.now() < deadline) {
      const res = await fetch(`${t.baseUrl}/v1/models`, { headers: headers(t, false) })
      await res.arrayBuffer()
      if (!res.ok) throw new Error(`GET /v1/models: ${res.status}`)
      count++
    }
  }
  await Promise.all(Array.from({ length: clients }, client))
  return (count * 1000) / (performance.now() - started)
}

/** Seconds of audio in a WAV file (the format the figure uses); undefined for others. */
export function audioSeconds(bytes: Buffer): number | undefined {
  if (bytes.toString('latin1', 0, 4) !== 'RIFF' || bytes.toString('latin1', 8, 12) !== 'WAVE') return undefined
  let offset = 12
  let byteRate: number | undefined
  while (offset + 8 <= bytes.length) {
    const id = bytes.toString('latin1', offset, offset + 4)
    const size = bytes.readUInt32LE(offset + 4)
    if (id === 'fmt ') byteRate = bytes.readUInt32LE(offset + 16)
    if (id === 'data' && byteRate) return Math.min(size, bytes.length - offset - 8) / byteRate
    offset += 8 + size + (size % 2)
  }
  return undefined
}

function percentileOf(values: number[] | undefined, p: number): number | null {
  if (!values || values.length === 0) return null
  const sorted = [...values].sort((x, y) => x - y)
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!
}

function nullIfEmpty(values: number[]): number | null {
  return values.length === 0 ? null : median(values)
}

function show(value: number | null, unit: string): string {
  if (value === null) return '—'
  return `${fmt(value, value >= 100 ? 0 : value >= 10 ? 1 : 2)} ${unit}`
}

function markdown(targets: Array<Omit<CompareTarget, 'apiKey'> & { name: string }>, figures: Figure[]): string {
  const lines = [
    `# Benchmark: ${new Date().toISOString()}`,
    '',
    ...targets.map(
      (t) =>
        `- **${t.name}**: ${t.baseUrl} (chat \`${t.chatModel ?? '—'}\`, embeddings \`${t.embeddingModel ?? '—'}\`, translation \`${t.translationModel ?? '—'}\`)`,
    ),
    '',
    '| figure | A | B | B/A | better |',
    '|---|---:|---:|---:|---|',
    ...figures.map(
      (f) => `| ${f.name} | ${show(f.values[0], f.unit)} | ${show(f.values[1], f.unit)} | ${f.ratio === null ? '—' : `${fmt(f.ratio, 2)}×`} | ${f.better} |`,
    ),
    '',
  ]
  return lines.join('\n')
}

/** Models a server lists for each use: by `capabilities` where the server says, else the first. */
export async function pickModels(baseUrl: string, apiKey: string): Promise<Pick<CompareTarget, 'chatModel' | 'embeddingModel' | 'translationModel'>> {
  const res = await fetch(`${baseUrl}/v1/models`, { headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {} })
  if (!res.ok) throw new Error(`GET ${baseUrl}/v1/models: ${res.status} ${await res.text()}`)
  const models = ((await res.json()) as { data: Array<{ id: string; capabilities?: string[] }> }).data
  const withCapability = (c: string) => models.find((m) => m.capabilities?.includes(c))?.id
  const anyCapabilities = models.some((m) => m.capabilities)
  return {
    chatModel: withCapability('chat') ?? (anyCapabilities ? undefined : models[0]?.id),
    embeddingModel: withCapability('embeddings'),
    translationModel: withCapability('translation'),
  }
}

/** Two instances of Hearth on the shared fixtures (or generated tiny models): the bench, tried out. */
async function selfTargets(threads: number): Promise<{ targets: [CompareTarget, CompareTarget]; servers: BenchTarget[] }> {
  const shared = resolve(import.meta.dirname, '../../shared/fixtures/models')
  let files: string[]
  if (existsSync(join(shared, 'stories260K-chatml.gguf'))) {
    files = ['stories260K-chatml.gguf', 'bert-tiny-random-bge-vocab.gguf', 'ggml-tiny-random-multilingual.bin'].map((f) => join(shared, f))
  } else {
    console.warn('*** ../shared/fixtures is missing: comparing on generated random tiny models ***')
    const { generateTestModels, TEST_MODEL_FILES } = await import('../test/support/tiny-models.ts')
    const dir = mkdtempSync(join(tmpdir(), 'hearth-compare-models-'))
    generateTestModels(dir)
    files = [TEST_MODEL_FILES.llamaPlain, TEST_MODEL_FILES.bert, TEST_MODEL_FILES.whisper].map((f) => join(dir, f))
  }
  const servers = [await benchTarget({ modelFiles: files, threads }), await benchTarget({ modelFiles: files, threads })]
  const targets = (await Promise.all(servers.map(async (s) => ({ baseUrl: s.baseUrl, apiKey: s.apiKey, ...(await pickModels(s.baseUrl, s.apiKey)) })))) as [
    CompareTarget,
    CompareTarget,
  ]
  return { targets, servers }
}

export const COMPARE_FLAGS = {
  'base-url': { type: 'string', multiple: true },
  'api-key': { type: 'string', multiple: true },
  model: { type: 'string', multiple: true },
  'embedding-model': { type: 'string', multiple: true },
  'translation-model': { type: 'string', multiple: true },
  audio: { type: 'string' },
  runs: { type: 'string' },
  only: { type: 'string' },
  out: { type: 'string' },
  threads: { type: 'string' },
  self: { type: 'boolean' },
} as const

export const DEFAULT_AUDIO = resolve(import.meta.dirname, '../test/fixtures/audio/speech-s16.wav')

/** `--x A --x B`: A for the first server and B for the second; one value serves both. */
function pair(values: string[] | undefined): [string | undefined, string | undefined] {
  return [values?.[0], values?.[1] ?? values?.[0]]
}

export async function compareFromFlags(flags: {
  'base-url'?: string[]
  'api-key'?: string[]
  model?: string[]
  'embedding-model'?: string[]
  'translation-model'?: string[]
  audio?: string
  runs?: string
  only?: string
  out?: string
  threads?: string
  self?: boolean
}): Promise<void> {
  const runs = Number(flags.runs ?? 5)
  const common = {
    audioPath: resolve(flags.audio ?? DEFAULT_AUDIO),
    runs,
    only: flags.only?.split(','),
    outDir: resolve(flags.out ?? resolve(import.meta.dirname, 'results')),
  }
  if (flags.self) {
    const { targets, servers } = await selfTargets(Number(flags.threads ?? 1))
    try {
      await runCompare({ ...common, targets })
    } finally {
      for (const s of servers) await s.close()
    }
    return
  }
  const urls = flags['base-url'] ?? []
  if (urls.length !== 2) throw new Error('give two servers: --base-url A --base-url B (or --self)')
  const keys = pair(flags['api-key'])
  const chat = pair(flags.model)
  const embedding = pair(flags['embedding-model'])
  const translation = pair(flags['translation-model'])
  const targets = (await Promise.all(
    urls.map(async (url, i) => {
      const baseUrl = url.replace(/\/+$/, '').replace(/\/v1$/, '')
      const apiKey = keys[i] ?? ''
      const listed = await pickModels(baseUrl, apiKey).catch(() => ({}) as Awaited<ReturnType<typeof pickModels>>)
      return {
        baseUrl,
        apiKey,
        chatModel: chat[i] ?? listed.chatModel,
        embeddingModel: embedding[i] ?? listed.embeddingModel,
        translationModel: translation[i] ?? listed.translationModel,
      }
    }),
  )) as [CompareTarget, CompareTarget]
  await runCompare({ ...common, targets })
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const { values } = parseArgs({ options: COMPARE_FLAGS })
  await compareFromFlags(values)
  process.exit(0)
}
