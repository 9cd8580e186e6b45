/**
 * A Hugging Face hub cache, read in place: `models--<org>--<repo>/snapshots/<revision>/<path>`, each
 * file a link to `../../blobs/<hash>` (a copy where links are not allowed), the revision a branch
 * points to in `refs/<branch>`. The `huggingface_hub` library writes it, and llama.cpp's `-hf`
 * downloads write the same layout (common/hf-cache.cpp): one revision per repository is read, the
 * one `refs/main` names, as llama.cpp does; links are followed when the files are read.
 */
import { readdir, readFile, stat } from 'node:fs/promises'
import { basename, join, relative, sep } from 'node:path'
import type { ModelSourceKind } from '../catalog/model-record.ts'
import type { SourceListing } from './external-model.ts'
import { ggufFileRole, modelFileStem } from './gguf-file-names.ts'

const REPO_PREFIX = 'models--'
/** Repositories keep their files a folder or two deep (`Q4_K_M/model-00001-of-00002.gguf`). */
const MAX_SNAPSHOT_DEPTH = 3
const COMMIT = /^[0-9a-f]{40}$/i

export interface HubCacheOptions {
  kind: Extract<ModelSourceKind, 'huggingface' | 'llama.cpp'>
  /** The first part of each id: `hf` for the hub cache, `llama.cpp` for llama.cpp's own cache. */
  idPrefix: string
}

/** Every GGUF of the cache's repositories: ids `<idPrefix>/<org>/<repo>/<path in the repo, no .gguf>`. */
export async function listHubCache(dir: string, options: HubCacheOptions): Promise<SourceListing> {
  const listing: SourceListing = { models: [], projectors: [], problems: [] }
  const source = { kind: options.kind, dir }
  const repos = (await readdir(dir, { withFileTypes: true }).catch(() => [])).filter((d) => d.name.startsWith(REPO_PREFIX) && !d.isFile())
  for (const repo of repos.sort((a, b) => a.name.localeCompare(b.name))) {
    const repoId = repo.name.slice(REPO_PREFIX.length).split('--').join('/')
    const snapshot = await snapshotOf(join(dir, repo.name))
    if (!snapshot) continue
    for (const file of await ggufFiles(snapshot)) {
      const role = ggufFileRole(basename(file))
      if (role === 'other') continue
      const pathInRepo = relative(snapshot, file).split(sep).join('/')
      const id = `${options.idPrefix}/${repoId}/${modelFileStem(pathInRepo)}`
      // A link whose blob is gone: an interrupted download, or a blob removed by hand.
      if (!(await stat(file).catch(() => undefined))?.isFile()) {
        listing.problems.push({ id, file, problem: `its file points to a blob that is missing from the cache (${file})`, source })
        continue
      }
      if (role === 'projector') listing.projectors.push(file)
      else listing.models.push({ id, path: file, source, ownedBy: repoId.split('/')[0]! })
    }
  }
  return listing
}

/** The revision `refs/main` names (else another branch's, else the newest snapshot). */
async function snapshotOf(repoDir: string): Promise<string | undefined> {
  const snapshots = join(repoDir, 'snapshots')
  const refs = await readdir(join(repoDir, 'refs'), { withFileTypes: true }).catch(() => [])
  const ordered = [...refs.filter((r) => r.name === 'main'), ...refs.filter((r) => r.name !== 'main')]
  for (const ref of ordered) {
    if (!ref.isFile()) continue
    const commit = (await readFile(join(repoDir, 'refs', ref.name), 'utf8').catch(() => '')).trim()
    if (COMMIT.test(commit) && (await stat(join(snapshots, commit)).catch(() => undefined))?.isDirectory()) return join(snapshots, commit)
  }
  const revisions = await readdir(snapshots, { withFileTypes: true }).catch(() => [])
  let newest: { path: string; mtimeMs: number } | undefined
  for (const revision of revisions) {
    if (!revision.isDirectory()) continue
    const path = join(snapshots, revision.name)
    const info = await stat(path).catch(() => undefined)
    if (info && (!newest || info.mtimeMs > newest.mtimeMs)) newest = { path, mtimeMs: info.mtimeMs }
  }
  return newest?.path
}

async function ggufFiles(dir: string, depth = 0): Promise<string[]> {
  const found: string[] = []
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => [])
  for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    if (entry.name.startsWith('.')) continue
    const path = join(dir, entry.name)
    if (entry.isDirectory() && depth < MAX_SNAPSHOT_DEPTH) found.push(...(await ggufFiles(path, depth + 1)))
    else if ((entry.isFile() || entry.isSymbolicLink()) && entry.name.toLowerCase().endsWith('.gguf')) found.push(path)
  }
  return found
}
