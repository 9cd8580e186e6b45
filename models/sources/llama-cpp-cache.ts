/**
 * llama.cpp's own download cache, read in place. Since common/hf-cache.cpp, `llama-server -hf`
 * downloads into the Hugging Face hub cache layout: into `$LLAMA_CACHE` when that is set, else into
 * the hub cache itself (read by the huggingface source). The cache folder (`$LLAMA_CACHE`, else
 * `~/.cache/llama.cpp`) also holds files side by side: what older versions' `-hf` wrote
 * (`<org>_<repo>_<file>.gguf`, a `.json` or `.etag` beside each), `-mu` downloads under their URL's
 * file name, and Docker model downloads (`<namespace>_<repo>_<tag>.gguf`).
 */
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import type { SourceListing } from './external-model.ts'
import { ggufFileRole, modelFileStem } from './gguf-file-names.ts'
import { listHubCache } from './hf-hub-cache.ts'

/** Ids `llama.cpp/<file, no .gguf>` for the files side by side, `llama.cpp/<org>/<repo>/<path>` for the hub layout. */
export async function listLlamaCppCache(dir: string): Promise<SourceListing> {
  const listing = await listHubCache(dir, { kind: 'llama.cpp', idPrefix: 'llama.cpp' })
  const source = { kind: 'llama.cpp' as const, dir }
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => [])
  for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    if (entry.name.startsWith('.') || !(entry.isFile() || entry.isSymbolicLink())) continue
    const role = ggufFileRole(entry.name)
    const path = join(dir, entry.name)
    if (role === 'projector') listing.projectors.push(path)
    else if (role === 'model') listing.models.push({ id: `llama.cpp/${modelFileStem(entry.name)}`, path, source, ownedBy: 'llama.cpp' })
  }
  return listing
}
