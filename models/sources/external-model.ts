/**
 * A model file another program downloaded, as its store lists it: what the folder scan needs to
 * serve it where it lies. Types only, shared by the readers of each store and the scan.
 */
import type { BrokenModel, ModelSource, ModelSourceKind, OllamaModelInfo } from '../catalog/model-record.ts'

export interface ExternalModel {
  /** The id it is served by; each store has its own form (see external-sources.ts). */
  id: string
  /** The model GGUF (its first part, when split). */
  path: string
  /** Ollama's projector layer. The other stores' projectors pair by name in the folder scan. */
  projectorPath?: string
  source: ModelSource
  ownedBy: string
  ollama?: OllamaModelInfo
}

/** One store's listing. */
export interface SourceListing {
  models: ExternalModel[]
  /** Projector files beside the models (`mmproj-*.gguf`), paired by name and width in the scan. */
  projectors: string[]
  /** What the store holds but llama.cpp cannot serve, with the reason. */
  problems: BrokenModel[]
}

/** Which stores to read, and where: a kind left out, or given no folders, is not read. */
export type ModelSourceDirs = Partial<Record<ModelSourceKind, readonly string[]>>
