/**
 * The documents kept for chats (`/v1/files`), under `<dataDir>/documents/<id>/`: `meta.json`,
 * `original` (the bytes as uploaded), `text.txt` (the extracted text) and one `embeddings-*.json`
 * per embedding model that has read it. Bounded in
 * number and bytes on disk; past either bound the oldest documents go first. The index lives in
 * memory, read from the folder once; a document without a readable meta.json (a write cut off by
 * a crash) is removed then.
 */
import { createHash, randomBytes } from 'node:crypto'
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { DocumentFormat } from '../../wire-types.ts'

export interface StoredDocument {
  id: string
  name: string
  format: DocumentFormat
  bytes: number
  characters: number
  pages?: number
  createdMs: number
  /** Who may read it: the key that uploaded it (as responses are kept); absent on documents kept before files had owners. */
  owner?: string
  /** OpenAI's `purpose`, as uploaded. */
  purpose?: string
  /** Of the original bytes: the same file sent again (`file_data` in every turn) is read once. */
  sha256?: string
}

export type NewDocument = Omit<StoredDocument, 'id' | 'createdMs' | 'sha256'>

export interface StoreLimits {
  maxDocuments: number
  maxBytes: number
}

export const DEFAULT_STORE_LIMITS: StoreLimits = { maxDocuments: 200, maxBytes: 500 * 1024 * 1024 }

// `file-` as OpenAI names files; `doc_` for documents kept before there was /v1/files.
const ID_PATTERN = /^(file-|doc_)[0-9a-f]{24}$/
const META = 'meta.json'
const TEXT = 'text.txt'
const ORIGINAL = 'original'

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

  /** Keeps a document just read, its bytes and its text; the oldest documents make room when the store is full. */
  async add(document: NewDocument, text: string, original: Buffer): Promise<StoredDocument> {
    // Strictly after the newest, even within one millisecond: the order survives a restart.
    const newest = [...this.entries.values()].at(-1)?.document.createdMs ?? 0
    const stored: StoredDocument = { ...document, id: `file-${randomBytes(12).toString('hex')}`, createdMs: Math.max(Date.now(), newest + 1), sha256: sha256Of(original) }
    const folder = join(this.dir, stored.id)
    await mkdir(folder, { recursive: true })
    await writeFile(join(folder, ORIGINAL), original)
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

  /** The document with these bytes that `owner` already has, newest first. */
  same(original: Buffer, owner: string | undefined): StoredDocument | undefined {
    const hash = sha256Of(original)
    return this.list().findLast((d) => d.sha256 === hash && d.owner === owner)
  }

  /** Oldest first. */
  list(): StoredDocument[] {
    return [...this.entries.values()].map((e) => e.document)
  }

  /** The bytes as uploaded; a document kept before originals were kept has only its text. */
  async original(id: string): Promise<Buffer | undefined> {
    if (!this.entries.has(id)) return undefined
    return readFile(join(this.dir, id, ORIGINAL)).catch(() => undefined)
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

function sha256Of(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex')
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
