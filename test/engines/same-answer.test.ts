/**
 * A greedy answer never changes (issue 65, item 1; docs/determinism.md): through Hearth's real server
 * and engines, on trained weights in every weight type Hearth tests, the same request at temperature
 * 0 gets the same answer token for token, with the same logprobs to the last bit, whichever way the
 * engine's batches fell:
 * - fresh: the whole prompt computed in one batch;
 * - read back from the prompt cache: the same request again (all but the prompt's last token come
 *   from the slot's cache; that one is computed alone, on the one-row path);
 * - beside another stream: two requests at once in two slots, each decoded in batches with the
 *   other's rows, and one's prompt read in a batch with the other's next token;
 * - split differently: a second turn whose first part is cached from the first turn, against the
 *   same conversation computed whole by an engine that never saw it;
 * - read back from disk: the model unloaded (its slots saved) and loaded again;
 * - with speculation (on by default, so every request above drafts) and without it (`speculative:
 *   false`: each token decoded alone).
 * SmolLM2-135M-Instruct (the Q4_1 file as shipped) is requantized here, once per run, into F16, Q8_0,
 * Q4_0, Q4_K_M, Q5_K_S and Q6_K (SmolLM2's 576-wide rows are not a multiple of 256, so its K-quant
 * files keep Q5_0/Q5_1/Q8_0 where a K-quant does not fit; the Q4_K, Q5_K and Q6_K tensors they do
 * hold run through those types' kernels); Gemma 3 270M's Q4_K_M file is served as shipped (a
 * sliding-window model). Each type gets two engines (the same file under two names), so one can
 * compute a conversation whole that the other builds turn by turn.
 * Skipped, loudly, where llama.cpp is not built or the models are not fetched (failed in CI).
 */
import { copyFileSync, linkSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execFileSync } from 'node:child_process'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { programPath } from '../../engines/builder/llama-build.ts'
import { realModel } from '../support/real-models/real-model.ts'
import { startTestServer, type TestServer } from '../support/server-process.ts'
import { llamaBuild } from '../support/upstream-servers.ts'
import { describeIf } from '../support/skips.ts'

const smollm = realModel('smollm2-135m-instruct-q4_1')
const gemma = realModel('gemma-3-270m-q4_k_m')

/** The weight type of each model id, and where its file comes from. */
const MODELS: Array<{ id: string; type: string; source: 'smollm' | 'gemma' }> = [
  ...['F16', 'Q8_0', 'Q4_0', 'Q4_1', 'Q4_K_M', 'Q5_K_S', 'Q6_K'].map((type) => ({ id: `smollm-${type.toLowerCase()}`, type, source: 'smollm' as const })),
  { id: 'gemma-q4_k_m', type: 'Q4_K_M (as shipped)', source: 'gemma' },
]
const MAX_TOKENS = 48

/** A file to change, as a person (or an agent) asks: long enough for a prompt of several hundred tokens. */
const FILE = `const fs = require('fs')
const path = require('path')

function readItems(dir, limit) {
  const names = fs.readdirSync(dir).filter((n) => n.endsWith('.json'))
  const items = []
  for (const name of names.slice(0, limit)) {
    const text = fs.readFileSync(path.join(dir, name), 'utf8')
    items.push({ name, data: JSON.parse(text) })
  }
  return items
}

function total(items, field) {
  let sum = 0
  for (const item of items) sum += Number(item.data[field] ?? 0)
  return sum
}

function report(dir, limit, field) {
  const items = readItems(dir, limit)
  const lines = items.map((item) => item.name + ': ' + item.data[field])
  lines.push('total: ' + total(items, field))
  return lines.join('\\n')
}

module.exports = { readItems, total, report }
`
const SYSTEM = 'You are a careful programming assistant. Answer with code only.'
const FIRST = `Rewrite this file, renaming the parameter \`limit\` to \`maxItems\` everywhere:\n\n${FILE}`
const SECOND = 'Write a short poem about the sea.'
const NEXT_TURN = 'Now add a one-line comment above each function saying what it returns.'

type Message = { role: 'system' | 'user' | 'assistant'; content: string }

interface Answer {
  text: string
  /** Each token with its logprob and top candidates, exactly as the engine reported them. */
  logprobs: unknown
  promptTokens: number
  cachedTokens: number
}

describeIf(smollm && gemma && llamaBuild, 'needs llama.cpp built here (npm run build:engines) and the trained models (npm run models:fetch)')(
  'the same greedy answer, however the batches fell',
  () => {
    let server: TestServer
    let headers: Record<string, string>

    beforeAll(async () => {
      // Requantized once for the run, into the run's scratch folder; the second name of each file is
      // a hard link (another path: an engine and a slot cache of its own).
      const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-same-answer-'))
      const quantize = programPath(llamaBuild!.dir, 'llama-quantize')
      for (const { id, type, source } of MODELS) {
        const file = join(modelsDir, `${id}.gguf`)
        if (source === 'gemma') copyFileSync(gemma!, file)
        else if (type === 'Q4_1') copyFileSync(smollm!, file)
        else execFileSync(quantize, ['--allow-requantize', smollm!, file, type, '2'], { stdio: 'ignore' })
        linkSync(file, join(modelsDir, `${id}-fresh.gguf`))
      }
      // Two slots, each engine on one thread, as a person's first start on a small machine runs.
      server = await startTestServer({ modelsDir, threads: 1, args: ['--parallel', '2'] })
      headers = { 'content-type': 'application/json', authorization: `Bearer ${server.apiKey}` }
    }, 180_000)

    afterAll(async () => {
      await server?.stop()
    })

    async function ask(model: string, messages: Message[], extra: Record<string, unknown> = {}): Promise<Answer> {
      const res = await fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ model, messages, max_tokens: MAX_TOKENS, temperature: 0, logprobs: true, top_logprobs: 3, ...extra }),
      })
      const body = await res.json()
      expect(res.status, JSON.stringify(body)).toBe(200)
      return {
        text: body.choices[0].message.content,
        logprobs: body.choices[0].logprobs,
        promptTokens: body.usage.prompt_tokens,
        cachedTokens: body.usage.prompt_tokens_details?.cached_tokens ?? 0,
      }
    }

    /** The model unloaded (llama-server saves its slots to the data folder), so the next request loads it again. */
    async function unload(model: string): Promise<void> {
      const res = await fetch(`${server.url}/api/generate`, { method: 'POST', headers, body: JSON.stringify({ model, prompt: '', keep_alive: 0 }) })
      expect(res.status, await res.text()).toBe(200)
    }

    function expectSame(got: Answer, want: Answer, what: string): void {
      expect(got.text, what).toBe(want.text)
      expect(got.logprobs, `${what}: logprobs`).toEqual(want.logprobs)
    }

    const first: Message[] = [
      { role: 'system', content: SYSTEM },
      { role: 'user', content: FIRST },
    ]
    const second: Message[] = [{ role: 'user', content: SECOND }]

    it.each(MODELS)(
      '$type ($id): fresh, cached, speculation off, beside another stream, split into turns, reloaded',
      async ({ id }) => {
        const fresh = `${id}-fresh`

        // Fresh: the whole prompt in one batch.
        const alone = await ask(id, first)
        expect(alone.text.length).toBeGreaterThan(0)
        expect(alone.cachedTokens).toBe(0)
        expect(alone.promptTokens).toBeGreaterThan(200)

        // The same request again: read back from the slot's cache, its last prompt token computed alone.
        const again = await ask(id, first)
        expect(again.cachedTokens).toBeGreaterThan(alone.promptTokens / 2)
        expectSame(again, alone, 'read back from the prompt cache')

        // Speculation (on by default) off for the request: every token decoded alone, in a pass of one row.
        expectSame(await ask(id, first, { speculative: false }), alone, 'with speculation off')

        // Two at once: the second request arrives while the first streams, so its prompt is read in a
        // batch with the first's next token and the two then decode together.
        const poem = fetch(`${server.url}/v1/chat/completions`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ model: id, messages: second, max_tokens: MAX_TOKENS, temperature: 0, logprobs: true, top_logprobs: 3, stream: true }),
        })
        const reader = (await poem).body!.getReader()
        const decoder = new TextDecoder()
        let streamed = decoder.decode((await reader.read()).value, { stream: true })
        const beside = ask(id, first)
        for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) streamed += decoder.decode(chunk.value, { stream: true })
        expectSame(await beside, alone, 'beside another stream')
        const poemEvents = streamed
          .split('\n')
          .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
          .map((line) => JSON.parse(line.slice('data: '.length)))
        const poemText = poemEvents.map((e) => e.choices?.[0]?.delta?.content ?? '').join('')
        const poemLogprobs = poemEvents.flatMap((e) => e.choices?.[0]?.logprobs?.content ?? [])

        // A second turn: its first part is the first turn's, cached; computed whole by the other engine.
        const turns: Message[] = [...first, { role: 'assistant', content: alone.text }, { role: 'user', content: NEXT_TURN }]
        const byTurns = await ask(id, turns)
        expect(byTurns.cachedTokens).toBeGreaterThan(alone.promptTokens / 2)
        const whole = await ask(fresh, turns)
        expect(whole.cachedTokens).toBe(0)
        expectSame(byTurns, whole, 'a second turn on the cached first, against the conversation computed whole')

        // The poem asked alone, on the engine that computed the conversation (its system prompt differs,
        // so little is cached): the same as it was beside the other stream.
        const poemAlone = await ask(fresh, second)
        expect(poemText).toBe(poemAlone.text)
        expect(poemLogprobs).toEqual((poemAlone.logprobs as { content: unknown[] }).content)

        // Unloaded and loaded again: the slots come back from the data folder.
        await unload(id)
        expectSame(await ask(id, first), alone, 'read back from disk after a reload')
        await unload(id)
        await unload(fresh)
      },
      120_000,
    )
  },
)
