/**
 * The short list the UI offers on first run (recommended-models.json): one entry per model in the
 * catalog's format plus where to pull it from and how much it downloads.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { z } from 'zod'

const recommendedSchema = z.object({
  models: z.array(
    z.object({
      id: z.string().min(1),
      file: z.string().regex(/\.(gguf|bin)$/),
      mmproj: z
        .string()
        .regex(/\.gguf$/)
        .optional(),
      /** `vad`: the voice-activity model the speech models use to skip silence, not served itself. */
      kind: z.enum(['chat', 'embedding', 'rerank', 'speech', 'vad']),
      source: z.string().startsWith('hf://'),
      mmproj_source: z.string().startsWith('hf://').optional(),
      /** Everything the pull downloads: the model and its projector. */
      size_bytes: z.int().positive(),
      description: z.string().min(1),
    }),
  ),
})

export type RecommendedModel = z.infer<typeof recommendedSchema>['models'][number]

let cached: RecommendedModel[] | undefined

export function recommendedModels(): RecommendedModel[] {
  cached ??= recommendedSchema.parse(JSON.parse(readFileSync(join(import.meta.dirname, 'recommended-models.json'), 'utf8'))).models
  return cached
}
