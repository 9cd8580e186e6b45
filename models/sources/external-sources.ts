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
 * Nothing here writes: every read is a readdir, a stat or a small file.
 */
import { resolve } from 'node:path'
import type { ModelSourceKind } from '../catalog/model-record.ts'
import type { ExternalModel, ModelSourceDirs, SourceListing } from './external-model.ts'
import { listHubCache } from './hf-hub-cache.ts'
import { listLlamaCppCache } from './llama-cpp-cache.ts'
import { listLmStudioFolder } from './lmstudio-folder.ts'
import { OllamaStore } from './ollama-store.ts'
import { sourceName } from './source-names.ts'

export class ExternalSources {
  private readonly ollama: OllamaStore[]
  private readonly lmstudio: string[]
  private readonly huggingface: string[]
  private readonly llamaCpp: string[]

  constructor(dirs: ModelSourceDirs) {
    const unique = (list: readonly string[] | undefined) => [...new Set((list ?? []).map((d) => resolve(d)))]
    // Ollama's reader keeps what it read of each manifest, so it lives as long as the scanner.
    this.ollama = unique(dirs.ollama).map((dir) => new OllamaStore(dir))
    this.lmstudio = unique(dirs.lmstudio)
    this.huggingface = unique(dirs.huggingface)
    this.llamaCpp = unique(dirs['llama.cpp'])
  }

  async list(): Promise<SourceListing> {
    const listings = await Promise.all([
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
          merged.problems.push({ id: model.id, file: model.path, problem: `the id is taken by the copy in ${sourceName(first.source.kind)} (${first.path})`, source: model.source })
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
