/**
 * The model files other programs downloaded, from every store that is turned on, as one listing.
 * Each store's ids have their own form, so they never meet Hearth's own folder ids by accident:
 * - Ollama: the name `ollama list` shows (`llama3.2:3b`, `user/model:tag`, `host/ns/model:tag`);
 * - LM Studio: `lmstudio/<publisher>/<repo>/<file without .gguf>`;
 * - the Hugging Face cache: `hf/<org>/<repo>/<path in the repo without .gguf>`;
 * - llama.cpp's cache: `llama.cpp/<file without .gguf>`, or `llama.cpp/<org>/<repo>/<path>` for
 *   its hub layout.
 * A split model is named after its first part without `-00001-of-0000N`. Where two stores give
 * one id, the store earlier in that list serves it. A file two stores reach (`$LLAMA_CACHE` set to
 * the hub cache) is listed by the first; within Ollama's store, tags sharing a blob
 * (`llama3.2:latest`, `llama3.2:3b`) are each listed, as Ollama lists them.
 * The models Hearth pulled by name (pulled-store.ts, in its own models folder) come before every
 * store: a name in both is served from Hearth's copy and listed once, and where Ollama's copy is
 * the same model (its blob has the same digest, as it has when the pull linked it from there) it is
 * not even named as shadowed.
 * Nothing here writes: every read is a readdir, a stat or a small file.
 */
import { basename, resolve } from 'node:path'
import type { ModelSourceKind } from '../catalog/model-record.ts'
import type { ExternalModel, ModelSourceDirs, SourceListing } from './external-model.ts'
import { listHubCache } from './hf-hub-cache.ts'
import { listLlamaCppCache } from './llama-cpp-cache.ts'
import { listLmStudioFolder } from './lmstudio-folder.ts'
import { OllamaStore } from './ollama-store.ts'
import { sourceName } from './source-names.ts'

export class ExternalSources {
  private readonly pulled: OllamaStore | undefined
  private readonly ollama: OllamaStore[]
  private readonly lmstudio: string[]
  private readonly huggingface: string[]
  private readonly llamaCpp: string[]

  /** `pulledOllama`: the folder of the models Hearth pulled by name, read whatever the stores. */
  constructor(dirs: ModelSourceDirs, options: { pulledOllama?: string } = {}) {
    const unique = (list: readonly string[] | undefined) => [...new Set((list ?? []).map((d) => resolve(d)))]
    // Ollama's reader keeps what it read of each manifest, so it lives as long as the scanner.
    const pulled = options.pulledOllama === undefined ? undefined : resolve(options.pulledOllama)
    this.pulled = pulled === undefined ? undefined : new OllamaStore(pulled, { pulled: true })
    // OLLAMA_MODELS pointed at Hearth's pulled models (so that Ollama runs them too) is one store, not two.
    this.ollama = unique(dirs.ollama)
      .filter((dir) => dir !== pulled)
      .map((dir) => new OllamaStore(dir))
    this.lmstudio = unique(dirs.lmstudio)
    this.huggingface = unique(dirs.huggingface)
    this.llamaCpp = unique(dirs['llama.cpp'])
  }

  async list(): Promise<SourceListing> {
    const listings = await Promise.all([
      ...(this.pulled ? [this.pulled.list()] : []),
      ...this.ollama.map((store) => store.list()),
      ...this.lmstudio.map((dir) => listLmStudioFolder(dir)),
      ...this.huggingface.map((dir) => listHubCache(dir, { kind: 'huggingface', idPrefix: 'hf' })),
      ...this.llamaCpp.map((dir) => listLlamaCppCache(dir)),
    ])
    const merged: SourceListing = { models: [], projectors: [], problems: [] }
    const byId = new Map<string, ExternalModel>()
    const listedBy = new Map<string, ModelSourceKind>()
    for (const listing of listings) {
      for (const model of listing.models) {
        const kind = listedBy.get(model.path)
        if (kind !== undefined && kind !== model.source.kind) continue
        listedBy.set(model.path, model.source.kind)
        const first = byId.get(model.id)
        if (first) {
          // The same model Hearth pulled (a blob is named by its digest): one model, listed once.
          if (first.source.pulled && model.source.kind === 'ollama' && basename(first.path) === basename(model.path)) continue
          merged.problems.push({
            id: model.id,
            file: model.path,
            problem: `the id is taken by the copy in ${sourceName(first.source)} (${first.path})`,
            source: model.source,
          })
          continue
        }
        byId.set(model.id, model)
        merged.models.push(model)
      }
      merged.projectors.push(...listing.projectors)
      merged.problems.push(...listing.problems)
    }
    merged.projectors = [...new Set(merged.projectors)]
    return merged
  }
}
