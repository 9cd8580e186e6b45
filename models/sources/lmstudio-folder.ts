/**
 * LM Studio's models folder, read in place: `<publisher>/<repo>/<file>.gguf` (LM Studio keeps the
 * layout of the Hugging Face repository it downloaded from), a repository's projector
 * (`mmproj-*.gguf`) beside its models. Folders of other formats (MLX) are passed over.
 */
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import type { SourceListing } from './external-model.ts'
import { ggufFileRole, modelFileStem } from './gguf-file-names.ts'

/** Every GGUF two folders down: ids `lmstudio/<publisher>/<repo>/<file, no .gguf>`. */
export async function listLmStudioFolder(dir: string): Promise<SourceListing> {
  const listing: SourceListing = { models: [], projectors: [], problems: [] }
  const source = { kind: 'lmstudio' as const, dir }
  for (const publisher of await folders(dir)) {
    for (const repo of await folders(join(dir, publisher))) {
      const repoDir = join(dir, publisher, repo)
      const files = await readdir(repoDir, { withFileTypes: true }).catch(() => [])
      for (const file of files.sort((a, b) => a.name.localeCompare(b.name))) {
        if (file.name.startsWith('.') || !(file.isFile() || file.isSymbolicLink())) continue
        const role = ggufFileRole(file.name)
        const path = join(repoDir, file.name)
        if (role === 'projector') listing.projectors.push(path)
        else if (role === 'model') listing.models.push({ id: `lmstudio/${publisher}/${repo}/${modelFileStem(file.name)}`, path, source, ownedBy: publisher })
      }
    }
  }
  return listing
}

async function folders(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => [])
  return entries
    .filter((d) => !d.name.startsWith('.') && (d.isDirectory() || d.isSymbolicLink()))
    .map((d) => d.name)
    .sort()
}
