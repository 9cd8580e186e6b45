/**
 * Aggregate decode speed with 1, 2, 4 and 8 concurrent streamed requests to one model. Target:
 * 4 concurrent streams deliver at least 1.5× the single-stream aggregate (stories260K, 2 threads).
 */
import { createParser } from 'eventsource-parser'
import { benchTarget, fmt, median } from './bench-server.ts'

export interface ConcurrencyBenchOptions {
  baseUrl?: string
  apiKey?: string
  model?: string
  modelPath: string
  threads: number
  runs?: number
  tokens?: number
}

const PROMPTS = ['Once upon a time', 'The little dog', 'Tom and Sue went to the park', 'A big red ball', 'The sun was hot', 'Lily had a cat', 'One day a bird', 'The boy ran fast']

export async function runConcurrencyBench(options: ConcurrencyBenchOptions): Promise<Record<string, number>> {
  const tokens = options.tokens ?? 128
  const runs = options.runs ?? 3
  console.log(`\n# concurrency: ${tokens} tokens per stream, ${options.threads} thread(s), parallel slots 4`)
  const target = await benchTarget({ ...options, modelFiles: [options.modelPath], extraArgs: ['--parallel', '4', '--max-queue', '16'] })
  const model = options.model ?? options.modelPath.split('/').pop()!.replace(/\.gguf$/, '')
  const figures: Record<string, number> = {}
  try {
    await stream(target.baseUrl, target.apiKey, model, PROMPTS[0]!, 8) // load
    for (const clients of [1, 2, 4, 8]) {
      const rates: number[] = []
      for (let r = 0; r < runs; r++) {
        const started = performance.now()
        const counts = await Promise.all(PROMPTS.slice(0, clients).map((p) => stream(target.baseUrl, target.apiKey, model, p, tokens)))
        const seconds = (performance.now() - started) / 1000
        rates.push(counts.reduce((a, b) => a + b, 0) / seconds)
      }
      figures[`aggregate_tps_${clients}`] = median(rates)
      console.log(`${clients} stream(s): ${fmt(median(rates))} tokens/s in total`)
    }
  } finally {
    await target.close()
  }
  figures.speedup_4_vs_1 = figures.aggregate_tps_4! / figures.aggregate_tps_1!
  console.log(`4 streams vs 1: ${fmt(figures.speedup_4_vs_1, 2)}× (target ≥ 1.5×)`)
  return figures
}

/** One streamed request; returns the tokens it generated (from the usage chunk). */
async function stream(baseUrl: string, apiKey: string, model: string, prompt: string, tokens: number): Promise<number> {
  const res = await fetch(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({
      model,
      messages: [{ role: 'user', content: prompt }],
      max_tokens: tokens,
      stream: true,
      stream_options: { include_usage: true },
    }),
  })
  if (!res.ok) throw new Error(`request failed: ${res.status} ${await res.text()}`)
  let generated = 0
  const parser = createParser({
    onEvent: (e) => {
      if (e.data !== '[DONE]') generated = JSON.parse(e.data).usage?.completion_tokens ?? generated
    },
  })
  const decoder = new TextDecoder()
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) parser.feed(decoder.decode(chunk, { stream: true }))
  return generated
}
