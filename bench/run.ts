/**
 * `npm run bench -- [--base-url URL --api-key KEY] [--model ID] [--embedding-model ID] [--translation-model ID]
 *  [--threads N] [--only chat,concurrency,embeddings,translation,…]`
 * Measures Hearth (or any OpenAI-compatible server at --base-url) against the bindings driven
 * directly, and prints each figure with its target. Not a test: numbers vary with the machine.
 *
 * With two servers (`--base-url A --base-url B`, a key and model ids per server or one for both)
 * it runs bench/compare.ts instead: the same workload on both and the ratio per figure.
 */
import { existsSync } from 'node:fs'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { runChatBench } from './chat-bench.ts'
import { runConcurrencyBench } from './concurrency-bench.ts'
import { COMPARE_FLAGS, compareFromFlags } from './compare.ts'
import { runEmbeddingsBench } from './embeddings-bench.ts'
import { runTranslationBench, translationBenchInputs } from './translation-bench.ts'

// The same flags as the two-server comparison, which takes over when two --base-url are given.
const { values: flags } = parseArgs({ options: { ...COMPARE_FLAGS, runs: { type: 'string', default: '5' } } })

if ((flags['base-url']?.length ?? 0) >= 2) {
  await compareFromFlags(flags)
  process.exit(0)
}

const sharedModels = resolve(import.meta.dirname, '../../shared/fixtures/models')
const threads = Number(flags.threads ?? 1)
const runs = Number(flags.runs)
const wanted = (name: string) => !flags.only || flags.only.split(',').includes(name)

async function chatModelPath(): Promise<string> {
  const fixture = join(sharedModels, 'stories260K-chatml.gguf')
  if (existsSync(fixture)) return fixture
  console.warn('*** ../shared/fixtures is missing: benchmarking a generated random tiny llama instead of stories260K ***')
  const { writeTinyLlama } = await import('../test/support/tiny-models.ts')
  const path = join(mkdtempSync(join(tmpdir(), 'hearth-bench-model-')), 'tiny-chat.gguf')
  writeTinyLlama(path, { contextLength: 2048 })
  return path
}

async function embeddingModelPath(): Promise<string> {
  const fixture = join(sharedModels, 'bert-tiny-random-bge-vocab.gguf')
  if (existsSync(fixture)) return fixture
  console.warn('*** ../shared/fixtures is missing: benchmarking a generated random tiny BERT instead ***')
  const { writeTinyBert } = await import('../test/support/tiny-models.ts')
  const path = join(mkdtempSync(join(tmpdir(), 'hearth-bench-model-')), 'tiny-bert.gguf')
  writeTinyBert(path)
  return path
}

const results: Record<string, Record<string, number>> = {}
const common = { baseUrl: flags['base-url']?.[0], apiKey: flags['api-key']?.[0], threads, runs }
const chatModel = flags.model?.[0]
if (wanted('chat')) results.chat = await runChatBench({ ...common, model: chatModel, modelPath: await chatModelPath() })
if (wanted('concurrency')) {
  // The target is for 2 threads; --threads still wins when given.
  const concurrencyThreads = flags.threads === undefined ? 2 : threads
  results.concurrency = await runConcurrencyBench({ ...common, threads: concurrencyThreads, model: chatModel, modelPath: await chatModelPath() })
}
if (wanted('embeddings')) {
  results.embeddings = await runEmbeddingsBench({ ...common, model: flags['embedding-model']?.[0], modelPath: await embeddingModelPath() })
}
if (wanted('translation')) {
  results.translation = await runTranslationBench({ ...common, model: flags['translation-model']?.[0], ...(await translationBenchInputs()) })
}
console.log(`\n${JSON.stringify(results, null, 2)}`)
process.exit(0)
