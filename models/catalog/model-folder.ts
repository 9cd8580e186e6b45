import { statSync } from 'node:fs'
import { join } from 'node:path'
import { CATALOG_FILE, FolderScanner, type FolderScanOptions } from './folder-scan.ts'
import type { FolderSnapshot, ModelRecord } from './model-record.ts'

/** One scan of the folder: when it started, from which `models.json`, and what it found. */
interface FolderScan {
  at: number
  catalog: string
  snapshot: Promise<FolderSnapshot>
}

export interface ModelFolderOptions extends FolderScanOptions {
  /** How old a listing `modelForRequest` uses without a check; default 1 s (tests set 0). */
  listingMaxAgeMs?: number
}

/** A stream of requests lists the folder at most once a second. */
const LISTING_MAX_AGE_MS = 1000

/**
 * The models folder: `models.json` plus every model file found beside it, scanned again as it
 * changes (folder-scan.ts), so new files show up without a restart.
 */
export class ModelFolder {
  readonly dir: string
  private readonly scanner: FolderScanner

  constructor(
    dir: string,
    private readonly options: ModelFolderOptions = {},
  ) {
    this.scanner = new FolderScanner(dir, options)
    this.dir = this.scanner.dir
  }

  private recent: FolderScan | undefined
  private refreshing = false

  /**
   * The last scan if it is younger than `maxAgeMs`, else a new one. Request paths use it so a
   * stream of requests does not list the folder each time.
   */
  cachedScan(maxAgeMs: number): Promise<FolderSnapshot> {
    if (this.recent && performance.now() - this.recent.at < maxAgeMs) return this.recent.snapshot
    const scan = this.startScan()
    this.recent = scan
    scan.snapshot.catch(() => (this.recent = undefined))
    return scan.snapshot
  }

  /**
   * The record a request runs on, without a walk of the folder in its way. A scan younger than
   * `freshMs` (by default the folder's `listingMaxAgeMs`) is used as it is. An older one is used
   * while `models.json` and the model's own file are as they were (two stats), and a new scan runs
   * behind it for the next request; otherwise the request waits for a new scan. Undefined when the
   * folder has no such model.
   */
  async modelForRequest(id: string, freshMs = this.options.listingMaxAgeMs ?? LISTING_MAX_AGE_MS): Promise<ModelRecord | undefined> {
    const last = this.recent
    const snapshot = last && (await last.snapshot.catch(() => undefined))
    const model = snapshot?.models.find((m) => m.id === id)
    if (!last || !model) return (await this.cachedScan(freshMs)).models.find((m) => m.id === id)
    if (performance.now() - last.at < freshMs) return model
    if (last.catalog !== this.catalogStamp() || !this.fileUnchanged(model)) return (await this.cachedScan(0)).models.find((m) => m.id === id)
    this.refreshBehind()
    return model
  }

  /**
   * An engine gives a model less context than its record says (llama-server caps each slot at
   * the trained context, or memory allowed less): from now on the record, the listing, the checks
   * and the errors say what the engine gives. True when this is news.
   */
  reportEngineContext(model: ModelRecord, contextLength: number): boolean {
    if (model.remote || contextLength >= model.contextLength) return false
    this.scanner.noteEngineContext(model, contextLength)
    this.recent = undefined // the next request scans again, with the figure
    return true
  }

  /**
   * The engine found, loading the model, whether its template can call tools; the guess from the
   * template's text (read before loading) gives way to it. True when this is news.
   */
  reportEngineToolCalling(model: ModelRecord, callsTools: boolean): boolean {
    if (model.remote || model.kind !== 'chat' || callsTools === model.capabilities.includes('tools')) return false
    this.scanner.noteEngineToolCalling(model, callsTools)
    this.recent = undefined
    return true
  }

  /** Starts a new scan that replaces the last one once it is done; the last one serves meanwhile. */
  private refreshBehind(): void {
    if (this.refreshing) return
    this.refreshing = true
    const scan = this.startScan()
    scan.snapshot
      .then(() => (this.recent = scan))
      .catch(() => undefined) // the next request scans again and meets the problem itself
      .finally(() => (this.refreshing = false))
  }

  /** A scan started now, with the `models.json` it starts from. */
  private startScan(): FolderScan {
    return { at: performance.now(), catalog: this.catalogStamp(), snapshot: this.scan() }
  }

  // These checks sit on a request's path and stat synchronously: a few microseconds, where a
  // round trip through libuv's thread pool costs a request up to a millisecond.

  /** Which `models.json` this is: a write replaces the file (new inode) or changes its time or size. */
  private catalogStamp(): string {
    const info = statSync(join(this.dir, CATALOG_FILE), { throwIfNoEntry: false })
    return info ? `${info.ino}:${info.mtimeMs}:${info.size}` : 'none'
  }

  private fileUnchanged(model: ModelRecord): boolean {
    if (model.remote) return true
    const info = statSync(model.path, { throwIfNoEntry: false })
    return info !== undefined && info.size === model.sizeBytes && Math.floor(info.mtimeMs / 1000) === model.created
  }

  /** A new scan, however young the last one. */
  scan(): Promise<FolderSnapshot> {
    return this.scanner.scan()
  }
}
