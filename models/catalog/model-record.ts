/**
 * What the server knows of a model: the record it serves it by, the models it cannot serve and why,
 * and one listing of the folder. Types only, so the folder, the remote entries and the routes share
 * them without needing each other.
 */
import type { CatalogEntry } from './catalog-schema.ts'
import type { FallbackTemplateName } from './fallback-templates.ts'
import type { Capability, ModelKind } from './model-kinds.ts'
import type { RemoteReplica } from './remote-target.ts'

/** A model the server can serve: everything /v1/models shows and an engine needs to load it. */
export interface ModelRecord {
  id: string
  kind: ModelKind
  capabilities: Capability[]
  path: string
  projectorPath: string | undefined
  /** The draft model for speculative decoding (catalog `draft`, or a smaller model of the same vocabulary in the folder). */
  draftPath?: string
  /** Multi-token-prediction layers the file carries (`nextn_predict_layers`): drafts of its own. */
  mtpLayers?: number
  /** What identifies the model's vocabulary (its tokens, tokenizer, BOS and EOS): equal for models a draft can serve. */
  vocabularyHash?: string
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
  /** Set when the file lies in another program's store, which Hearth only reads; absent for the models folder. */
  source?: ModelSource
  /** A model of Ollama's store, or one a Modelfile made: its name and what its manifest adds to the GGUF. */
  ollama?: OllamaModelInfo
  /** A chat model whose template thinks apart (its reasoning comes as reasoning content). */
  thinks?: boolean
  /** A Jinja chat template that replaces the file's own (a Modelfile's TEMPLATE). */
  chatTemplate?: string
  /** LoRA adapters llama-server applies over the weights (a Modelfile's ADAPTER). */
  adapterPaths?: string[]
  /** A chat model whose file has no chat template: the format Hearth chose for it, a guess (fallback-templates.ts). */
  templateGuessed?: FallbackTemplateName
  /** The quantization as Ollama names it (`Q4_K_M`, `Q8_0`, `F16`), from the GGUF's `general.file_type`. */
  fileType?: string
  /** Parameters: every tensor's elements added up (what llama.cpp and Ollama count). */
  parameterCount?: number
  /** `general.size_label` (`3B`, `8x7B`), where the converter wrote one. */
  sizeLabel?: string
  /** `general.basename` (`Llama-3.2`), where the converter wrote one. */
  baseName?: string
  /** `general.name` (`Llama 3.2 3B Instruct`), where the converter wrote one. */
  modelName?: string
}

/** The programs whose downloaded models Hearth serves where they lie (models/sources/). */
export type ModelSourceKind = 'ollama' | 'lmstudio' | 'huggingface' | 'llama.cpp'

export interface ModelSource {
  kind: ModelSourceKind
  /** The store's root: Ollama's models folder, LM Studio's models folder, a hub cache. */
  dir: string
  /**
   * Hearth's own store of the models it pulled by name from a registry (`<models>/ollama`, in
   * Ollama's layout; models/downloads/ollama-pull.ts): Hearth wrote it, and removes from it.
   */
  pulled?: true
}

/** What an Ollama manifest says of its model beyond the GGUF. */
export interface OllamaModelInfo {
  /** As `ollama list` shows it: `llama3.2:3b`, `user/model:tag`, `host/namespace/model:tag`. */
  name: string
  /** The Go template of the template layer. */
  template?: string
  system?: string
  /** The params layer: stop, temperature, num_ctx, … as Ollama wrote them. */
  parameters?: Record<string, unknown>
  /** The messages layer: a conversation the model starts from. */
  messages?: Array<{ role: string; content: string }>
  /** The license layers' texts. */
  license?: string[]
  /** The model a Modelfile made this one FROM, by the name it gave. */
  parent?: string
  /** The Ollama version its Modelfile asks for (`REQUIRES`). */
  requires?: string
  /** sha256 of the manifest, in hex: the digest `ollama list` shows. */
  digest: string
  /** When the manifest was last written (ISO 8601): Ollama's `modified_at`. */
  modifiedAt: string
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
  /** Set when the file lies in another program's store. */
  source?: ModelSource
}

export interface FolderSnapshot {
  models: ModelRecord[]
  broken: BrokenModel[]
  /** Set when models.json itself is unreadable; discovered files are still served. */
  catalogProblem: string | undefined
  /** Voice-activity model files found, by name: the speech models use the first. */
  vadModels: string[]
}
