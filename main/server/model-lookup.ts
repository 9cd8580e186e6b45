/** Finds the model a request names, or the 404 that explains why it cannot be served. */
import type { ModelFolder, ModelRecord } from '../../native-models/catalog/model-folder.ts'
import { modelNotFound } from './http-errors.ts'

/** How old a folder listing a request may use unchecked; an id it does not know triggers a fresh scan. */
const LISTING_MAX_AGE_MS = 1000

export async function requireModel(folder: ModelFolder, id: string): Promise<ModelRecord> {
  const known = await folder.modelForRequest(id, LISTING_MAX_AGE_MS)
  if (known) return known
  const { models, broken } = await folder.cachedScan(0)
  const model = models.find((m) => m.id === id)
  if (model) return model
  const problem = broken.find((b) => b.id === id)
  if (problem) throw modelNotFound(id, `The model '${id}' cannot be served: ${problem.problem}`)
  throw modelNotFound(id)
}
