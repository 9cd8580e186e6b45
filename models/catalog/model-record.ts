/**
 * What the server knows of a model: the record it serves it by, the models it cannot serve and why,
 * and one listing of the folder. Types only, so the folder, the remote entries and the routes share
 * them without needing each other.
 */
import type { CatalogEntry } from './catalog-schema.ts'
import type { Capability, ModelKind } from './model-kinds.ts'
import type { RemoteReplica } from './remote-target.ts'

/** A model the server can serve: everything /v1/models shows and an engine needs to load it. */
export interface ModelRecord {
  id: string
  kind: ModelKind
  capabilities: Capability[]
  path: string
  projectorPath: string | undefined
  /** The draft model for speculative decoding (catalog `draft`), when there is one. */
  draftPath?: string
  /** Speech models: the voice-activity model found in the folder, when there is one. */
  vadModelPath?: string
  /** A model on other machines (catalog `remote` or `replicas`); `path` is empty then. */
  remote?: { replicas: RemoteReplica[] }
  ownedBy: string
  /** Unix seconds: when the file was last written. */
  created: number
  /** Tokens of context each request gets: what the engine really gives, where that is less than asked. */
  contextLength: number
  /** Set when the catalog asked for more context than the model gets, saying why. */
  contextNote?: string
  maxCompletionTokens: number
  pricing: { prompt: string; completion: string }
  sizeBytes: number
  architecture: string | undefined
  /** Width of the model's token embeddings: a projector must produce exactly this. */
  embeddingLength: number | undefined
  hasChatTemplate: boolean
  /** What the memory plan reads: the model's shape (GGUF only) and the projector's size. */
  shape: ModelShape | undefined
  projectorSizeBytes: number
  /** The catalog entry as written, for settings later issues read (ttl, gpu_layers, …). */
  catalogEntry: CatalogEntry | undefined
}

export interface ModelShape {
  layers: number
  embeddingLength: number
  headCount: number
  headCountKv: number
  vocabularySize: number
}

/** A model that is listed or present but cannot be served, with the reason in words. */
export interface BrokenModel {
  id: string
  file: string
  problem: string
}

export interface FolderSnapshot {
  models: ModelRecord[]
  broken: BrokenModel[]
  /** Set when models.json itself is unreadable; discovered files are still served. */
  catalogProblem: string | undefined
  /** Voice-activity model files found, by name: the speech models use the first. */
  vadModels: string[]
}
