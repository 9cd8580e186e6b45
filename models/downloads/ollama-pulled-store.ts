/**
 * Writing Hearth's store of the models it pulled by name (models/sources/pulled-store.ts): its
 * manifests in one step each, the digests they use, and the removal of a model, which takes its
 * manifest and the blobs no other manifest of the store still names (Ollama's `ollama rm` does the
 * same in its own store).
 */
import { randomBytes } from 'node:crypto'
import { mkdir, readdir, readFile, rename, rm, rmdir, writeFile } from 'node:fs/promises'
import { dirname, join, relative } from 'node:path'
import type { OllamaName } from '../sources/ollama-names.ts'
import { blobFileName } from './ollama-blob-download.ts'

export function manifestPath(storeDir: string, name: OllamaName): string {
  return join(storeDir, 'manifests', name.host, name.namespace, name.model, name.tag)
}

export function blobPath(storeDir: string, digest: string): string {
  return join(storeDir, 'blobs', blobFileName(digest))
}

/** The manifest as the registry sent it, put in place in one step (a reader never sees half of it). */
export async function writeManifest(storeDir: string, name: OllamaName, bytes: Buffer): Promise<string> {
  const path = manifestPath(storeDir, name)
  await mkdir(dirname(path), { recursive: true })
  const temporary = join(dirname(path), `.${name.tag}.${randomBytes(4).toString('hex')}.tmp`)
  await writeFile(temporary, bytes)
  try {
    await rename(temporary, path)
  } catch (e) {
    await rm(temporary, { force: true })
    throw e
  }
  return path
}

/** The digests a manifest's config and layers name (an unreadable manifest names none). */
export async function digestsOf(path: string): Promise<string[]> {
  try {
    const json = JSON.parse(await readFile(path, 'utf8')) as { config?: { digest?: unknown }; layers?: Array<{ digest?: unknown }> }
    return [json.config?.digest, ...(json.layers ?? []).map((l) => l.digest)].filter((d): d is string => typeof d === 'string' && d !== '')
  } catch {
    return []
  }
}

/** Every manifest file of the store (`manifests/<host>/<namespace>/<model>/<tag>`). */
export async function manifestFiles(storeDir: string): Promise<string[]> {
  const root = join(storeDir, 'manifests')
  const names = await readdir(root, { recursive: true, withFileTypes: true }).catch(() => [])
  return names
    .filter((d) => d.isFile() && !d.name.startsWith('.'))
    .map((d) => join(d.parentPath, d.name))
    .filter((p) => relative(root, p).split(/[\\/]/).length === 4)
}

/** Blobs named by some manifest of the store. */
export async function referencedDigests(storeDir: string, except?: string): Promise<Set<string>> {
  const used = new Set<string>()
  for (const path of await manifestFiles(storeDir)) {
    if (path === except) continue
    for (const digest of await digestsOf(path)) used.add(digest)
  }
  return used
}

/** Deletes the blobs among `digests` that no manifest of the store names any more; returns their paths. */
export async function removeUnusedBlobs(storeDir: string, digests: Iterable<string>): Promise<string[]> {
  const used = await referencedDigests(storeDir)
  const removed: string[] = []
  for (const digest of new Set(digests)) {
    if (used.has(digest) || !/^sha256:[0-9a-f]{64}$/.test(digest)) continue
    const path = blobPath(storeDir, digest)
    await rm(path, { force: true })
    removed.push(path)
  }
  return removed
}

/**
 * Removes a pulled model: its manifest, then its blobs that no other manifest names, then the
 * folders left empty. Returns the files removed.
 */
export async function removePulledModel(storeDir: string, name: OllamaName): Promise<string[]> {
  const path = manifestPath(storeDir, name)
  const digests = await digestsOf(path)
  await rm(path)
  const removed = [path, ...(await removeUnusedBlobs(storeDir, digests))]
  // Empty tag, model, namespace and host folders go, as Ollama's PruneDirectory does.
  let dir = dirname(path)
  for (let i = 0; i < 3; i++) {
    if (
      !(await rmdir(dir).then(
        () => true,
        () => false,
      ))
    )
      break
    dir = dirname(dir)
  }
  return removed
}
