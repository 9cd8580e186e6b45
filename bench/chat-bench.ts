/**
 * Decode speed and time to first token for chat: streamed through the HTTP API against the same model
 * driven directly through @fugood/llama.node in this process. Targets: the API keeps ≥ 95 % of the
 * direct decode rate and adds ≤ 5 ms to the time to first token.
 */
import { createParser } from 'eventsource-parser'
import { llamaNode } from '../native-models/engine/llama-binding.ts'
import { benchTarget, fmt, median } from './bench-server.ts'

export interface ChatBenchOptions {
  baseUrl?: string
  apiKey?: string
  model?: string
  modelPath: string
  threads: number
  tokens?: number
  runs?: number
}

interface Sample {
  ttftMs: number
  decodePerSecond: number
}

const PROMPT = [{ role: 'user', content: 'Once upon a time' }]

export async function runChatBench(options: ChatBenchOptions): Promise<Record<string, number>> {
  const tokens = options.tokens ?? 256
  const runs = options.runs ?? 5
  console.log(`\n# chat: ${tokens} tokens, ${runs} runs, ${options.threads} thread(s)`)

  const direct = await directSamples(options.modelPath, options.threads, tokens, runs)
  // One slot: the same single-sequence decoding the direct path uses, so the ratio is our overhead.
  // (Parallel slots trade some single-stream speed for throughput; the concurrency bench measures them.)
  const target = await benchTarget({ ...options, modelFiles: [options.modelPath], extraArgs: ['--parallel', '1'] })
  const model = options.model ?? options.modelPath.split('/').pop()!.replace(/\.gguf$/, '')
  let api: Sample[]
  try {
    await apiSample(target.baseUrl, target.apiKey, model, 8) // loads the model
    api = []
    for (let i = 0; i < runs; i++) api.push(await apiSample(target.baseUrl, target.apiKey, model, tokens))
  } finally {
    await target.close()
  }

  const figures = {
    direct_decode_tps: median(direct.map((s) => s.decodePerSecond)),
    api_decode_tps: median(api.map((s) => s.decodePerSecond)),
    direct_ttft_ms: median(direct.map((s) => s.ttftMs)),
    api_ttft_ms: median(api.map((s) => s.ttftMs)),
  }
  const ratio = figures.api_decode_tps / figures.direct_decode_tps
  const addedTtft = figures.api_ttft_ms - figures.direct_ttft_ms
  console.log(`decode tokens/s   direct ${fmt(figures.direct_decode_tps)}   api ${fmt(figures.api_decode_tps)}   ratio ${fmt(ratio * 100)} % (target ≥ 95 %)`)
  console.log(`first token ms    direct ${fmt(figures.direct_ttft_ms, 2)}   api ${fmt(figures.api_ttft_ms, 2)}   added ${fmt(addedTtft, 2)} ms (target ≤ 5 ms)`)
  return { ...figures, decode_ratio: ratio, ttft_added_ms: addedTtft }
}

async function directSamples(modelPath: string, threads: number, tokens: number, runs: number): Promise<Sample[]> {
  const context = await llamaNode.loadModel({ model: modelPath, n_ctx: 2048, n_threads: threads, n_gpu_layers: 0 })
  try {
    const samples: Sample[] = []
    for (let i = 0; i <= runs; i++) {
      const started = performance.now()
      const stamps: number[] = []
      // As a program using the binding directly would: messages in, the model's template applied.
      await context.completion({ messages: PROMPT, jinja: true, n_predict: tokens, temperature: 0, top_k: 1 }, () =>
        stamps.push(performance.now()),
      )
      await new Promise((r) => setTimeout(r, 20))
      if (i > 0) samples.push(sampleOf(started, stamps)) // the first run warms up
    }
    return samples
  } finally {
    await context.release()
  }
}

async function apiSample(baseUrl: string, apiKey: string, model: string, tokens: number): Promise<Sample> {
  const started = performance.now()
  const res = await fetch(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ model, messages: PROMPT, max_tokens: tokens, temperature: 0, stream: true, stream_options: { include_usage: true } }),
  })
  if (!res.ok) throw new Error(`chat request failed: ${res.status} ${await res.text()}`)
  let first = 0
  let last = 0
  let generated = 0
  const parser = createParser({
    onEvent: (e) => {
      if (e.data === '[DONE]') return
      const chunk = JSON.parse(e.data)
      if (chunk.usage) generated = chunk.usage.completion_tokens
      if (chunk.choices?.[0]?.delta?.content) {
        last = performance.now()
        first ||= last
      }
    },
  })
  const decoder = new TextDecoder()
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) parser.feed(decoder.decode(chunk, { stream: true }))
  // A fast server may merge tokens into one event, so tokens are counted from usage, not events.
  return { ttftMs: first - started, decodePerSecond: generated > 1 ? ((generated - 1) * 1000) / (last - first) : 0 }
}

/** Time to the first token, and the rate of the tokens after it. */
function sampleOf(started: number, stamps: number[]): Sample {
  const first = stamps[0] ?? performance.now()
  const last = stamps.at(-1) ?? first
  return { ttftMs: first - started, decodePerSecond: stamps.length > 1 ? ((stamps.length - 1) * 1000) / (last - first) : 0 }
}
