import { z } from 'zod'
import { ENV_NAME, remoteImportSchema, remoteTargetSchema } from './remote-target.ts'

const pricePattern = /^\d+\.\d{8}$/

/**
 * One entry of models.json: a model file, or a model on another machine (`remote`, or several
 * copies of it as `replicas`). Unknown keys are kept for newer versions.
 */
/**
 * What a Modelfile adds to a model's weights (`ollama create`): the model's own system prompt,
 * sampling defaults, opening conversation, chat template, licenses and LoRA adapters.
 */
export const modelfileSchema = z.looseObject({
  /** The name the Modelfile's FROM gave, shown as the model's parent. */
  parent: z.string().min(1).optional(),
  system: z.string().optional(),
  /** A Jinja chat template that replaces the file's own (a Go template is refused at create). */
  template: z.string().optional(),
  /** Ollama's parameters as the Modelfile set them (`stop`, `temperature`, …); `num_ctx` is `context_length`. */
  parameters: z.record(z.string(), z.unknown()).optional(),
  /** A conversation that precedes every request. */
  messages: z.array(z.object({ role: z.enum(['system', 'user', 'assistant']), content: z.string() })).optional(),
  license: z.array(z.string()).optional(),
  /** LoRA adapters (GGUF), relative to the models folder, applied by llama-server (`--lora`). */
  adapters: z.array(z.string().min(1)).optional(),
  /** The Ollama version the Modelfile asks for (`REQUIRES`), shown as it was given. */
  requires: z.string().optional(),
  /** When it was made (ISO 8601), Ollama's `modified_at`. */
  created_at: z.string().optional(),
})

export type ModelfileEntry = z.infer<typeof modelfileSchema>

export const catalogEntrySchema = z
  .looseObject({
    id: z.string().min(1).max(256).optional(),
    file: z.string().min(1).optional(),
    /**
     * The model whose weights this one serves, by its name (a model of another program's store, or
     * one pulled by name): a model made by a Modelfile from it, no copy of the file.
     */
    from: z.string().min(1).optional(),
    modelfile: modelfileSchema.optional(),
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
     * Speculative decoding (chat models), on unless turned off: n-gram drafting from the conversation,
     * a draft model of the same vocabulary (this file, or a smaller one Hearth finds in the folder)
     * and the model's own MTP heads. `"speculative": false` turns it off, `"ngram"` keeps the n-gram
     * drafting alone, `true` is the default.
     */
    draft: z.string().min(1).optional(),
    speculative: z.union([z.boolean(), z.literal('ngram')]).optional(),
    /**
     * Other Hearths that lend their memory to this model (`--lend` there): llama.cpp spreads its layers
     * over this machine and them (docs/pool.md). Each with the variable its key is in.
     */
    pool: z
      .array(
        z.strictObject({
          url: z
            .string()
            .url()
            .refine((url) => /^https?:\/\/[^/]+\/?$/i.test(url), "the lending Hearth's address, such as http://desk:8181"),
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
  })
  .superRefine((entry, ctx) => {
    const sources = ['file', 'remote', 'replicas', 'from'].filter((key) => entry[key as 'file'] !== undefined)
    if (sources.length !== 1) {
      ctx.addIssue({
        code: 'custom',
        message: sources.length === 0 ? 'needs "file", "remote", "replicas" or "from"' : `give one of ${sources.join(' and ')}, not both`,
      })
    }
    if (entry.from !== undefined && entry.id === undefined)
      ctx.addIssue({ code: 'custom', message: '"from" makes a new model of another one\'s weights: it needs "id"' })
    if (entry.pool && entry.file === undefined)
      ctx.addIssue({ code: 'custom', message: '"pool" lends memory to a model file of this machine: it needs "file"' })
  })

export type CatalogEntry = z.infer<typeof catalogEntrySchema>

export const catalogFileSchema = z.object({ models: z.array(z.unknown()) })
