import { z } from 'zod'
import { ENV_NAME, remoteImportSchema, remoteTargetSchema } from './remote-target.ts'

const pricePattern = /^\d+\.\d{8}$/

/**
 * One entry of models.json: a model file, or a model on another machine (`remote`, or several
 * copies of it as `replicas`). Unknown keys are kept for newer versions.
 */
export const catalogEntrySchema = z.looseObject({
  id: z.string().min(1).max(256).optional(),
  file: z.string().min(1).optional(),
  remote: z.union([remoteTargetSchema, remoteImportSchema]).optional(),
  replicas: z.array(remoteTargetSchema).min(1).max(32).optional(),
  mmproj: z.string().min(1).optional(),
  kind: z.enum(['chat', 'embedding', 'rerank', 'speech']).optional(),
  owned_by: z.string().min(1).optional(),
  context_length: z.int().min(16).optional(),
  max_completion_tokens: z.int().min(1).optional(),
  /** Seconds a loaded model may sit idle before it is unloaded; 0 keeps it loaded. */
  ttl: z.number().min(0).optional(),
  gpu_layers: z.union([z.literal('auto'), z.literal('all'), z.int().min(0)]).optional(),
  threads: z.int().min(1).max(256).optional(),
  /** Requests a chat model decodes at once. */
  parallel: z.int().min(1).max(64).optional(),
  /**
   * Speculative decoding (chat models, off unless set): `draft` names a small model file with the
   * same vocabulary that proposes tokens; `"speculative": "ngram"` proposes them from the text so far.
   */
  draft: z.string().min(1).optional(),
  speculative: z.enum(['ngram']).optional(),
  /**
   * Other Hearths that lend their memory to this model (`--lend` there): llama.cpp spreads its layers
   * over this machine and them (docs/pool.md). Each with the variable its key is in.
   */
  pool: z
    .array(
      z.strictObject({
        url: z.string().url().refine((url) => /^https?:\/\/[^/]+\/?$/i.test(url), "the lending Hearth's address, such as http://desk:8181"),
        api_key_env: z.string().regex(ENV_NAME, 'the name of an environment variable, such as DESK_KEY').optional(),
      }),
    )
    .min(1)
    .max(16)
    .optional(),
  pricing: z
    .object({
      prompt: z.string().regex(pricePattern, 'a decimal string with 8 fractional digits, e.g. "0.00000000"'),
      completion: z.string().regex(pricePattern, 'a decimal string with 8 fractional digits, e.g. "0.00000000"'),
    })
    .optional(),
}).superRefine((entry, ctx) => {
  const sources = ['file', 'remote', 'replicas'].filter((key) => entry[key as 'file'] !== undefined)
  if (sources.length !== 1) {
    ctx.addIssue({ code: 'custom', message: sources.length === 0 ? 'needs "file", "remote" or "replicas"' : `give one of ${sources.join(' and ')}, not both` })
  }
  if (entry.pool && entry.file === undefined) ctx.addIssue({ code: 'custom', message: '"pool" lends memory to a model file of this machine: it needs "file"' })
})

export type CatalogEntry = z.infer<typeof catalogEntrySchema>

export const catalogFileSchema = z.object({ models: z.array(z.unknown()) })
