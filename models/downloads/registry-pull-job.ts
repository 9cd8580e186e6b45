/**
 * A pull by Ollama name (`qwen3:0.6b`, `host:port/namespace/model:tag`) as one of the download
 * manager's jobs, beside the file downloads (download-job.ts): the registry client
 * (ollama-pull.ts) does the pulling; this job turns its events into the snapshots the API, its
 * event stream and the Models page show. States go queued (waiting for a download slot) →
 * downloading (the manifest, then each blob) → verifying → done, or end in failed / cancelled.
 *
 * What came stays when the job stops, cancelled or interrupted alike: the blobs' partial files in
 * `<models>/ollama/blobs`, from which the next pull of the name goes on (a registry pull is
 * Ollama's, where Ctrl-C keeps what came). Cancelling the job again, once it has stopped, discards
 * what it kept, as cancelling a failed file download discards its partial file.
 */
import { readdir, rm } from 'node:fs/promises'
import { join, relative } from 'node:path'
import { OLLAMA_DEFAULT_HOST } from '../sources/ollama-names.ts'
import { pulledOllamaDir } from '../sources/pulled-store.ts'
import { formatBytes } from '../format-bytes.ts'
import { DownloadError } from './download-error.ts'
import { etaSeconds } from './download-progress.ts'
import { DownloadLifecycle, isFinalState, type DownloadFileSnapshot, type DownloadSnapshot } from './managed-download.ts'
import { blobFileName } from './ollama-blob-download.ts'
import { pullOllamaModel, type OllamaPullEvent, type OllamaPullOptions } from './ollama-pull.ts'
import type { PullName } from './ollama-pull-name.ts'
import { blobPath, manifestPath, removeUnusedBlobs } from './ollama-pulled-store.ts'
import { OLLAMA_MEDIA, type ManifestLayer } from './ollama-registry.ts'

export type RegistryName = Extract<PullName, { kind: 'registry' }>

/** What the registry client may be given beyond the folder, the name and the signal (tests: smaller parts, no Ollama store). */
export type RegistryPullOptions = Omit<OllamaPullOptions, 'modelsDir' | 'insecure' | 'signal' | 'freeBytes' | 'onManifest'>

export interface RegistryPullJobContext {
  modelsDir: string
  /** Plain http to the registry, as `ollama pull --insecure`. */
  insecure: boolean
  freeBytes: (dir: string) => Promise<number>
  /** Bytes the other unfinished jobs still have to write. */
  reservedByOthers: () => number
  /** Waits for a download slot; resolves to its release. */
  acquireSlot: (signal: AbortSignal) => Promise<() => void>
  pullOptions?: RegistryPullOptions
}

interface Blob {
  layer: ManifestLayer
  completed: number
  reused: boolean
}

export class RegistryPullJob extends DownloadLifecycle {
  readonly id: string
  /** The name it is served under once pulled (`qwen3:0.6b`). */
  readonly modelId: string
  readonly finished: Promise<DownloadSnapshot>

  private readonly store: string
  private readonly manifest: string
  private blobs: Blob[] = []
  private bytes = 0
  private total: number | null = null
  /** Bytes this pull fetched, for the average rate once done. */
  private downloaded = 0
  /** What a stopped job left in partial files; discard removes it. */
  private keeps = false

  constructor(
    id: string,
    private readonly name: RegistryName,
    private readonly ctx: RegistryPullJobContext,
  ) {
    super()
    this.id = id
    this.modelId = name.shortName
    this.store = pulledOllamaDir(ctx.modelsDir)
    this.manifest = manifestPath(this.store, name.name)
    this.finished = this.run()
  }

  /** The manifest, and each blob once the manifest named them. */
  get targetPaths(): string[] {
    return [this.manifest, ...this.blobs.map((b) => blobPath(this.store, b.layer.digest))]
  }

  remainingBytes(): number {
    if (isFinalState(this.state) || this.total === null) return 0
    return Math.max(0, this.total - this.bytes)
  }

  /**
   * Removes what a stopped pull kept: its blobs' partial files, and blobs of it no manifest names
   * (the config, written first; blobs verified before the stop). Blobs another model uses stay.
   */
  async discard(keepFiles = false): Promise<void> {
    if (!this.keeps || (this.state !== 'failed' && this.state !== 'cancelled')) return
    if (!keepFiles) {
      const digests = this.blobs.map((b) => b.layer.digest)
      const prefixes = digests.map((d) => `${blobFileName(d)}-partial`)
      const blobsDir = join(this.store, 'blobs')
      for (const file of await readdir(blobsDir).catch(() => [] as string[])) {
        if (prefixes.some((p) => file.startsWith(p))) await rm(join(blobsDir, file), { force: true }).catch(() => undefined)
      }
      await removeUnusedBlobs(this.store, digests).catch(() => undefined)
    }
    this.keeps = false
    this.error = undefined
    this.state = 'cancelled'
    this.emit(true)
  }

  /** A newer pull of the name goes on from what this one kept, which is then no longer this one's to discard. */
  handOver(): void {
    if (!this.keeps || !isFinalState(this.state)) return
    this.keeps = false
    if (this.state === 'cancelled') this.error = undefined
    this.emit(true)
  }

  snapshot(): DownloadSnapshot {
    let rateBps = 0
    if (this.state === 'downloading') rateBps = this.meter.bytesPerSecond()
    else if (this.state === 'done' && this.downloadStartedAt !== undefined && this.finishedAt !== undefined) {
      const seconds = (this.finishedAt - this.downloadStartedAt) / 1000
      rateBps = seconds > 0 ? Math.round(this.downloaded / seconds) : 0
    }
    return {
      id: this.id,
      kind: 'registry',
      registry: this.name.name.host,
      modelId: this.modelId,
      source: this.name.shortName,
      file: relative(this.ctx.modelsDir, this.manifest),
      mmproj: null,
      mmprojSource: null,
      state: this.state,
      bytes: this.bytes,
      total: this.total,
      rateBps,
      etaSeconds: this.state === 'done' ? 0 : this.state === 'downloading' ? etaSeconds(this.bytes, this.total, rateBps) : null,
      error: this.error?.message ?? null,
      errorCode: this.error?.code ?? null,
      files: this.blobs.map((b): DownloadFileSnapshot => ({
        role: roleOf(b.layer.mediaType),
        source: b.layer.digest,
        file: relative(this.ctx.modelsDir, blobPath(this.store, b.layer.digest)),
        bytes: b.completed,
        total: b.layer.size,
        sha256: b.layer.digest.slice('sha256:'.length),
        reused: b.reused,
      })),
      createdAt: this.createdAt,
      finishedAt: this.finishedAt ?? null,
    }
  }

  private async run(): Promise<DownloadSnapshot> {
    const signal = this.controller.signal
    try {
      const slot = this.ctx.acquireSlot(signal)
      // Behind other downloads, the pull's checks wait for its turn: the request is answered now.
      const atOnce = await Promise.race([slot.then(() => true), new Promise<boolean>((r) => setImmediate(() => r(false)))])
      if (!atOnce) this.markPrepared()
      const release = await slot
      try {
        await this.pull(signal)
      } finally {
        release()
      }
      this.finishedAt = Date.now()
      this.setState('done')
    } catch (e) {
      this.fail(e)
    } finally {
      this.markPrepared()
    }
    return this.snapshot()
  }

  private async pull(signal: AbortSignal): Promise<void> {
    const events = pullOllamaModel(this.name, {
      ...this.ctx.pullOptions,
      modelsDir: this.ctx.modelsDir,
      insecure: this.ctx.insecure,
      signal,
      // Room is what the disk has less what the other downloads will still write.
      freeBytes: async (dir) => (await this.ctx.freeBytes(dir)) - this.ctx.reservedByOthers(),
      onManifest: (layers) => {
        this.blobs = layers.map((layer) => ({ layer, completed: 0, reused: false }))
        this.total = layers.reduce((sum, l) => sum + l.size, 0)
      },
    })
    for await (const event of events) this.onEvent(event)
  }

  private onEvent(event: OllamaPullEvent): void {
    switch (event.status) {
      case 'pulling manifest':
        this.downloadStartedAt = Date.now()
        this.setState('downloading')
        return
      case 'pulling': {
        // The first blob's turn: the manifest, the config and the model's header passed their checks.
        this.markPrepared()
        const blob = this.blobs.find((b) => b.layer.digest === event.digest)
        if (blob) {
          blob.completed = event.completed
          blob.reused = event.reused !== undefined
        }
        this.bytes = event.pullCompleted
        this.total = event.pullTotal
        this.meter.record(event.pullCompleted)
        this.emit(event.completed === event.total)
        return
      }
      case 'verifying sha256 digest':
        this.setState('verifying')
        return
      case 'success':
        this.downloaded = event.model.downloaded
        this.bytes = this.total ?? event.model.size
        for (const blob of this.blobs) blob.completed = blob.layer.size
        return
      default:
        this.emit(true)
    }
  }

  private fail(e: unknown): void {
    const reason = this.stopReason()
    this.finishedAt = Date.now()
    const partial = this.blobs.reduce((sum, b) => sum + (b.completed < b.layer.size ? b.completed : 0), 0)
    this.keeps = partial > 0 || this.blobs.length > 0
    if (reason === 'cancelled') {
      this.error =
        partial > 0
          ? new DownloadError(
              'cancelled',
              `Cancelled; ${formatBytes(partial)} kept: pull ${this.name.shortName} again to resume, or cancel it again to discard what came`,
            )
          : undefined
      this.setState('cancelled')
      return
    }
    if (reason === 'interrupted') {
      this.error = new DownloadError('network', `The pull was interrupted (the server stopped); pull ${this.name.shortName} again to resume`)
      this.setState('failed')
      return
    }
    this.error = asSourceError(e)
    if (this.error.code === 'network' && this.blobs.length === 0 && !this.ctx.insecure && this.name.name.host !== OLLAMA_DEFAULT_HOST) {
      // A registry on this network often speaks plain http, which is never tried unasked.
      this.error = new DownloadError('network', `${this.error.message}; if ${this.name.name.host} serves plain http, pull with insecure`, this.error.param)
    }
    this.setState('failed')
  }
}

function roleOf(mediaType: string): DownloadFileSnapshot['role'] {
  if (mediaType === `${OLLAMA_MEDIA}model`) return 'model'
  if (mediaType === `${OLLAMA_MEDIA}projector`) return 'mmproj'
  return 'layer'
}

/**
 * The registry client's error in this API's terms: the name came in `source` (Ollama's API calls
 * it `model`), and a name the registry lacks is a source it cannot give, as a file the hub lacks is.
 */
function asSourceError(e: unknown): DownloadError {
  if (!(e instanceof DownloadError)) {
    const error = e as NodeJS.ErrnoException
    if (error?.code === 'ENOSPC') return new DownloadError('insufficient_storage', 'The disk is full', 'source')
    if (error?.code) return new DownloadError('disk_error', `Cannot write in the models folder: ${error.message}`)
    return new DownloadError('network', error?.message ?? String(e))
  }
  const param = e.param === 'model' ? 'source' : e.param
  const code = e.code === 'not_found' ? 'source_unavailable' : e.code
  return code === e.code && param === e.param ? e : new DownloadError(code, e.message, param)
}
