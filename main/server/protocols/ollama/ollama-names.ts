/**
 * Models by the names Ollama's clients use: `name:tag`, where a missing tag means `latest`, and
 * Ollama's long form (`registry.ollama.ai/library/llama3.2:3b`) means its short one. Hearth's own
 * models (ids without a tag) are listed as `id:latest`, and found by either.
 */
import type { ModelFolder } from '../../../../models/catalog/model-folder.ts'
import type { BrokenModel, ModelRecord } from '../../../../models/catalog/model-record.ts'
import { modelNotFoundError, OllamaError } from './ollama-errors.ts'

const DEFAULT_REGISTRY = 'registry.ollama.ai/'
const DEFAULT_NAMESPACE = 'library/'

/** The name a model is listed by in Ollama's API. */
export function ollamaName(model: ModelRecord): string {
  return model.ollama?.name ?? (hasTag(model.id) ? model.id : `${model.id}:latest`)
}

/** The ids a requested name may be listed under, in the order they are tried. */
export function nameCandidates(requested: string): string[] {
  let name = requested.trim()
  if (name.startsWith(DEFAULT_REGISTRY)) name = name.slice(DEFAULT_REGISTRY.length)
  if (name.startsWith(DEFAULT_NAMESPACE)) name = name.slice(DEFAULT_NAMESPACE.length)
  const candidates = [name]
  if (!hasTag(name)) candidates.push(`${name}:latest`)
  else if (name.endsWith(':latest')) candidates.push(name.slice(0, -':latest'.length))
  return [...new Set(candidates.flatMap((c) => [c, c.toLowerCase()]))]
}

/** A tag is what follows the last colon of the last path segment (`host:port/x` has none). */
function hasTag(name: string): boolean {
  return name.slice(name.lastIndexOf('/') + 1).includes(':')
}

/** The model a request names, or Ollama's 404 (with the reason, where it is listed but cannot serve). */
export async function requireOllamaModel(folder: ModelFolder, requested: unknown): Promise<ModelRecord> {
  if (typeof requested !== 'string' || requested.trim() === '') throw new OllamaError(400, 'model is required')
  for (const id of nameCandidates(requested)) {
    const found = await folder.modelForRequest(id)
    if (found) return found
  }
  const { models, broken } = await folder.cachedScan(0)
  const ids = nameCandidates(requested)
  const model = models.find((m) => ids.includes(m.id) || ids.includes(ollamaName(m)))
  if (model) return model
  const problem = broken.find((b) => ids.includes(b.id))
  if (problem) throw new OllamaError(400, `model '${requested}' cannot be served: ${problem.problem}`)
  throw modelNotFoundError(requested)
}

/**
 * The model (or the listed model that cannot be served) a name stands for, or undefined where there
 * is none; a failure to read the folder is an error, never taken for "none".
 */
export async function modelNamed(folder: ModelFolder, requested: string): Promise<ModelRecord | BrokenModel | undefined> {
  const ids = nameCandidates(requested)
  const { models, broken } = await folder.cachedScan(0)
  return models.find((m) => ids.includes(m.id) || ids.includes(ollamaName(m))) ?? broken.find((b) => ids.includes(b.id))
}
