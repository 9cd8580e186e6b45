/** The Model object of /v1/models: OpenAI's fields, the contract's limits and pricing, our additions. */
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import type { RemotePool } from '../../../../engines/remote/remote-pool.ts'
import type { ModelObject } from '../../wire-types.ts'

/** `remotes` tells a remote model's health (`remote.health`: healthy, unhealthy or unknown). */
export function modelObject(model: ModelRecord, loaded: boolean, remotes?: RemotePool): ModelObject {
  return {
    id: model.id,
    object: 'model',
    created: model.created,
    owned_by: model.ownedBy,
    context_length: model.contextLength,
    max_completion_tokens: model.maxCompletionTokens,
    pricing: { prompt: model.pricing.prompt, completion: model.pricing.completion },
    capabilities: model.capabilities,
    state: loaded ? 'loaded' : 'available',
    ...(model.remote ? { remote: { health: remotes?.modelHealth(model.remote.replicas) ?? 'unknown' } } : {}),
    ...(model.source ? { source: model.source.kind } : {}),
  }
}
