/** Finds the model a request names, or the 404 that explains why it cannot be served. */
import type { ModelFolder } from '../../../../models/catalog/model-folder.ts'
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import { modelNotFound } from '../api-error.ts'

export async function requireModel(folder: ModelFolder, id: string): Promise<ModelRecord> {
  for (const name of namesFor(id)) {
    const known = await folder.modelForRequest(name)
    if (known) return known
  }
  const { models, broken } = await folder.cachedScan(0)
  const model = models.find((m) => m.id === id)
  if (model) return model
  const problem = broken.find((b) => b.id === id)
  if (problem) throw modelNotFound(id, `The model '${id}' cannot be served: ${problem.problem}`)
  throw modelNotFound(id)
}

/**
 * The ids a name may stand for: itself first, then its other form in Ollama's naming, where a
 * missing tag means `latest`. Programs set up for Ollama name models as `ollama list` shows them
 * (`tiny:latest` for Hearth's `tiny`; `llama3.2` for the store's `llama3.2:latest`), and Ollama's
 * own `/v1` takes either.
 */
function namesFor(id: string): string[] {
  const tagged = id.slice(id.lastIndexOf('/') + 1).includes(':')
  if (!tagged) return [id, `${id}:latest`]
  return id.endsWith(':latest') ? [id, id.slice(0, -':latest'.length)] : [id]
}
