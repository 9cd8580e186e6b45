/**
 * Catalog entries for remote models, as the models the server lists: their context length,
 * completion limit and capabilities from the entry, else from what the remote says of them.
 */
import type { CatalogEntry } from './catalog-schema.ts'
import type { BrokenModel, ModelRecord } from './model-record.ts'
import { capabilitiesOf, type Capability, type ModelKind } from './model-kinds.ts'
import { resolveReplica, type RemoteReplica } from './remote-target.ts'

const DEFAULT_CONTEXT = 4096
const ZERO_PRICE = '0.00000000'
const CAPABILITIES: ReadonlySet<string> = new Set<Capability>(['chat', 'vision', 'tools', 'embeddings', 'rerank', 'transcription', 'translation'])
/** When the server first listed them: remote models have no file whose time could say. */
const LISTED_SINCE = Math.floor(Date.now() / 1000)

/** What a remote says of one of its models, as far as the catalog reads it. */
export interface RemoteModelSummary {
  id: string
  ownedBy: string | undefined
  contextLength: number | undefined
  maxCompletionTokens: number | undefined
  /** Hearth's own list (`chat`, `vision`, `embeddings`, …) when the remote is a Hearth. */
  capabilities: string[] | undefined
  vision: boolean | undefined
}

/**
 * What the catalog needs of the pool that watches the remote servers (engines/remote/remote-pool.ts),
 * named here so that models/ needs nothing of engines/.
 */
export interface RemoteListings {
  /** The servers to watch: those the catalog names now. */
  track(replicas: readonly RemoteReplica[]): void
  modelInfo(replica: Pick<RemoteReplica, 'baseUrl' | 'model'>): RemoteModelSummary | undefined
  listedModels(baseUrl: string): RemoteModelSummary[] | undefined
}

export interface RemoteEntryResult {
  models: ModelRecord[]
  broken: BrokenModel[]
  /** Every copy the entry names, resolved, for the pool to watch. */
  replicas: RemoteReplica[]
}

export function remoteRecords(entry: CatalogEntry, pool: RemoteListings, env: NodeJS.ProcessEnv): RemoteEntryResult {
  const remote = entry.remote
  if (remote && 'import' in remote) {
    const replica = resolveReplica(remote, '', env)
    if (typeof replica === 'string') return { models: [], broken: [{ id: entry.id ?? remote.base_url, file: remote.base_url, problem: replica }], replicas: [] }
    // Until the remote has answered once there is nothing to list; its models appear when it does.
    const listed = pool.listedModels(replica.baseUrl) ?? []
    const models = listed.map((info) => record(`${remote.id_prefix ?? ''}${info.id}`, entry, [{ ...replica, model: info.id }], info))
    return { models, broken: [], replicas: [replica] }
  }
  const targets = entry.replicas ?? (remote ? [remote] : [])
  const id = entry.id ?? targets[0]?.model
  const where = targets.map((t) => t.base_url).join(', ')
  if (!id) return { models: [], broken: [{ id: where, file: where, problem: 'a remote entry needs an "id", or a "model" on the remote' }], replicas: [] }
  const replicas: RemoteReplica[] = []
  for (const target of targets) {
    const replica = resolveReplica(target, id, env)
    if (typeof replica === 'string') return { models: [], broken: [{ id, file: target.base_url, problem: replica }], replicas: [] }
    replicas.push(replica)
  }
  const info = replicas.map((r) => pool.modelInfo(r)).find((i) => i !== undefined)
  return { models: [record(id, entry, replicas, info)], broken: [], replicas }
}

/** A server that does not list capabilities is trusted with tools: it answers for itself when it cannot. */
function record(id: string, entry: CatalogEntry, replicas: RemoteReplica[], info: RemoteModelSummary | undefined): ModelRecord {
  const kind: ModelKind = entry.kind ?? kindOf(info?.capabilities) ?? 'chat'
  const remoteCapabilities = info?.capabilities?.filter((c): c is Capability => CAPABILITIES.has(c))
  const contextLength = entry.context_length ?? info?.contextLength ?? DEFAULT_CONTEXT
  return {
    id,
    kind,
    capabilities: entry.kind === undefined && remoteCapabilities?.length ? remoteCapabilities : capabilitiesOf(kind, info?.vision === true, true),
    path: '',
    projectorPath: undefined,
    ownedBy: entry.owned_by ?? info?.ownedBy ?? 'remote',
    created: LISTED_SINCE,
    contextLength,
    maxCompletionTokens: Math.min(entry.max_completion_tokens ?? info?.maxCompletionTokens ?? contextLength, contextLength),
    pricing: entry.pricing ?? { prompt: ZERO_PRICE, completion: ZERO_PRICE },
    sizeBytes: 0,
    architecture: undefined,
    embeddingLength: undefined,
    hasChatTemplate: true,
    shape: undefined,
    projectorSizeBytes: 0,
    catalogEntry: entry,
    remote: { replicas },
  }
}

/** A Hearth remote says what each model does; other servers do not, and chat is assumed. */
function kindOf(capabilities: string[] | undefined): ModelKind | undefined {
  if (!capabilities) return undefined
  if (capabilities.includes('chat')) return 'chat'
  if (capabilities.includes('embeddings')) return 'embedding'
  if (capabilities.includes('rerank')) return 'rerank'
  if (capabilities.includes('transcription') || capabilities.includes('translation')) return 'speech'
  return undefined
}
