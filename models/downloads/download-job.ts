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
import { etaSeconds } from './download-progress.ts'
import type { ModelSource } from './hf-reference.ts'
import { formatBytes } from '../format-bytes.ts'
import { moveIntoPlace } from './place-file.ts'
import { DownloadLifecycle, isFinalState, type DownloadSnapshot } from './managed-download.ts'
import { probeRemoteFile, transferFile, type HttpAccess, type RemoteFileInfo, type RetryPolicy } from './remote-file.ts'

export const PARTIAL_DIR = '.partial'

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

/** `prepared` settles once the sizes are known and the space is checked (or the job failed before that). */
export class DownloadJob extends DownloadLifecycle {
  readonly id: string
  readonly modelId: string
  readonly finished: Promise<DownloadSnapshot>

  private readonly files: JobFile[]
  private bytesAtStart = 0

  constructor(
    request: DownloadJobRequest,
    private readonly ctx: DownloadJobContext,
  ) {
    super()
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
    this.finished = this.run()
  }

  /** The final paths this job will write, to keep two jobs off the same file. */
  get targetPaths(): string[] {
    return this.files.map((f) => f.finalPath)
  }

  remainingBytes(): number {
    if (isFinalState(this.state)) return 0
    return this.files.reduce((sum, f) => sum + (f.reused || f.total === undefined ? 0 : Math.max(0, f.total - f.bytes)), 0)
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
    const reason = this.stopReason()
    this.finishedAt = Date.now()
    if (reason === 'cancelled') {
      await this.removePartials()
      this.setState('cancelled')
      return
    }
    if (reason === 'interrupted') {
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
}

function asDownloadError(e: unknown): DownloadError {
  if (e instanceof DownloadError) return e
  if (e instanceof CatalogWriteError) return new DownloadError('disk_error', e.message)
  const error = e as NodeJS.ErrnoException
  if (error?.code === 'ENOSPC') return new DownloadError('insufficient_storage', 'The disk is full')
  if (error?.code) return new DownloadError('disk_error', `Cannot write in the models folder: ${error.message}`)
  return new DownloadError('network', (error as Error)?.message ?? String(e))
}
