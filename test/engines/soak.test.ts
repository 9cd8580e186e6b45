/**
 * A soak of mixed traffic against tiny models for a bounded time (HEARTH_SOAK_SECONDS, 60 by
 * default): chat streamed and not, clients that disconnect halfway, a picture now and then,
 * embeddings, translation, listings and metrics, bursts past the queue and a key past its quota.
 * No crash, no error but 503 overloaded and 429 insufficient_quota, the same engine processes
 * throughout and none left after, and the server's memory and open files within bounds.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createParser } from 'eventsource-parser'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { engineProcessIds, isRunning, openFileCount, residentBytes } from '../support/process-stats.ts'
import { startTestServer, type TestServer } from '../support/server-process.ts'
import { makePng } from '../support/test-images.ts'
import { generateTestModels } from '../support/tiny-models.ts'

const SECONDS = Number(process.env.HEARTH_SOAK_SECONDS ?? 60)
const MB = 1024 * 1024
/** Growth allowed after warm-up, under the capped heap: caches fill, but nothing may grow per request. */
const RSS_GROWTH_BOUND = 64 * MB
const FD_GROWTH_BOUND = 40
const HEAP_CAP_MB = 128
const AUDIO = readFileSync(new URL('../fixtures/audio/speech.opus.ogg', import.meta.url))

let server: TestServer
let limitedKey: string
let png: Buffer

beforeAll(async () => {
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-soak-'))
  generateTestModels(modelsDir)
  writeFileSync(
    join(modelsDir, 'models.json'),
    JSON.stringify({
      models: [
        { id: 'chat', file: 'tiny-llama-chat.gguf', mmproj: 'mmproj-tiny-llama-chat.gguf', context_length: 512 },
        { id: 'bert', file: 'tiny-bert.gguf' },
        { id: 'whisper', file: 'ggml-tiny-whisper.bin' },
      ],
    }),
  )
  // A capped heap makes a leak fail the soak (the server runs out of memory) rather than wait on
  // how far V8 lets the heap grow before it collects, which differs by Node version.
  server = await startTestServer({
    modelsDir,
    args: ['--max-queue', '6', '--request-timeout', '30'],
    env: { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --max-old-space-size=${HEAP_CAP_MB}`.trim() },
  })
  const made = await fetch(`${server.url}/api/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ label: 'soak, limited', requests_per_minute: 20 }),
  })
  limitedKey = ((await made.json()) as { key: string }).key
  png = await makePng(32, 32)
}, 120_000)

afterAll(async () => {
  await server?.stop()
})

interface Tally {
  requests: number
  byStatus: Map<string, number>
  unexpected: string[]
  disconnects: number
}

const tally: Tally = { requests: 0, byStatus: new Map(), unexpected: [], disconnects: 0 }

/** Counts an answer; anything but 2xx, 503 overloaded or 429 insufficient_quota is a failure. */
async function judge(what: string, res: Response, body?: string): Promise<string> {
  const text = body ?? (await res.text())
  tally.requests++
  tally.byStatus.set(String(res.status), (tally.byStatus.get(String(res.status)) ?? 0) + 1)
  if (res.ok) {
    if (text.includes('"error"') && res.headers.get('content-type')?.startsWith('text/event-stream'))
      tally.unexpected.push(`${what}: stream error ${text.slice(-300)}`)
    return text
  }
  let code: string | undefined
  try {
    code = (JSON.parse(text) as { error: { code: string } }).error.code
  } catch {
    // not the error body: unexpected below
  }
  const expected = (res.status === 503 && code === 'overloaded') || (res.status === 429 && code === 'insufficient_quota')
  if (!expected) tally.unexpected.push(`${what}: ${res.status} ${text.slice(0, 300)}`)
  return text
}

function post(path: string, body: unknown, key = server.apiKey, signal?: AbortSignal) {
  return fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal,
  })
}

const chatBody = (i: number, extra: object = {}) => ({
  model: 'chat',
  messages: [{ role: 'user', content: `Story number ${i}: once upon a time` }],
  max_tokens: 12 + (i % 20),
  temperature: (i % 10) / 10,
  ...extra,
})

/** Runs `step` over and over until the deadline; a thrown error is a failure, not a crash of the test. */
async function loop(name: string, deadline: number, step: (i: number) => Promise<void>, pauseMs = 0): Promise<void> {
  for (let i = 0; Date.now() < deadline; i++) {
    try {
      await step(i)
    } catch (e) {
      tally.unexpected.push(`${name} #${i}: ${(e as Error).message}`)
    }
    if (pauseMs) await new Promise((r) => setTimeout(r, pauseMs))
  }
}

async function readStream(res: Response, abortAfterEvents?: number, controller?: AbortController): Promise<string> {
  let text = ''
  let events = 0
  const parser = createParser({ onEvent: () => events++ })
  const decoder = new TextDecoder()
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      const piece = decoder.decode(chunk, { stream: true })
      text += piece
      parser.feed(piece)
      if (abortAfterEvents !== undefined && events >= abortAfterEvents) {
        controller?.abort()
        tally.disconnects++
        break
      }
    }
  } catch (e) {
    if ((e as Error).name !== 'AbortError') throw e
  }
  return text
}

describe('soak', () => {
  it(
    `serves ${SECONDS} s of mixed traffic within bounds`,
    async () => {
      const pid = server.process.pid!
      const started = Date.now()
      const deadline = started + SECONDS * 1000
      const samples: Array<{ t: number; rss: number; fds: number; engines: number[] }> = []
      const sampler = setInterval(() => {
        samples.push({ t: (Date.now() - started) / 1000, rss: residentBytes(pid) ?? 0, fds: openFileCount(pid) ?? 0, engines: engineProcessIds(pid) })
      }, 1_000)

      const clients = [
        loop('chat', deadline, async (i) => {
          await judge('chat', await post('/v1/chat/completions', chatBody(i)))
        }),
        loop('chat stream', deadline, async (i) => {
          const res = await post('/v1/chat/completions', chatBody(i, { stream: true, stream_options: { include_usage: true } }))
          await judge('chat stream', res, res.ok ? await readStream(res) : undefined)
        }),
        loop('chat stream, client leaves', deadline, async (i) => {
          const controller = new AbortController()
          const res = await post('/v1/chat/completions', chatBody(i, { stream: true, max_tokens: 400 }), server.apiKey, controller.signal)
          if (!res.ok) return void (await judge('leaver', res))
          tally.requests++
          await readStream(res, 3 + (i % 5), controller)
        }),
        loop(
          'vision',
          deadline,
          async (i) => {
            const content = [
              { type: 'text', text: 'What is this?' },
              { type: 'image_url', image_url: { url: `data:image/png;base64,${png.toString('base64')}` } },
            ]
            await judge('vision', await post('/v1/chat/completions', { model: 'chat', messages: [{ role: 'user', content }], max_tokens: 4 + (i % 4) }))
          },
          500,
        ),
        loop('embeddings', deadline, async (i) => {
          const input = Array.from({ length: 1 + (i % 8) }, (_, k) => `sentence ${i} ${k} about a river and a town`)
          await judge('embeddings', await post('/v1/embeddings', { model: 'bert', input, encoding_format: i % 2 ? 'base64' : 'float' }))
        }),
        loop('translation', deadline, async (i) => {
          const form = new FormData()
          form.append('model', 'whisper')
          form.append('file', new Blob([new Uint8Array(AUDIO)]), 'speech.ogg')
          if (i % 2) form.append('stream', 'true')
          const res = await fetch(`${server.url}/v1/audio/translations`, { method: 'POST', headers: { authorization: `Bearer ${server.apiKey}` }, body: form })
          await judge('translation', res)
        }),
        loop(
          'listings',
          deadline,
          async (i) => {
            const path = ['/v1/models', '/health', '/metrics', '/api/models', '/v1/models/chat'][i % 5]!
            await judge(path, await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${server.apiKey}` } }))
          },
          100,
        ),
        loop(
          'limited key',
          deadline,
          async () => {
            await judge('limited key', await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${limitedKey}` } }))
          },
          500,
        ),
        loop(
          'burst',
          deadline,
          async (i) => {
            // More at once than the chat model's slots plus its queue: some get 503 overloaded.
            const burst = Array.from({ length: 12 }, (_, k) => post('/v1/chat/completions', chatBody(i * 12 + k, { max_tokens: 24 })))
            await Promise.all(burst.map(async (r) => judge('burst', await r)))
          },
          4_000,
        ),
      ]
      await Promise.all(clients)
      // Let the last answers settle, then look once more.
      await new Promise((r) => setTimeout(r, 2_000))
      clearInterval(sampler)
      const end = { rss: residentBytes(pid) ?? 0, fds: openFileCount(pid) ?? 0, engines: engineProcessIds(pid) }

      const warm = samples.filter((s) => s.t >= Math.min(15, SECONDS / 4))
      const baseline = warm[0] ?? samples[0]!
      const maxRss = Math.max(...warm.map((s) => s.rss), end.rss)
      const maxFds = Math.max(...warm.map((s) => s.fds), end.fds)
      const statuses = [...tally.byStatus].map(([s, k]) => `${s}×${k}`).join(' ')
      console.log(
        `soak: ${tally.requests} requests in ${SECONDS} s (${statuses}; ${tally.disconnects} clients left mid-stream); ` +
          `server RSS ${(baseline.rss / MB).toFixed(0)} MB after warm-up, max ${(maxRss / MB).toFixed(0)} MB, end ${(end.rss / MB).toFixed(0)} MB; ` +
          `open files ${baseline.fds} after warm-up, max ${maxFds}, end ${end.fds}; engines ${end.engines.length}`,
      )

      expect(tally.unexpected.slice(0, 20)).toEqual([])
      expect(tally.requests).toBeGreaterThan(SECONDS * 5)
      expect(tally.byStatus.get('200') ?? 0).toBeGreaterThan(SECONDS * 4)
      // The same three engines from warm-up to the end: none crashed, none was replaced.
      expect(baseline.engines).toHaveLength(3)
      for (const s of warm) expect(s.engines).toEqual(baseline.engines)
      expect(end.engines).toEqual(baseline.engines)
      expect(maxRss - baseline.rss).toBeLessThan(RSS_GROWTH_BOUND)
      expect(maxFds - baseline.fds).toBeLessThan(FD_GROWTH_BOUND)
      expect(end.fds - baseline.fds).toBeLessThan(10)

      // Still answering, and the metrics saw the traffic.
      expect((await post('/v1/chat/completions', chatBody(0))).status).toBe(200)
      const metrics = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${server.apiKey}` } })).text()
      expect(metrics).toMatch(/^hearth_audio_seconds_total\{model="whisper"\} [1-9]/m)
      expect(metrics).toMatch(/^hearth_tokens_total\{model="chat",type="completion"\} [1-9]/m)
      expect(metrics).toMatch(/^hearth_http_requests_total\{method="POST",route="\/v1\/chat\/completions",status="503"\} [1-9]/m)
      // When it stops, no engine process is left behind.
      await server.stop()
      await new Promise((r) => setTimeout(r, 500))
      for (const engine of end.engines) expect(isRunning(engine), `engine ${engine} still running`).toBe(false)
    },
    (SECONDS + 90) * 1000,
  )
})
