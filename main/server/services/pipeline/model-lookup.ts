/** Finds the model a request names, or the 404 that explains why it cannot be served. */
import type { ModelFolder } from '../../../../models/catalog/model-folder.ts'
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import { modelNotFound } from '../api-error.ts'

export async function requireModel(folder: ModelFolder, id: string): Promise<ModelRecord> {
  const known = await folder.modelForRequest(id)
  if (known) return known
  const { models, broken } = await folder.cachedScan(0)
  const model = models.find((m) => m.id === id)
  if (model) return model
  const problem = broken.find((b) => b.id === id)
  if (problem) throw modelNotFound(id, `The model '${id}' cannot be served: ${problem.problem}`)
  throw modelNotFound(id)
}
