/**
 * Embeddings per second for 256 short sentences, sent as one request and as 256 single requests:
 * through the HTTP API, and straight through @fugood/llama.node in this process set up the way the
 * engine sets it up (embedding mode, one slot of the binding's queue). Target: the API keeps ≥ 90 %
 * of the direct rate for the batched request. Also printed: one request with 2048 inputs, and for
 * reference the binding packing 4 sequences per decode, which the engine does not do (see
 * native-models/engine/embedding-runtime.ts).
 *
 * Alone: `npx tsx bench/embeddings-bench.ts [--base-url URL --api-key KEY --model ID] [--threads N] [--runs N]`
 */
import { existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { readModelFileHeader } from '../native-models/catalog/model-file-header.ts'
import { llamaNode, type LlamaContext } from '../native-models/engine/llama-binding.ts'
import { benchTarget, fmt, median } from './bench-server.ts'

export interface EmbeddingsBenchOptions {
  baseUrl?: string
  apiKey?: string
  /** The id the server at baseUrl knows the model by; defaults to the file's name without .gguf. */
  model?: string
  modelPath: string
  threads: number
  runs?: number
}

const COUNT = 256
const BIG = 2048
const WORDS = (
  'the a small old new river town dog bird tree house people walk talk read write every day night ' +
  'near over under with about city sea light water green blue quiet busy morning story book'
).split(' ')

/** Short sentences (5 to 12 words), all different, the same on every run. */
function sentences(count: number): string[] {
  return Array.from({ length: count }, (_, i) =>
    Array.from({ length: 5 + (i % 8) }, (_, j) => WORDS[(i * 7 + j * 11 + (i >> 3)) % WORDS.length]).join(' ') + ` ${i}`,
  )
}

export async function runEmbeddingsBench(options: EmbeddingsBenchOptions): Promise<Record<string, number>> {
  const runs = options.runs ?? 5
  const model = options.model ?? basename(options.modelPath).replace(/\.gguf$/, '')
  const texts = sentences(COUNT)
  console.log(`\n# embeddings: ${COUNT} short sentences, ${runs} runs, ${options.threads} thread(s), ${basename(options.modelPath)}`)

  const target = await benchTarget({ ...options, modelFiles: [options.modelPath] })
  const direct = await DirectEmbedder.open(options.modelPath, options.threads, 1)
  const samples = { directBatched: [] as number[], apiBatched: [] as number[], directSingle: [] as number[], apiSingle: [] as number[] }
  let bigMs: number
  try {
    const post = (input: string | string[]) => postEmbeddings(target.baseUrl, target.apiKey, model, input)
    await post(texts.slice(0, 4)) // loads the model
    await direct.all(texts) // warms up
    // Direct and API runs alternate, so a machine busy with other work slows both alike.
    for (let run = 0; run < runs; run++) {
      samples.directBatched.push(await rate(COUNT, () => direct.all(texts)))
      samples.apiBatched.push(await rate(COUNT, () => post(texts)))
      samples.directSingle.push(await rate(COUNT, () => direct.oneByOne(texts)))
      samples.apiSingle.push(await rate(COUNT, async () => {
        for (const text of texts) await post(text)
      }))
    }
    const big = sentences(BIG)
    const bigStarted = performance.now()
    await post(big)
    bigMs = performance.now() - bigStarted
  } finally {
    await direct.close()
    await target.close()
  }
  const packed4 = await packedRate(options.modelPath, options.threads, texts, runs)

  const figures = {
    direct_batched_eps: median(samples.directBatched),
    api_batched_eps: median(samples.apiBatched),
    direct_single_eps: median(samples.directSingle),
    api_single_eps: median(samples.apiSingle),
    batched_ratio: 0,
    single_ratio: 0,
    api_2048_inputs_ms: bigMs,
    direct_packed4_eps: packed4,
  }
  figures.batched_ratio = figures.api_batched_eps / figures.direct_batched_eps
  figures.single_ratio = figures.api_single_eps / figures.direct_single_eps
  const pct = (r: number) => `${fmt(r * 100)} %`
  console.log(
    `embeddings/s  one request of ${COUNT}   direct ${fmt(figures.direct_batched_eps)}   api ${fmt(figures.api_batched_eps)}   ` +
      `ratio ${pct(figures.batched_ratio)} (target ≥ 90 %)`,
  )
  console.log(
    `embeddings/s  ${COUNT} single requests   direct ${fmt(figures.direct_single_eps)}   api ${fmt(figures.api_single_eps)}   ` +
      `ratio ${pct(figures.single_ratio)}`,
  )
  console.log(
    `batched over single           direct ${fmt(figures.direct_batched_eps / figures.direct_single_eps, 2)}×   ` +
      `api ${fmt(figures.api_batched_eps / figures.api_single_eps, 2)}×`,
  )
  console.log(`one request of ${BIG} inputs     ${fmt(bigMs, 0)} ms (${fmt((BIG * 1000) / bigMs)} embeddings/s)`)
  console.log(`for reference: the binding packing 4 sequences per decode (not bit-exact, not used) ${fmt(packed4)} embeddings/s`)
  return figures
}

async function rate(count: number, work: () => Promise<unknown>): Promise<number> {
  const started = performance.now()
  await work()
  return (count * 1000) / (performance.now() - started)
}

async function postEmbeddings(baseUrl: string, apiKey: string, model: string, input: string | string[]): Promise<void> {
  const res = await fetch(`${baseUrl}/v1/embeddings`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    // base64 is what the official clients ask for unless told otherwise.
    body: JSON.stringify({ model, input, encoding_format: 'base64' }),
  })
  const body = await res.text()
  if (!res.ok) throw new Error(`embeddings request failed: ${res.status} ${body}`)
}

/** The binding alone, set up as the engine sets it up: all texts queued at once, or one by one. */
class DirectEmbedder {
  private constructor(private readonly context: LlamaContext) {}

  static async open(modelPath: string, threads: number, slots: number): Promise<DirectEmbedder> {
    const header = await readModelFileHeader(modelPath)
    const contextLength = (header.format === 'gguf' ? header.trainedContext : undefined) ?? 512
    const context = await llamaNode.loadModel({
      model: modelPath,
      n_ctx: contextLength * slots,
      n_batch: contextLength * slots,
      n_ubatch: contextLength * slots,
      n_parallel: slots,
      n_threads: threads,
      n_gpu_layers: 0,
      embedding: true,
    })
    await context.parallel.enable({ n_parallel: slots, n_batch: contextLength * slots })
    return new DirectEmbedder(context)
  }

  async all(texts: string[]): Promise<void> {
    const queued = []
    for (const text of texts) queued.push(await this.context.parallel.embedding(text, { embd_normalize: -1 }))
    await Promise.all(queued.map((q) => q.promise))
  }

  async oneByOne(texts: string[]): Promise<void> {
    for (const text of texts) await (await this.context.parallel.embedding(text, { embd_normalize: -1 })).promise
  }

  async close(): Promise<void> {
    this.context.parallel.disable()
    await this.context.release()
  }
}

/** What the binding reaches when it packs 4 sequences into each decode. */
async function packedRate(modelPath: string, threads: number, texts: string[], runs: number): Promise<number> {
  const packed = await DirectEmbedder.open(modelPath, threads, 4)
  try {
    await packed.all(texts)
    const rates: number[] = []
    for (let run = 0; run < runs; run++) rates.push(await rate(texts.length, () => packed.all(texts)))
    return median(rates)
  } finally {
    await packed.close()
  }
}

async function benchModelPath(): Promise<string> {
  const fixture = resolve(import.meta.dirname, '../../shared/fixtures/models/bert-tiny-random-bge-vocab.gguf')
  if (existsSync(fixture)) return fixture
  console.warn('*** ../shared/fixtures is missing: benchmarking a generated random tiny BERT instead of bert-tiny-random-bge-vocab ***')
  const { writeTinyBert } = await import('../test/support/tiny-models.ts')
  const path = join(mkdtempSync(join(tmpdir(), 'hearth-bench-model-')), 'tiny-bert.gguf')
  writeTinyBert(path)
  return path
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const { values: flags } = parseArgs({
    options: {
      'base-url': { type: 'string' },
      'api-key': { type: 'string' },
      model: { type: 'string' },
      threads: { type: 'string', default: '1' },
      runs: { type: 'string', default: '5' },
    },
  })
  const figures = await runEmbeddingsBench({
    baseUrl: flags['base-url'],
    apiKey: flags['api-key'],
    model: flags.model,
    modelPath: await benchModelPath(),
    threads: Number(flags.threads),
    runs: Number(flags.runs),
  })
  console.log(`\n${JSON.stringify({ embeddings: figures }, null, 2)}`)
  process.exit(0)
}
