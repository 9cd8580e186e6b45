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
 * `ngram-simple`: the tokens that followed the last place the conversation had the same
 * `sizeN` tokens. Of the pin's n-gram drafters (ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod,
 * the lookup caches) it drafted the most accepted tokens per verification pass on the five cases
 * (an edit, a tool call, a quoting summary, prose, a translation) for SmolLM2 and Gemma 3; see
 * docs/benchmarks.md for the table it was chosen from.
 */
export const NGRAM_DRAFT = { type: 'ngram-simple', sizeN: 4, sizeM: 48 } as const

/**
 * Patch llama-22's pacing: a slot's first draft is `draftStart` tokens long and doubles while its
 * drafts are accepted whole (a miss cuts it back), so a wrong guess costs a short pass; and a slot
 * whose last drafts were accepted at less than `pauseBelow` stops drafting (16 tokens, doubling to
 * 512 while the one draft after each pause still misses), so text it cannot help costs nothing.
 * `pauseBelow` is the break-even acceptance: what one more row of a verification pass costs
 * against a pass of one row, measured on this kind of CPU (docs/benchmarks.md).
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
  const types = [...(plan.ngram ? [NGRAM_DRAFT.type] : []), ...(plan.draftPath ? ['draft-simple'] : []), ...(plan.mtp ? ['draft-mtp'] : [])]
  if (types.length === 0) return []
  const args = ['--spec-type', types.join(',')]
  if (plan.ngram) args.push('--spec-ngram-simple-size-n', String(NGRAM_DRAFT.sizeN), '--spec-ngram-simple-size-m', String(NGRAM_DRAFT.sizeM))
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
