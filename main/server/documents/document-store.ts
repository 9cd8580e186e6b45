/**
 * The documents kept for the chat, under `<dataDir>/documents/<id>/`: `meta.json`, `text.txt` (the
 * extracted text) and one `embeddings-*.json` per embedding model that has read it. Bounded in
 * number and bytes on disk; past either bound the oldest documents go first. The index lives in
 * memory, read from the folder once; a document without a readable meta.json (a write cut off by
 * a crash) is removed then.
 */
import { randomBytes } from 'node:crypto'
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { DocumentFormat } from '../wire-types.ts'

export interface StoredDocument {
  id: string
  name: string
  format: DocumentFormat
  bytes: number
  characters: number
  pages?: number
  createdMs: number
}

export interface StoreLimits {
  maxDocuments: number
  maxBytes: number
}

export const DEFAULT_STORE_LIMITS: StoreLimits = { maxDocuments: 200, maxBytes: 500 * 1024 * 1024 }

const ID_PATTERN = /^doc_[0-9a-f]{24}$/
const META = 'meta.json'
const TEXT = 'text.txt'

interface Entry {
  document: StoredDocument
  /** Bytes its files take on disk. */
  diskBytes: number
}

export class DocumentStore {
  /** Oldest first: Map keeps insertion order. */
  private readonly entries = new Map<string, Entry>()

  private constructor(
    readonly dir: string,
    private readonly limits: StoreLimits,
  ) {}

  static async open(dir: string, limits: StoreLimits = DEFAULT_STORE_LIMITS): Promise<DocumentStore> {
    const store = new DocumentStore(dir, limits)
    await mkdir(dir, { recursive: true })
    const found: Entry[] = []
    for (const name of await readdir(dir)) {
      if (!ID_PATTERN.test(name)) continue
      const entry = await readEntry(join(dir, name)).catch(() => undefined)
      if (entry && entry.document.id === name) found.push(entry)
      else await rm(join(dir, name), { recursive: true, force: true })
    }
    for (const entry of found.sort((a, b) => a.document.createdMs - b.document.createdMs)) store.entries.set(entry.document.id, entry)
    await store.evict(undefined)
    return store
  }

  /** Keeps the text of a document just read; the oldest documents make room when the store is full. */
  async add(document: Omit<StoredDocument, 'id' | 'createdMs'>, text: string): Promise<StoredDocument> {
    // Strictly after the newest, even within one millisecond: the order survives a restart.
    const newest = [...this.entries.values()].at(-1)?.document.createdMs ?? 0
    const stored: StoredDocument = { ...document, id: `doc_${randomBytes(12).toString('hex')}`, createdMs: Math.max(Date.now(), newest + 1) }
    const folder = join(this.dir, stored.id)
    await mkdir(folder, { recursive: true })
    await writeFile(join(folder, TEXT), text)
    // meta.json last: a folder without it is a write that never finished.
    await writeAtomically(join(folder, META), JSON.stringify(stored))
    this.entries.set(stored.id, { document: stored, diskBytes: await folderBytes(folder) })
    await this.evict(stored.id)
    return stored
  }

  get(id: string): StoredDocument | undefined {
    return this.entries.get(id)?.document
  }

  list(): StoredDocument[] {
    return [...this.entries.values()].map((e) => e.document)
  }

  async text(id: string): Promise<string | undefined> {
    if (!this.entries.has(id)) return undefined
    return readFile(join(this.dir, id, TEXT), 'utf8').catch(() => undefined)
  }

  async remove(id: string): Promise<boolean> {
    if (!this.entries.delete(id)) return false
    await rm(join(this.dir, id), { recursive: true, force: true })
    return true
  }

  /** What was cached for this document under `key` (one per embedding model), if anything. */
  async readCache(id: string, key: string): Promise<unknown> {
    if (!this.entries.has(id)) return undefined
    try {
      return JSON.parse(await readFile(join(this.dir, id, cacheFile(key)), 'utf8')) as unknown
    } catch {
      return undefined
    }
  }

  async writeCache(id: string, key: string, value: unknown): Promise<void> {
    const entry = this.entries.get(id)
    if (!entry) return // deleted meanwhile: nothing to keep
    const folder = join(this.dir, id)
    try {
      await writeAtomically(join(folder, cacheFile(key)), JSON.stringify(value))
      entry.diskBytes = await folderBytes(folder)
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e
      return
    }
    await this.evict(id)
  }

  /** Removes the oldest documents (never `keep`) until the store is within its bounds. */
  private async evict(keep: string | undefined): Promise<void> {
    const total = () => [...this.entries.values()].reduce((sum, e) => sum + e.diskBytes, 0)
    while (this.entries.size > this.limits.maxDocuments || (this.entries.size > 1 && total() > this.limits.maxBytes)) {
      const oldest = [...this.entries.keys()].find((id) => id !== keep)
      if (oldest === undefined) return
      await this.remove(oldest)
    }
  }
}

export function isDocumentId(id: string): boolean {
  return ID_PATTERN.test(id)
}

/** A file name from any key: the key is hashed, so a model id never becomes a path. */
function cacheFile(key: string): string {
  let hash = 0x811c9dc5
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193) >>> 0
  return `embeddings-${hash.toString(16).padStart(8, '0')}.json`
}

async function readEntry(folder: string): Promise<Entry> {
  const document = JSON.parse(await readFile(join(folder, META), 'utf8')) as StoredDocument
  return { document, diskBytes: await folderBytes(folder) }
}

async function folderBytes(folder: string): Promise<number> {
  let sum = 0
  for (const name of await readdir(folder)) sum += (await stat(join(folder, name))).size
  return sum
}

async function writeAtomically(path: string, content: string): Promise<void> {
  const temporary = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`
  await writeFile(temporary, content)
  await rename(temporary, path)
}
