/**
 * One pull of files: a model file and perhaps its projector, from probe to catalog entry (a pull by
 * Ollama name is registry-pull-job.ts; both are a ManagedDownload). States go
 * queued → downloading → verifying → done, or end in failed / cancelled. Partial files live in
 * `<models>/.partial/` (the folder scan skips dot-folders); they are removed on failure and cancel,
 * and kept when the connection is lost, so pulling the same source again resumes.
 */
import { createHash } from 'node:crypto'
import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { addCatalogEntry, CatalogWriteError, readCatalogEntries } from '../catalog/catalog-writer.ts'
import { DownloadError } from './download-error.ts'
import { etaSeconds, RateMeter } from './download-progress.ts'
import type { ModelSource } from './hf-reference.ts'
import { formatBytes } from '../format-bytes.ts'
import { moveIntoPlace } from './place-file.ts'
import { probeRemoteFile, transferFile, type HttpAccess, type RemoteFileInfo, type RetryPolicy } from './remote-file.ts'

export type DownloadState = 'queued' | 'downloading' | 'verifying' | 'done' | 'failed' | 'cancelled'

export const PARTIAL_DIR = '.partial'

export interface DownloadFileSnapshot {
  /** A pull by name lists its blobs: the model's, the projector's, and the other layers (template, system, config). */
  role: 'model' | 'mmproj' | 'layer'
  source: string
  file: string
  bytes: number
  total: number | null
  /** Known from the hub before the download, or computed after it. */
  sha256: string | null
  /** The file was already in the folder (a projector shared with another quantisation). */
  reused: boolean
}

export interface DownloadSnapshot {
  id: string
  /** `file`: files from Hugging Face or a URL; `registry`: a model pulled by its Ollama name. */
  kind: 'file' | 'registry'
  /** The registry a pull by name comes from (`registry.ollama.ai`, `127.0.0.1:5000`); null for files. */
  registry: string | null
  modelId: string
  source: string
  /** The model's file name (for a pull by name, its manifest's path in the folder); bytes and total count the projector too. */
  file: string
  mmproj: string | null
  mmprojSource: string | null
  state: DownloadState
  bytes: number
  total: number | null
  rateBps: number
  etaSeconds: number | null
  error: string | null
  errorCode: string | null
  files: DownloadFileSnapshot[]
  createdAt: number
  finishedAt: number | null
}

/**
 * What the manager, the API and the command line need of a download, whatever it fetches: files
 * (DownloadJob) or a model by its Ollama name (RegistryPullJob).
 */
export interface ManagedDownload {
  readonly id: string
  readonly modelId: string
  /** Settles once what can be checked before the transfer is checked (or the job failed before that). */
  readonly prepared: Promise<void>
  /** Settles with the final snapshot; never rejects. */
  readonly finished: Promise<DownloadSnapshot>
  readonly currentState: DownloadState
  readonly failure: DownloadError | undefined
  /** The final paths this job will write, to keep two jobs off the same file. */
  readonly targetPaths: string[]
  /** Bytes still to be written, for the other jobs' disk-space check. */
  remainingBytes(): number
  /** The user stops it. */
  cancel(): void
  /** The process stops: what came stays for the next pull of the same source. */
  interrupt(): void
  /** Removes what a stopped job kept for resuming (`keepFiles`: another job resumes from it) and marks it cancelled. */
  discard(keepFiles?: boolean): Promise<void>
  subscribe(listener: (snapshot: DownloadSnapshot) => void): () => void
  snapshot(): DownloadSnapshot
}

export interface DownloadJobContext {
  modelsDir: string
  access: HttpAccess
  retry: RetryPolicy
  probeTimeoutMs: number
  freeBytes: (dir: string) => Promise<number>
  /** Bytes the other unfinished jobs still have to write. */
  reservedByOthers: () => number
  /** Waits for a download slot; resolves to its release. */
  acquireSlot: (signal: AbortSignal) => Promise<() => void>
}

export interface DownloadJobRequest {
  id: string
  modelId: string
  model: ModelSource
  mmproj: ModelSource | undefined
}

interface JobFile {
  role: 'model' | 'mmproj'
  param: 'source' | 'mmproj'
  source: ModelSource
  finalPath: string
  partialPath: string
  info: RemoteFileInfo | undefined
  resume: boolean
  bytes: number
  total: number | undefined
  sha256: string | undefined
  reused: boolean
}

const FINAL: ReadonlySet<DownloadState> = new Set(['done', 'failed', 'cancelled'])
export const PROGRESS_INTERVAL_MS = 250

export function isFinalState(state: DownloadState): boolean {
  return FINAL.has(state)
}

/** Why the job's signal fired: the user cancelled, or the process is stopping (keep partial files). */
const CANCELLED = Symbol('cancelled')
const INTERRUPTED = Symbol('interrupted')

export class DownloadJob implements ManagedDownload {
  readonly id: string
  readonly modelId: string
  readonly createdAt = Date.now()
  /** Settles once the sizes are known and the space is checked (or the job failed before that). */
  readonly prepared: Promise<void>
  /** Settles with the final snapshot; never rejects. */
  readonly finished: Promise<DownloadSnapshot>

  private state: DownloadState = 'queued'
  private error: DownloadError | undefined
  private finishedAt: number | undefined
  private readonly files: JobFile[]
  private readonly controller = new AbortController()
  private readonly meter = new RateMeter()
  private readonly listeners = new Set<(snapshot: DownloadSnapshot) => void>()
  private lastEmit = 0
  private downloadStartedAt: number | undefined
  private bytesAtStart = 0
  private markPrepared!: () => void

  constructor(
    request: DownloadJobRequest,
    private readonly ctx: DownloadJobContext,
  ) {
    this.id = request.id
    this.modelId = request.modelId
    const partialDir = join(ctx.modelsDir, PARTIAL_DIR)
    const file = (role: 'model' | 'mmproj', source: ModelSource): JobFile => ({
      role,
      param: role === 'model' ? 'source' : 'mmproj',
      source,
      finalPath: join(ctx.modelsDir, source.fileName),
      partialPath: join(partialDir, `${source.fileName}.${createHash('sha256').update(source.url).digest('hex').slice(0, 12)}.part`),
      info: undefined,
      resume: false,
      bytes: 0,
      total: undefined,
      sha256: undefined,
      reused: false,
    })
    this.files = [file('model', request.model), ...(request.mmproj ? [file('mmproj', request.mmproj)] : [])]
    this.prepared = new Promise((resolve) => (this.markPrepared = resolve))
    this.finished = this.run()
  }

  get currentState(): DownloadState {
    return this.state
  }

  get failure(): DownloadError | undefined {
    return this.error
  }

  /** The final paths this job will write, to keep two jobs off the same file. */
  get targetPaths(): string[] {
    return this.files.map((f) => f.finalPath)
  }

  remainingBytes(): number {
    if (isFinalState(this.state)) return 0
    return this.files.reduce((sum, f) => sum + (f.reused || f.total === undefined ? 0 : Math.max(0, f.total - f.bytes)), 0)
  }

  cancel(): void {
    if (!isFinalState(this.state)) this.controller.abort(CANCELLED)
  }

  /** Stops without discarding: the partial files stay for the next pull of the same source. */
  interrupt(): void {
    if (!isFinalState(this.state)) this.controller.abort(INTERRUPTED)
  }

  /**
   * Removes what a failed job kept for resuming, and marks it cancelled. `keepFiles` when a newer
   * job is resuming from the same partial files.
   */
  async discard(keepFiles = false): Promise<void> {
    if (this.state !== 'failed') return
    if (!keepFiles) await this.removePartials()
    this.state = 'cancelled'
    this.emit(true)
  }

  subscribe(listener: (snapshot: DownloadSnapshot) => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  snapshot(): DownloadSnapshot {
    const [model, mmproj] = this.files
    const totals = this.files.map((f) => f.total)
    const total = totals.every((t) => t !== undefined) ? totals.reduce((a, b) => a! + b!, 0)! : null
    const bytes = this.files.reduce((sum, f) => sum + f.bytes, 0)
    let rateBps = 0
    if (this.state === 'downloading') rateBps = this.meter.bytesPerSecond()
    else if (this.state === 'done' && this.downloadStartedAt !== undefined && this.finishedAt !== undefined) {
      const seconds = (this.finishedAt - this.downloadStartedAt) / 1000
      rateBps = seconds > 0 ? Math.round((bytes - this.bytesAtStart) / seconds) : 0
    }
    return {
      id: this.id,
      kind: 'file',
      registry: null,
      modelId: this.modelId,
      source: model!.source.source,
      file: model!.source.fileName,
      mmproj: mmproj?.source.fileName ?? null,
      mmprojSource: mmproj?.source.source ?? null,
      state: this.state,
      bytes,
      total,
      rateBps,
      etaSeconds: this.state === 'done' ? 0 : this.state === 'downloading' ? etaSeconds(bytes, total, rateBps) : null,
      error: this.error?.message ?? null,
      errorCode: this.error?.code ?? null,
      files: this.files.map((f) => ({
        role: f.role,
        source: f.source.source,
        file: f.source.fileName,
        bytes: f.bytes,
        total: f.total ?? null,
        sha256: f.sha256 ?? f.info?.sha256 ?? null,
        reused: f.reused,
      })),
      createdAt: this.createdAt,
      finishedAt: this.finishedAt ?? null,
    }
  }

  private async run(): Promise<DownloadSnapshot> {
    const signal = this.controller.signal
    try {
      await this.prepare(signal)
    } catch (e) {
      await this.fail(e)
      return this.snapshot()
    } finally {
      this.markPrepared()
    }
    try {
      const release = await this.ctx.acquireSlot(signal)
      try {
        await this.download(signal)
        this.setState('verifying')
        this.verify()
        await this.placeFiles()
      } finally {
        release()
      }
      this.finishedAt = Date.now()
      this.setState('done')
    } catch (e) {
      await this.fail(e)
    }
    return this.snapshot()
  }

  private async prepare(signal: AbortSignal): Promise<void> {
    // A catalog we could not write later is better refused now, before gigabytes arrive.
    try {
      await readCatalogEntries(this.ctx.modelsDir)
    } catch (e) {
      if (e instanceof CatalogWriteError) throw new DownloadError('invalid_value', e.message, null)
      throw e
    }
    await mkdir(join(this.ctx.modelsDir, PARTIAL_DIR), { recursive: true })
    for (const f of this.files) {
      f.info = await probeRemoteFile(f.source, f.param, this.ctx.access, signal, this.ctx.probeTimeoutMs)
      f.total = f.info.size
      const existing = await stat(f.finalPath).catch(() => undefined)
      if (existing) {
        if (f.role === 'mmproj' && existing.isFile() && f.info.size !== undefined && existing.size === f.info.size) {
          // The projector another quantisation of this model already brought.
          f.reused = true
          f.bytes = existing.size
          continue
        }
        throw new DownloadError('invalid_value', `The models folder already has a file named "${f.source.fileName}"`, f.param)
      }
      f.resume = await this.partialBelongsTo(f)
      if (!f.resume) await rm(f.partialPath, { force: true })
      f.bytes = f.resume ? (await stat(f.partialPath)).size : 0
      await writeFile(`${f.partialPath}.json`, JSON.stringify({ url: f.source.url, size: f.info.size, sha256: f.info.sha256, etag: f.info.etag }))
    }
    const needed = this.remainingBytes()
    const free = await this.ctx.freeBytes(this.ctx.modelsDir)
    const available = free - this.ctx.reservedByOthers()
    if (needed > available) {
      throw new DownloadError(
        'insufficient_storage',
        `Not enough disk space: the download needs ${formatBytes(needed)} (${needed} bytes) but only ${formatBytes(Math.max(0, available))} (${Math.max(0, available)} bytes) are free in ${this.ctx.modelsDir}`,
        'source',
      )
    }
    this.emit(true)
  }

  /** Resume only a partial file of the same remote file (same URL, and size/checksum that agree). */
  private async partialBelongsTo(f: JobFile): Promise<boolean> {
    const size = (await stat(f.partialPath).catch(() => undefined))?.size ?? 0
    if (size === 0) return false
    let meta: { url?: string; size?: number; sha256?: string; etag?: string }
    try {
      meta = JSON.parse(await readFile(`${f.partialPath}.json`, 'utf8'))
    } catch {
      return false
    }
    const agree = <T>(a: T | undefined, b: T | undefined) => a === undefined || b === undefined || a === b
    const info = f.info!
    if (meta.url !== f.source.url || !agree(meta.size, info.size) || !agree(meta.sha256, info.sha256)) return false
    if (!info.sha256 && !agree(meta.etag, info.etag)) return false
    return info.size === undefined || size <= info.size
  }

  private async download(signal: AbortSignal): Promise<void> {
    this.downloadStartedAt = Date.now()
    this.bytesAtStart = this.files.reduce((sum, f) => sum + f.bytes, 0)
    this.meter.record(this.bytesAtStart)
    this.setState('downloading')
    for (const f of this.files) {
      if (f.reused) continue
      const result = await transferFile({
        source: f.source,
        param: f.param,
        partialPath: f.partialPath,
        resume: f.resume,
        expected: f.info!,
        access: this.ctx.access,
        retry: this.ctx.retry,
        signal,
        onProgress: (bytes, total) => {
          f.bytes = bytes
          if (total !== undefined) f.total = total
          this.meter.record(this.files.reduce((sum, g) => sum + g.bytes, 0))
          this.emit(false)
        },
      })
      f.sha256 = result.sha256
      f.bytes = result.size
      f.total ??= result.size
    }
  }

  private verify(): void {
    for (const f of this.files) {
      if (f.reused) continue
      if (f.info?.size !== undefined && f.bytes !== f.info.size) {
        throw new DownloadError('size_mismatch', `${f.source.source}: got ${f.bytes} bytes, the server announced ${f.info.size}`, f.param)
      }
      if (f.info?.sha256 && f.sha256 !== f.info.sha256) {
        throw new DownloadError(
          'checksum_mismatch',
          `${f.source.source}: the sha256 of the downloaded file (${f.sha256}) is not the published ${f.info.sha256}; the file was deleted`,
          f.param,
        )
      }
    }
  }

  private async placeFiles(): Promise<void> {
    const placed: string[] = []
    try {
      for (const f of this.files) {
        if (f.reused) continue
        await moveIntoPlace(f.partialPath, f.finalPath, f.source.fileName, f.param)
        placed.push(f.finalPath)
        await rm(`${f.partialPath}.json`, { force: true })
      }
      const [model, mmproj] = this.files
      await addCatalogEntry(this.ctx.modelsDir, {
        id: this.modelId,
        file: model!.source.fileName,
        ...(mmproj ? { mmproj: mmproj.source.fileName } : {}),
        source: model!.source.source,
        ...(mmproj ? { mmproj_source: mmproj.source.source } : {}),
        ...(model!.sha256 ? { sha256: model!.sha256 } : {}),
      })
    } catch (e) {
      // Half a model is worse than none: take back what this job put in the folder.
      for (const path of placed) await rm(path, { force: true })
      throw e
    }
  }

  private async fail(e: unknown): Promise<void> {
    const reason = this.controller.signal.aborted ? this.controller.signal.reason : undefined
    this.finishedAt = Date.now()
    if (reason === CANCELLED) {
      await this.removePartials()
      this.setState('cancelled')
      return
    }
    if (reason === INTERRUPTED) {
      this.error = new DownloadError('network', 'The download was interrupted (the server stopped); pull the same source again to resume')
      this.setState('failed')
      return
    }
    this.error = asDownloadError(e)
    if (this.error.code === 'network') {
      const kept = this.files.reduce((sum, f) => sum + (f.reused ? 0 : f.bytes), 0)
      if (kept > 0)
        this.error = new DownloadError('network', `${this.error.message}; ${formatBytes(kept)} kept, pull the same source again to resume`, this.error.param)
    } else {
      await this.removePartials()
    }
    this.setState('failed')
  }

  private async removePartials(): Promise<void> {
    for (const f of this.files) {
      await rm(f.partialPath, { force: true }).catch(() => undefined)
      await rm(`${f.partialPath}.json`, { force: true }).catch(() => undefined)
    }
  }

  private setState(state: DownloadState): void {
    this.state = state
    if (state === 'downloading') this.meter.reset()
    this.emit(true)
  }

  private emit(force: boolean): void {
    const now = Date.now()
    if (!force && now - this.lastEmit < PROGRESS_INTERVAL_MS) return
    this.lastEmit = now
    const snapshot = this.snapshot()
    for (const listener of this.listeners) listener(snapshot)
  }
}

function asDownloadError(e: unknown): DownloadError {
  if (e instanceof DownloadError) return e
  if (e instanceof CatalogWriteError) return new DownloadError('disk_error', e.message)
  const error = e as NodeJS.ErrnoException
  if (error?.code === 'ENOSPC') return new DownloadError('insufficient_storage', 'The disk is full')
  if (error?.code) return new DownloadError('disk_error', `Cannot write in the models folder: ${error.message}`)
  return new DownloadError('network', (error as Error)?.message ?? String(e))
}
