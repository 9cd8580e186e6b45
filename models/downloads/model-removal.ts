/**
 * Removes a model: its catalog entries and the files it owns. Only files inside the models folder
 * that the model's entry (or discovery) points to are deleted, and never one another model still uses.
 * A model of another program's store (Ollama's, LM Studio's, a hub cache) is refused: Hearth only
 * reads those, and says which command removes it. A model Hearth pulled by name (its `ollama/`
 * store) goes with its manifest and the blobs no other pulled model uses.
 */
import { lstat, unlink } from 'node:fs/promises'
import { basename, dirname, join, relative, resolve, sep } from 'node:path'
import { readCatalogEntries, removeCatalogEntries } from '../catalog/catalog-writer.ts'
import type { ModelFolder } from '../catalog/model-folder.ts'
import { parseOllamaName } from '../sources/ollama-names.ts'
import { readOnlyRefusal } from '../sources/source-names.ts'
import { DownloadError } from './download-error.ts'
import { removePulledModel } from './ollama-pulled-store.ts'

export interface RemovalResult {
  id: string
  /** Deleted files, relative to the models folder. */
  files: string[]
}

export interface RemovalOptions {
  /** Called before any file goes, e.g. to unload the model. */
  beforeDelete?: (id: string) => Promise<void>
}

export async function removeModel(folder: ModelFolder, id: string, options: RemovalOptions = {}): Promise<RemovalResult> {
  const dir = folder.dir
  const { models, broken } = await folder.scan()
  const model = models.find((m) => m.id === id)
  const problem = model ? undefined : broken.find((b) => b.id === id)
  if (!model && !problem) throw new DownloadError('not_found', `The model '${id}' does not exist`, 'id')
  const source = model ? model.source : problem!.source
  if (source?.pulled) {
    const name = parseOllamaName(id)
    if (!name) throw new DownloadError('invalid_value', `"${id}" is not an Ollama model name`, 'id')
    await options.beforeDelete?.(id)
    const removed = await removePulledModel(source.dir, name)
    return { id, files: removed.map((p) => relative(dir, p).split(sep).join('/')) }
  }
  if (source) throw new DownloadError('invalid_value', readOnlyRefusal(id, source, model?.path ?? problem!.file), 'id')

  const entries = await readCatalogEntries(dir)
  const owned = (entry: unknown) => catalogIdOf(dir, entry) === id
  const remaining = entries.filter((e) => !owned(e))
  const stillReferenced = new Set<string>()
  for (const entry of remaining) {
    for (const key of ['file', 'mmproj'] as const) {
      const value = (entry as Record<string, unknown> | null)?.[key]
      const path = typeof value === 'string' ? inside(dir, value) : undefined
      if (path) stillReferenced.add(path)
    }
  }
  for (const other of models) {
    if (other.id === id) continue
    stillReferenced.add(other.path)
    if (other.projectorPath) stillReferenced.add(other.projectorPath)
  }

  const candidates: string[] = []
  const modelPath = model?.path ?? (problem ? inside(dir, problem.file) : undefined)
  if (modelPath) candidates.push(modelPath, ...laterSplitParts(modelPath))
  if (model?.projectorPath) candidates.push(model.projectorPath)
  for (const entry of entries.filter(owned)) {
    const mmproj = (entry as Record<string, unknown>).mmproj
    const path = typeof mmproj === 'string' ? inside(dir, mmproj) : undefined
    if (path) candidates.push(path)
  }
  const toDelete = [...new Set(candidates)].filter((p) => !stillReferenced.has(p))

  await options.beforeDelete?.(id)
  if (entries.some(owned)) await removeCatalogEntries(dir, owned)
  const deleted: string[] = []
  for (const path of toDelete) {
    const info = await lstat(path).catch(() => undefined)
    if (!info || info.isDirectory()) continue
    await unlink(path)
    deleted.push(relative(dir, path).split(sep).join('/'))
  }
  return { id, files: deleted }
}

/** The id the folder scan gives a catalog entry: its `id`, else its file's path without extension. */
function catalogIdOf(dir: string, entry: unknown): string | undefined {
  if (typeof entry !== 'object' || entry === null) return undefined
  const { id, file } = entry as { id?: unknown; file?: unknown }
  if (typeof id === 'string' && id.length > 0) return id
  if (typeof file !== 'string') return undefined
  return relative(dir, resolve(dir, file))
    .split(sep)
    .join('/')
    .replace(/\.(gguf|bin)$/i, '')
    .replace(/-0*1-of-\d+$/, '')
}

/** A path from the catalog, only when it stays inside the models folder. */
function inside(dir: string, file: string): string | undefined {
  const full = resolve(dir, file)
  return full.startsWith(dir + sep) ? full : undefined
}

/** `name-00001-of-00003.gguf` → the paths of parts 2 and 3. */
function laterSplitParts(path: string): string[] {
  const m = /^(.*)-(0*)1-of-(\d+)\.gguf$/i.exec(basename(path))
  if (!m) return []
  const [, stem, zeros, count] = m
  const width = zeros!.length + 1
  const parts: string[] = []
  for (let i = 2; i <= Number(count); i++) parts.push(join(dirname(path), `${stem}-${String(i).padStart(width, '0')}-of-${count}.gguf`))
  return parts
}
