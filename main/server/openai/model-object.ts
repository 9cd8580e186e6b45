/** The Model object of /v1/models: OpenAI's fields, the contract's limits and pricing, our additions. */
import type { ModelRecord } from '../../../native-models/catalog/model-folder.ts'
import type { RemotePool } from '../../../native-models/remote/remote-pool.ts'

/** `remotes` tells a remote model's health (`remote.health`: healthy, unhealthy or unknown). */
export function modelObject(model: ModelRecord, loaded: boolean, remotes?: RemotePool) {
  return {
    id: model.id,
    object: 'model' as const,
    created: model.created,
    owned_by: model.ownedBy,
    context_length: model.contextLength,
    max_completion_tokens: model.maxCompletionTokens,
    pricing: { prompt: model.pricing.prompt, completion: model.pricing.completion },
    capabilities: model.capabilities,
    state: loaded ? ('loaded' as const) : ('available' as const),
    ...(model.remote ? { remote: { health: remotes?.modelHealth(model.remote.replicas) ?? 'unknown' } } : {}),
  }
}
