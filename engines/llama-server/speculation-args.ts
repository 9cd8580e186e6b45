/**
 * How llama-server drafts tokens for a chat model (issue 65), as Hearth chose it by measurement on
 * trained weights (docs/engines.md#speculative-decoding, `npm run bench -- --only speculative`):
 * n-gram drafting from the conversation for every chat model, a draft model where one of the same
 * vocabulary is paired, the model's own MTP heads where its file has them; each slot's drafts
 * paced by patch llama-22. The target model checks every drafted token: with greedy sampling an
 * answer is the one it gives without speculation, token for token.
 */
import { spawnSync } from 'node:child_process'
import type { SpeculationPlan } from '../engine-jobs.ts'

/**
 * N-gram drafting, two of the pin's drafters chained (the second drafts where the first found
 * nothing): `ngram-simple` copies what followed the last place the conversation had the same 12
 * tokens (an edit's file, a quoted sentence, a tool call's path), and `ngram-mod` follows a table of
 * what came after each 24 tokens, so it keeps drafting through text that repeats itself. Chosen by
 * replaying the five cases' greedy answers (SmolLM2 and Gemma 3) through the pin's drafters
 * (ngram-simple with keys of 2 to 12 tokens, ngram-mod with 4 to 24, drafts of 8 to 64, each paced
 * and not), then checked live (`npm run bench -- --only speculative`). Replayed again at the pass
 * costs llama-server measures (every row's logits), no setting drafted Gemma 3's edit more than 7 %
 * faster without drafting another case worse; making a verification row cheaper (patch `ggml-11`)
 * did what no setting could (docs/benchmarks.md#speculative-decoding).
 */
export const NGRAM_DRAFT = {
  types: ['ngram-simple', 'ngram-mod'],
  simple: { sizeN: 12, sizeM: 48 },
  mod: { nMatch: 24, nMin: 8, nMax: 48 },
} as const

/**
 * Patch llama-22's pacing: a slot's first draft is `draftStart` tokens long and doubles while its
 * drafts are accepted whole (a miss cuts it back), so a wrong guess costs a short pass; and a slot
 * whose last drafts did not pay for their passes stops drafting (16 tokens, doubling to 512 while
 * the one draft after each pause still does not pay), so text it cannot help costs next to nothing.
 * What pays is measured by llama-server as it runs (the time of its passes by their rows); until
 * it has measured, drafts accepted at less than `pauseBelow` do not.
 */
export const DRAFT_PACING = { draftStart: 4, pauseBelow: 0.3 } as const

/** The draft model's own longest draft (llama.cpp's default, 3, before pacing lets it grow). */
const DRAFT_MODEL_MAX = 16

/**
 * llama-server's arguments for the plan. `paced`: the program has patch llama-22; without it (a
 * build made before the patch, still in the cache) only what models.json asks for is drafted, as
 * before, since drafts that are never paused cost prose a tenth of its speed.
 */
export function speculationArgs(plan: SpeculationPlan, gpuLayers: number, paced = true): string[] {
  if (!paced && !plan.requested) return []
  const types = [...(plan.ngram ? NGRAM_DRAFT.types : []), ...(plan.draftPath ? ['draft-simple'] : []), ...(plan.mtp ? ['draft-mtp'] : [])]
  if (types.length === 0) return []
  const args = ['--spec-type', types.join(',')]
  if (plan.ngram) {
    const { simple, mod } = NGRAM_DRAFT
    args.push('--spec-ngram-simple-size-n', String(simple.sizeN), '--spec-ngram-simple-size-m', String(simple.sizeM))
    args.push('--spec-ngram-mod-n-match', String(mod.nMatch), '--spec-ngram-mod-n-min', String(mod.nMin), '--spec-ngram-mod-n-max', String(mod.nMax))
  }
  if (plan.draftPath) args.push('--model-draft', plan.draftPath, '--gpu-layers-draft', gpuLayers < 0 ? 'auto' : String(gpuLayers))
  if (plan.draftPath || plan.mtp) args.push('--spec-draft-n-max', String(DRAFT_MODEL_MAX))
  if (paced) args.push('--spec-draft-start', String(DRAFT_PACING.draftStart), '--spec-pause-below', String(DRAFT_PACING.pauseBelow))
  return args
}

/** Whether a llama-server program knows patch llama-22's pacing (its help names the option). */
export function knowsPacedDrafts(program: string): boolean {
  const help = spawnSync(program, ['--help'], { encoding: 'utf8', timeout: 10_000, maxBuffer: 16 * 1024 * 1024 })
  return `${help.stdout ?? ''}${help.stderr ?? ''}`.includes('--spec-pause-below')
}
