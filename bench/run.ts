/**
 * `npm run bench -- [--runs N] [--only real-size,grammar,overhead,embeddings,remote,pool (pool-loads),defaults,speech,real-weights,amx,gpu,ollama,ollama-quick,retrieval,retrieval-quick,agents,agents-session,agents-together,agents-together-{3,5}-{shared,unshared},speculative] [--agents-model tiny] [--hearth-first] [--amx-types Q4_0,Q8_0,Q4_K_M,Q4_1] [--skip-upstream]`
 * Measures Hearth against the upstream programs it runs, built from the same source (see
 * bench/upstream-bench.ts and bench/speech-bench.ts), and prints each figure with its target. Not
 * a test: numbers vary with the machine.
 *
 * With two servers (`--base-url A --base-url B`, a key and model ids per server or one for both)
 * it runs bench/compare.ts instead: the same workload on both and the ratio per figure.
 */
import { existsSync } from 'node:fs'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { runAgentBench, TOGETHER_SHAPES } from './agents-bench.ts'
import { runAmxBench } from './amx-bench.ts'
import { runOllamaBench } from './ollama-bench.ts'
import { runRetrievalBench } from './retrieval-bench.ts'
import { runGpuBench } from './gpu-bench.ts'
import { COMPARE_FLAGS, compareFromFlags } from './compare.ts'
import { runPoolBench } from './pool-bench.ts'
import { runRemoteBench } from './remote-bench.ts'
import { runSpeculativeBench } from './speculative-bench.ts'
import { runSpeechBench, speechBenchInputs } from './speech-bench.ts'
import { runUpstreamBench } from './upstream-bench.ts'
import { useRunScratch } from '../test/support/run-scratch.ts'

// The model copies and data folders below go into this run's own folder, removed at exit.
const removeScratch = useRunScratch('bench')
process.on('exit', removeScratch)
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => process.exit(130))

// The same flags as the two-server comparison, which takes over when two --base-url are given.
const { values: flags } = parseArgs({
  options: {
    ...COMPARE_FLAGS,
    runs: { type: 'string', default: '5' },
    'amx-types': { type: 'string' },
    'skip-upstream': { type: 'boolean', default: false },
    'agents-model': { type: 'string', default: 'real-size' },
    'hearth-first': { type: 'boolean', default: false },
  },
})

if ((flags['base-url']?.length ?? 0) >= 2) {
  await compareFromFlags(flags)
  process.exit(0)
}

const sharedModels = resolve(import.meta.dirname, '../../shared/fixtures/models')
const threads = Number(flags.threads ?? 1)
const runs = Number(flags.runs)
const wanted = (name: string) => !flags.only || flags.only.split(',').includes(name)
/** Named in --only: the quick variants run only when asked for by name. */
const named = (name: string) => flags.only?.split(',').includes(name) ?? false

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

const results: Record<string, Record<string, number | string | Record<string, number | string>>> = await runUpstreamBench({
  smallChatModel: await chatModelPath(),
  embeddingModel: await embeddingModelPath(),
  runs,
  only: wanted,
})
if (wanted('amx'))
  results.amx = await runAmxBench({ runs: Math.max(3, Math.ceil(runs / 2)), types: flags['amx-types']?.split(','), skipUpstream: flags['skip-upstream'] })
if (wanted('gpu')) results.gpu = await runGpuBench(runs)
if (wanted('ollama') || wanted('ollama-quick'))
  results.ollama = await runOllamaBench({ runs: Math.max(3, Math.ceil(runs / 2)), session: !named('ollama-quick') })
if (wanted('retrieval') || wanted('retrieval-quick')) results.retrieval = await runRetrievalBench({ runs, answers: !named('retrieval-quick') })
if (wanted('pool') || named('pool-loads')) results.pool = await runPoolBench({ runs: Math.max(3, Math.ceil(runs / 2)), loadsOnly: named('pool-loads') })
if (wanted('speculative')) results.speculative = await runSpeculativeBench({ runs: Math.max(3, Math.ceil(runs / 2)) })
if (wanted('remote')) results.remote = await runRemoteBench({ smallChatModel: await chatModelPath(), runs })
const togetherShapes = TOGETHER_SHAPES.filter(
  (t) => wanted('agents') || wanted('agents-together') || wanted(`agents-together-${t.count}-${t.shared ? 'shared' : 'unshared'}`),
)
if (wanted('agents') || wanted('agents-session') || togetherShapes.length > 0) {
  const model = flags['agents-model'] === 'tiny' ? 'tiny' : 'real-size'
  results.agents = await runAgentBench({
    session: wanted('agents') || wanted('agents-session'),
    together: togetherShapes,
    model,
    hearthFirst: flags['hearth-first'],
  })
}
if (wanted('speech') || wanted('translation')) {
  const inputs = await speechBenchInputs()
  results.speech = {}
  for (const [i, input] of inputs.entries()) {
    results.speech[input.label] = await runSpeechBench({ ...input, threads, runs, decodeTimes: i === inputs.length - 1 })
  }
}
console.log(`\n${JSON.stringify(results, null, 2)}`)
process.exit(0)
