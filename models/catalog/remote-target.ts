/**
 * A model served by another machine, as the catalog names it: an OpenAI-compatible server (vLLM,
 * llama-server, another Hearth) at `base_url`, the model's id there, and the environment variable
 * holding its key. URLs come only from here, never from a request; keys only from the environment.
 */
import { z } from 'zod'

export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

export const remoteTargetSchema = z.strictObject({
  base_url: z
    .string()
    .url()
    .refine((url) => /^https?:\/\//i.test(url), 'an http:// or https:// URL, such as http://gpu-box:8000/v1'),
  /** The model's id on the remote; the entry's own id when absent. */
  model: z.string().min(1).max(256).optional(),
  /** The environment variable that holds the remote's API key (the key itself never goes in a file). */
  api_key_env: z.string().regex(ENV_NAME, 'the name of an environment variable, such as GPU_BOX_KEY').optional(),
})

/** `"remote": {…, "import": true}`: every model the remote lists, under its own id (after `id_prefix`). */
export const remoteImportSchema = remoteTargetSchema.omit({ model: true }).extend({
  import: z.literal(true),
  id_prefix: z.string().max(64).optional(),
})

export type RemoteTargetEntry = z.infer<typeof remoteTargetSchema>

/** One copy of a remote model, resolved: where it is and the key to send there. */
export interface RemoteReplica {
  /** Without a trailing slash: `http://gpu-box:8000/v1`. */
  baseUrl: string
  /** The model's id on the remote. */
  model: string
  /** The environment variable the key comes from, named in messages (the key never is). */
  apiKeyEnv: string | undefined
  apiKey: string | undefined
}

/** Resolves an entry's target, or says why it cannot be used (an unset key variable). */
export function resolveReplica(
  target: { base_url: string; model?: string; api_key_env?: string },
  model: string,
  env: NodeJS.ProcessEnv,
): RemoteReplica | string {
  const apiKey = target.api_key_env ? env[target.api_key_env] : undefined
  if (target.api_key_env && !apiKey) return `the environment variable ${target.api_key_env} (the key for ${target.base_url}) is not set`
  return { baseUrl: target.base_url.replace(/\/+$/, ''), model: target.model ?? model, apiKeyEnv: target.api_key_env, apiKey }
}
