/**
 * Speculative decoding as Hearth runs it (issue 65, items 2 and 3; docs/engines.md#speculative-decoding),
 * through Hearth's real server and real llama-server, on the trained SmolLM2-135M-Instruct and
 * Gemma 3 270M (`npm run models:fetch`):
 * - on by default: every chat model drafts from the conversation (n-gram drafting), paced by patch
 *   llama-22, and a smaller model of the same vocabulary in the folder is paired as its draft
 *   model (SmolLM2's Q4_1 file for its F32 copy, not Gemma, whose vocabulary differs);
 * - visible: the drafted and accepted tokens in the answer's `timings`, in `/metrics`
 *   (`hearth_draft_tokens_total`) and in the request log's line;
 * - a request's `speculative: false` turns it off (nothing drafted);
 * - paused where it cannot help: on prose the slot stops drafting after its drafts miss, counted
 *   in `draft_paused_n`;
 * - never changes an answer: the greedy answer with speculation on, fresh and read back from the
 *   prompt cache, equals the answer with it off, token for token (logprobs and all; a seeded
 *   sampled one too), on the five
 *   cases the bench measures (bench/speculative-cases.ts). That holds where a verification pass of
 *   k rows computes each row bit for bit as a pass of one row does: the exactness patches
 *   (`ggml-08…`, issue 65 item 1, docs/determinism.md); without them these checks are skipped,
 *   loudly, as the property does not hold on a CPU (upstream's kernels add up k rows in another order).
 */
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { programPath } from '../../engines/builder/llama-build.ts'
import { LLAMA_PATCHES } from '../../engines/builder/pinned-source.ts'
import { DRAFT_PACING } from '../../engines/llama-server/speculation-args.ts'
import { speculationCases, TOOL_TEMPLATE_FILE, type SpeculationCase } from '../../bench/speculative-cases.ts'
import { realModel } from '../support/real-models/real-model.ts'
import { startTestServer, type TestServer } from '../support/server-process.ts'
import { llamaBuild } from '../support/upstream-servers.ts'
import { describeIf, itIf } from '../support/skips.ts'

const smollm = realModel('smollm2-135m-instruct-q4_1')
const gemma = realModel('gemma-3-270m-q4_k_m')
/** The patches that make a pass of k rows compute each row as a pass of one row does (issue 65, item 1). */
const exactnessPatches = LLAMA_PATCHES.some((p) => basename(p).startsWith('ggml-08'))
const NOT_EXACT =
  "this build lacks the exactness patches (ggml-08…, issue 65 item 1): without them a verification pass's rows add up in another order than a pass of one row, and speculation can change a near-tie's answer"
/** Enough tokens for drafts to come and go, few enough for the suite's two minutes. */
const MAX_TOKENS = 64

describeIf(smollm && gemma && llamaBuild, 'needs llama.cpp built here (npm run build:engines) and the trained models (npm run models:fetch)')(
  'speculative decoding',
  () => {
    let server: TestServer
    let headers: Record<string, string>
    let modelsDir: string
    const cases = new Map(speculationCases().map((c) => [c.name, c]))

    beforeAll(async () => {
      modelsDir = mkdtempSync(join(tmpdir(), 'hearth-speculation-'))
      copyFileSync(smollm!, join(modelsDir, 'smollm.gguf'))
      copyFileSync(gemma!, join(modelsDir, 'gemma.gguf'))
      // The same model, larger: its Q4_1 file (a fifth of its size, the same vocabulary) is its draft.
      execFileSync(programPath(llamaBuild!.dir, 'llama-quantize'), ['--allow-requantize', smollm!, join(modelsDir, 'smollm-f32.gguf'), 'F32', '2'], {
        stdio: 'ignore',
      })
      // SmolLM2 under a ChatML template with tools, for the tool call (its own template has none).
      writeFileSync(
        join(modelsDir, 'models.json'),
        JSON.stringify({
          models: [
            { id: 'smollm', file: 'smollm.gguf' },
            { id: 'smollm-tools', file: 'smollm.gguf', modelfile: { template: readFileSync(TOOL_TEMPLATE_FILE, 'utf8') } },
          ],
        }),
      )
      server = await startTestServer({ modelsDir, threads: 1, args: ['--parallel', '1'] })
      headers = { 'content-type': 'application/json', authorization: `Bearer ${server.apiKey}` }
    }, 120_000)

    afterAll(async () => {
      await server?.stop()
    })

    async function ask(model: string, c: SpeculationCase, extra: Record<string, unknown> = {}) {
      const res = await fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers,
        // Log probabilities too (each token's from its own row of a verification pass), where the
        // request has no tools: Hearth takes no logprobs with tools.
        body: JSON.stringify({
          model,
          messages: c.messages,
          tools: c.tools,
          max_tokens: MAX_TOKENS,
          temperature: 0,
          ...(c.tools ? {} : { logprobs: true, top_logprobs: 2 }),
          ...extra,
        }),
      })
      const body = await res.json()
      expect(res.status, JSON.stringify(body)).toBe(200)
      return body as {
        choices: Array<{ message: { content: string | null; tool_calls?: unknown }; logprobs: unknown }>
        usage: { completion_tokens: number; prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } }
        timings: { draft_n?: number; draft_n_accepted?: number; draft_paused_n?: number; draft_steps?: number }
      }
    }

    async function draftedMetric(model: string, outcome: 'accepted' | 'rejected'): Promise<number> {
      const text = await (await fetch(`${server.url}/metrics`, { headers })).text()
      const line = text.split('\n').find((l) => l.startsWith(`hearth_draft_tokens_total{model="${model}",outcome="${outcome}"}`))
      return line ? Number(line.split(' ').pop()) : 0
    }

    it('is on by default: a summary that quotes drafts from the conversation, and the timings, /metrics and the request log count it', async () => {
      const before = { accepted: await draftedMetric('gemma', 'accepted'), rejected: await draftedMetric('gemma', 'rejected') }
      const answer = await ask('gemma', cases.get('quote')!)
      const t = answer.timings
      expect(t.draft_n).toBeGreaterThan(0)
      expect(t.draft_n_accepted).toBeGreaterThan(0)
      expect(t.draft_n_accepted).toBeLessThanOrEqual(t.draft_n!)
      expect(t.draft_paused_n).toBeGreaterThanOrEqual(0)
      expect(await draftedMetric('gemma', 'accepted')).toBe(before.accepted + t.draft_n_accepted!)
      expect(await draftedMetric('gemma', 'rejected')).toBe(before.rejected + t.draft_n! - t.draft_n_accepted!)
      expect(server.output()).toContain(`drafted=${t.draft_n} accepted=${t.draft_n_accepted}`)
    }, 60_000)

    it('turns off for a request that sends `speculative: false`: nothing drafted, nothing counted', async () => {
      const answer = await ask('smollm', cases.get('edit')!, { speculative: false })
      expect(answer.timings.draft_n).toBeUndefined()
    }, 60_000)

    it('pauses where its drafts miss: on prose the slot stops drafting, so it costs nothing', async () => {
      const answer = await ask('smollm', cases.get('prose')!, { max_tokens: 200 })
      const t = answer.timings
      // Drafts come where the story repeats itself; each miss costs a short pass, and a slot whose
      // drafts stop paying pauses (draft_paused_n counts the tokens decoded meanwhile).
      expect(t.draft_n).toBeDefined()
      if (t.draft_n! > 0 && t.draft_n_accepted! < DRAFT_PACING.pauseBelow * t.draft_n!) expect(t.draft_paused_n).toBeGreaterThan(0)
      expect(t.draft_n! - t.draft_n_accepted!).toBeLessThan(answer.usage.completion_tokens / 4)
    }, 60_000)

    it('pairs a smaller model of the same vocabulary as the draft model (and none of another vocabulary)', async () => {
      await ask('smollm-f32', cases.get('prose')!, { max_tokens: 4 })
      await ask('gemma', cases.get('prose')!, { max_tokens: 4 })
      // This server's engines: their command lines name files in its models folder.
      const commands = execFileSync('ps', ['-ww', '-eo', 'args'], { encoding: 'utf8' })
        .split('\n')
        .filter((l) => l.includes('llama-server') && l.includes(modelsDir))
      const engine = (alias: string) => commands.find((l) => l.includes(`--alias ${alias} `))
      expect(engine('smollm-f32'), commands.join('\n')).toMatch(/--spec-type ngram-simple,ngram-mod,draft-simple .*--model-draft \S*smollm\.gguf/)
      expect(engine('gemma')).toMatch(/--spec-type ngram-simple,ngram-mod /)
      expect(engine('gemma')).not.toContain('--model-draft')
    }, 60_000)

    const sameAnswer = (model: string, name: SpeculationCase['name']) => async () => {
      const c = cases.get(name)!
      const fresh = await ask(model, c, { max_tokens: MAX_TOKENS })
      const cached = await ask(model, c, { max_tokens: MAX_TOKENS })
      const off = await ask(model, c, { max_tokens: MAX_TOKENS, speculative: false })
      expect(cached.usage.prompt_tokens_details?.cached_tokens ?? 0).toBeGreaterThan(fresh.usage.prompt_tokens / 2)
      expect(off.timings.draft_n).toBeUndefined()
      expect(fresh.choices[0]!.message, 'fresh, with speculation, against without').toEqual(off.choices[0]!.message)
      expect(fresh.choices[0]!.logprobs).toEqual(off.choices[0]!.logprobs)
      expect(cached.choices[0]!.message, 'read back from the prompt cache, with speculation, against without').toEqual(off.choices[0]!.message)
      expect(cached.choices[0]!.logprobs).toEqual(off.choices[0]!.logprobs)
    }

    for (const name of ['edit', 'tool call', 'quote', 'prose', 'translation'] as const) {
      itIf(exactnessPatches, NOT_EXACT)(
        `SmolLM2 (Q4_1): the same greedy answer with speculation on and off, fresh and cached: ${name}`,
        sameAnswer(name === 'tool call' ? 'smollm-tools' : 'smollm', name),
        90_000,
      )
    }
    for (const name of ['edit', 'prose'] as const) {
      itIf(exactnessPatches, NOT_EXACT)(
        `Gemma 3 (Q4_K_M): the same greedy answer with speculation on and off, fresh and cached: ${name}`,
        sameAnswer('gemma', name),
        90_000,
      )
    }
    itIf(exactnessPatches, NOT_EXACT)(
      'Gemma 3: a seeded sampled answer is the same with speculation on and off (one draw per token, from its own row)',
      async () => {
        // The edit: it copies the file back, so even a sampled answer repeats the conversation.
        const c = cases.get('edit')!
        const sampled = { temperature: 0.8, top_p: 0.95, seed: 42, max_tokens: MAX_TOKENS * 2 }
        const on = await ask('gemma', c, sampled)
        const off = await ask('gemma', c, { ...sampled, speculative: false })
        expect(on.timings.draft_n).toBeGreaterThan(0)
        expect(on.choices[0]!.message).toEqual(off.choices[0]!.message)
      },
      90_000,
    )
    itIf(exactnessPatches, NOT_EXACT)(
      'SmolLM2 (F32) with its Q4_1 file as draft model: the same greedy answer on and off: edit',
      sameAnswer('smollm-f32', 'edit'),
      120_000,
    )
  },
)
