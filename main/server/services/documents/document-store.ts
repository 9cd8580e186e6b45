/**
 * The documents kept for chats (`/v1/files`), under `<dataDir>/documents/<id>/`: `meta.json`,
 * `original` (the bytes as uploaded), `text.txt` (the extracted text) and one `embeddings-*.json`
 * per embedding model that has read it. The index lives in memory, read from the folder once.
 *
 * A file a client uploaded is kept until a client deletes it: when the disk cannot take another
 * while keeping its reserve free, the upload is refused (507), never made room for by removing an
 * older one. Only the copies of files sent inline (`file_data`, `cache: true`), which their sender
 * sends again with every turn, are a cache: bounded in number and bytes, the oldest go first.
 *
 * A document is written whole into `<id>.partial/` and renamed to `<id>/` once every byte is on the
 * disk, so a folder `<id>/` is a finished document. At start only what is proven unfinished is
 * removed: `.partial` and `.removing` folders, temporary files, and (from versions that wrote in
 * place, meta.json last) a folder without meta.json. A document that cannot be read for any other
 * reason (permissions, too many open files, a damaged meta.json) is kept, logged, and tried again
 * when it is asked for.
 */
import { createHash, randomBytes } from 'node:crypto'
import { mkdir, open, readdir, readFile, rename, rm, stat, statfs } from 'node:fs/promises'
import { join } from 'node:path'
import type { DocumentFormat } from '../../wire-types.ts'
import { syncFolder, TEMPORARY_FILE, writeFileAtomically } from '../atomic-write.ts'
import { fileUnavailable, storageFull } from './document-errors.ts'

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
  /**
   * A copy of a file sent inline (`file_data`), which its sender sends again with every turn: the
   * store may remove it to make room. Absent: uploaded, kept until a client deletes it.
   */
  cache?: boolean
}

export type NewDocument = Omit<StoredDocument, 'id' | 'createdMs' | 'sha256'>

/** The bounds of the cache (copies of files sent inline); uploaded files are bounded by the disk alone. */
export interface StoreLimits {
  maxDocuments: number
  maxBytes: number
}

export const DEFAULT_STORE_LIMITS: StoreLimits = { maxDocuments: 200, maxBytes: 500 * 1024 * 1024 }

/**
 * The disk space a new document must leave free: the server still has keys, conversations and the
 * prompt cache to write, and the computer its own work. 256 MiB, or 5 % of a small disk.
 */
export function diskReserve(totalBytes: number): number {
  return Math.min(256 * 1024 * 1024, Math.floor(totalBytes * 0.05))
}

export interface StoreOptions {
  /** Where problems are said (unreadable documents, a failed cache write). */
  log?: (line: string) => void
  /** Free and total bytes of the disk under `dir` (tests give their own). */
  diskSpace?: (dir: string) => Promise<{ free: number; total: number }>
}

// `file-` as OpenAI names files; `doc_` for documents kept before there was /v1/files.
const ID_PATTERN = /^(file-|doc_)[0-9a-f]{24}$/
/** A document being written, or being removed: never a finished one. */
const UNFINISHED = /^(file-|doc_)[0-9a-f]{24}\.(partial|removing)$/
/** Temporary files of versions before atomic-write.ts (`meta.json.<pid>.<hex>.tmp`). */
const OLD_TEMPORARY_FILE = /\.\d+\.[0-9a-f]{8}\.tmp$/
const META = 'meta.json'
const TEXT = 'text.txt'
const ORIGINAL = 'original'
/** Room for meta.json and the folder itself besides the original and its text. */
const OVERHEAD_BYTES = 64 * 1024
/** How often documents that could not be read are tried again when the list is asked for. */
const RETRY_LIST_MS = 30_000

interface Entry {
  document: StoredDocument
  /** Bytes its files take on disk. */
  diskBytes: number
}

type ReadResult = { entry: Entry } | { unfinished: true } | { problem: string }

export class DocumentStore {
  /** Oldest first: Map keeps insertion order. */
  private entries = new Map<string, Entry>()
  /** Documents kept on the disk that could not be read, with why. */
  private readonly unreadable = new Map<string, string>()
  private lastRetryMs = 0
  private readonly log: (line: string) => void
  private readonly diskSpace: (dir: string) => Promise<{ free: number; total: number }>

  private constructor(
    readonly dir: string,
    private readonly limits: StoreLimits,
    options: StoreOptions,
  ) {
    this.log = options.log ?? console.warn
    this.diskSpace = options.diskSpace ?? freeSpaceOf
  }

  static async open(dir: string, limits: StoreLimits = DEFAULT_STORE_LIMITS, options: StoreOptions = {}): Promise<DocumentStore> {
    const store = new DocumentStore(dir, limits, options)
    await mkdir(dir, { recursive: true })
    const found: Entry[] = []
    for (const name of await readdir(dir)) {
      if (UNFINISHED.test(name) || TEMPORARY_FILE.test(name)) {
        await rm(join(dir, name), { recursive: true, force: true })
        continue
      }
      if (!ID_PATTERN.test(name)) continue
      const read = await readEntry(dir, name)
      if ('entry' in read) found.push(read.entry)
      else if ('unfinished' in read) await rm(join(dir, name), { recursive: true, force: true })
      else store.setUnreadable(name, read.problem)
    }
    for (const entry of found.sort((a, b) => a.document.createdMs - b.document.createdMs)) store.entries.set(entry.document.id, entry)
    await store.evictCache(undefined)
    return store
  }

  /**
   * Keeps a document just read, its bytes and its text, on the disk before this returns. A copy
   * sent inline (`cache`) makes room by removing older copies; an upload never removes anything,
   * and is refused (507) when the disk cannot take it and keep its reserve.
   */
  async add(document: NewDocument, text: string, original: Buffer): Promise<StoredDocument> {
    const cache = document.cache === true
    await this.makeRoom(original.length + Buffer.byteLength(text) + OVERHEAD_BYTES, cache)
    // Strictly after the newest, even within one millisecond: the order survives a restart.
    const newest = [...this.entries.values()].at(-1)?.document.createdMs ?? 0
    const { cache: _, ...rest } = document
    const stored: StoredDocument = {
      ...rest,
      ...(cache ? { cache: true } : {}),
      id: `file-${randomBytes(12).toString('hex')}`,
      createdMs: Math.max(Date.now(), newest + 1),
      sha256: sha256Of(original),
    }
    const folder = join(this.dir, stored.id)
    const partial = `${folder}.partial`
    try {
      await mkdir(partial)
      await writeDurably(join(partial, ORIGINAL), original)
      await writeDurably(join(partial, TEXT), text)
      await writeDurably(join(partial, META), JSON.stringify(stored))
      await syncFolder(partial)
      // The document exists from this rename on, whole.
      await rename(partial, folder)
      await syncFolder(this.dir)
    } catch (e) {
      await rm(partial, { recursive: true, force: true })
      if ((e as NodeJS.ErrnoException).code === 'ENOSPC') throw storageFull(await this.freeText())
      throw e
    }
    this.entries.set(stored.id, { document: stored, diskBytes: await folderBytes(folder) })
    if (cache) await this.evictCache(stored.id)
    return stored
  }

  get(id: string): StoredDocument | undefined {
    return this.entries.get(id)?.document
  }

  /**
   * The document, reading it again where it could not be read before; a document kept on the disk
   * that still cannot be read is 503 `file_unavailable` (not 404: it was not deleted).
   */
  async find(id: string): Promise<StoredDocument | undefined> {
    const known = this.entries.get(id)
    if (known) return known.document
    if (!this.unreadable.has(id)) return undefined
    await this.retry([id])
    const found = this.entries.get(id)?.document
    if (!found) throw fileUnavailable(id, this.unreadable.get(id) ?? 'it could not be read')
    return found
  }

  /** The documents that could not be read, with why (for the log and for tests). */
  problems(): Array<{ id: string; problem: string }> {
    return [...this.unreadable].map(([id, problem]) => ({ id, problem }))
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

  /** Oldest first, after trying again (at most every half minute) the documents that could not be read. */
  async listAll(): Promise<StoredDocument[]> {
    if (this.unreadable.size > 0 && Date.now() - this.lastRetryMs > RETRY_LIST_MS) await this.retry([...this.unreadable.keys()])
    return this.list()
  }

  /** The bytes as uploaded; a document kept before originals were kept has only its text. */
  async original(id: string): Promise<Buffer | undefined> {
    if (!this.entries.has(id)) return undefined
    return readFile(join(this.dir, id, ORIGINAL)).catch(absentOnly)
  }

  async text(id: string): Promise<string | undefined> {
    if (!this.entries.has(id)) return undefined
    return readFile(join(this.dir, id, TEXT), 'utf8').catch(absentOnly)
  }

  /** Removes the document; gone for good (across a crash) once this returns. */
  async remove(id: string): Promise<boolean> {
    if (!this.entries.delete(id)) return false
    const removing = join(this.dir, `${id}.removing`)
    // One rename takes it away whole; a crash during the slow part leaves a folder start removes.
    try {
      await rename(join(this.dir, id), removing)
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return true
      throw e
    }
    await syncFolder(this.dir)
    await rm(removing, { recursive: true, force: true })
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

  /** Keeps what was worked out for a document; where the disk is full it is not kept (worked out again next time). */
  async writeCache(id: string, key: string, value: unknown): Promise<void> {
    const entry = this.entries.get(id)
    if (!entry) return // deleted meanwhile: nothing to keep
    const folder = join(this.dir, id)
    try {
      await writeFileAtomically(join(folder, cacheFile(key)), JSON.stringify(value))
      entry.diskBytes = await folderBytes(folder)
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code
      if (code === 'ENOENT') return
      if (code !== 'ENOSPC') throw e
      this.log(`warning: the embeddings of document ${id} were not kept: the disk under ${this.dir} is full`)
      return
    }
    if (entry.document.cache) await this.evictCache(id)
  }

  /** Room for `bytes` more with the disk's reserve kept free: older copies of inline files go for a copy; an upload is refused. */
  private async makeRoom(bytes: number, cache: boolean): Promise<void> {
    for (;;) {
      const { free, total } = await this.diskSpace(this.dir)
      if (free - bytes >= diskReserve(total)) return
      const oldest = cache ? this.cachedIds()[0] : undefined
      if (oldest === undefined) throw storageFull(await this.freeText())
      await this.remove(oldest)
    }
  }

  private async freeText(): Promise<string> {
    const { free, total } = await this.diskSpace(this.dir).catch(() => ({ free: 0, total: 0 }))
    return `the disk under ${this.dir} has ${megabytes(free)} free, and Hearth keeps ${megabytes(diskReserve(total))} of it free`
  }

  private cachedIds(except?: string): string[] {
    return [...this.entries.values()].filter((e) => e.document.cache && e.document.id !== except).map((e) => e.document.id)
  }

  /** Removes the oldest copies of inline files (never `keep`) until the cache is within its bounds. */
  private async evictCache(keep: string | undefined): Promise<void> {
    const cached = () => [...this.entries.values()].filter((e) => e.document.cache)
    const total = () => cached().reduce((sum, e) => sum + e.diskBytes, 0)
    while (cached().length > this.limits.maxDocuments || (cached().length > 1 && total() > this.limits.maxBytes)) {
      const oldest = this.cachedIds(keep)[0]
      if (oldest === undefined) return
      await this.remove(oldest)
    }
  }

  private setUnreadable(id: string, problem: string): void {
    this.unreadable.set(id, problem)
    this.log(`warning: document ${id} in ${this.dir} cannot be read (${problem}); it is kept, and read again when it is asked for`)
  }

  private async retry(ids: string[]): Promise<void> {
    this.lastRetryMs = Date.now()
    let recovered = false
    for (const id of ids) {
      const read = await readEntry(this.dir, id)
      if ('entry' in read) {
        this.unreadable.delete(id)
        this.entries.set(id, read.entry)
        recovered = true
        this.log(`document ${id} can be read again`)
      } else if ('unfinished' in read) {
        // Its meta.json is gone now: whatever it was, nothing of it can be served.
        this.unreadable.set(id, 'its meta.json is missing')
      } else {
        this.unreadable.set(id, read.problem)
      }
    }
    if (recovered) this.entries = new Map([...this.entries].sort(([, a], [, b]) => a.document.createdMs - b.document.createdMs))
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

/**
 * A document folder read: finished, proven unfinished (no meta.json: it is written last), or
 * unreadable for some other reason, said in words.
 */
async function readEntry(dir: string, id: string): Promise<ReadResult> {
  const folder = join(dir, id)
  let text: string
  try {
    text = await readFile(join(folder, META), 'utf8')
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return { unfinished: true }
    return { problem: `${META}: ${code ?? (e as Error).message}` }
  }
  let document: StoredDocument
  try {
    document = JSON.parse(text) as StoredDocument
  } catch {
    return { problem: `${META} is not valid JSON` }
  }
  if (document?.id !== id) return { problem: `${META} names another document (${JSON.stringify(document?.id)})` }
  try {
    return { entry: { document, diskBytes: await folderBytes(folder, true) } }
  } catch (e) {
    return { problem: `${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` }
  }
}

/** Bytes of a document's files; `tidy` removes temporary files left by writes a crash cut off. */
async function folderBytes(folder: string, tidy = false): Promise<number> {
  let sum = 0
  for (const name of await readdir(folder)) {
    if (tidy && (TEMPORARY_FILE.test(name) || OLD_TEMPORARY_FILE.test(name))) {
      await rm(join(folder, name), { force: true })
      continue
    }
    sum += (await stat(join(folder, name))).size
  }
  return sum
}

/** A new file, flushed to the disk (its folder is renamed into place once all are). */
async function writeDurably(path: string, data: string | Buffer): Promise<void> {
  const handle = await open(path, 'wx')
  try {
    await handle.writeFile(data)
    await handle.sync()
  } finally {
    await handle.close()
  }
}

async function freeSpaceOf(dir: string): Promise<{ free: number; total: number }> {
  const s = await statfs(dir)
  return { free: s.bavail * s.bsize, total: s.blocks * s.bsize }
}

function absentOnly(e: unknown): undefined {
  if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined
  throw e
}

function megabytes(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`
}
