/**
 * `ollama pull NAME` as Hearth does it: the manifest from the name's registry, what it says checked
 * before any weight is fetched (the config blob's format and architectures, then the model GGUF's
 * own header from its first bytes), every blob fetched in parallel ranges and resumably
 * (ollama-blob-download.ts), verified by sha256 before it is kept, and the manifest written last,
 * into Hearth's own store in Ollama's layout (`<models>/ollama`, models/sources/pulled-store.ts),
 * which the catalog serves under the name. A blob Ollama's own store already has (the same digest)
 * is hard-linked, or copied, from there and checked, never downloaded again; nothing is written in
 * Ollama's store.
 *
 * Progress comes as events in the order and with the statuses Ollama's own pull sends
 * (`pulling manifest`, `pulling <digest>` with total and completed, `verifying sha256 digest`,
 * `writing manifest`, `success`); `ollamaProgressLine` turns each into the line `/api/pull` streams.
 */
import { createHash, randomBytes } from 'node:crypto'
import { copyFile, link, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { llamaLoadProblem } from '../catalog/llama-loadability.ts'
import { readModelFileHeader, type ModelFileHeader } from '../catalog/model-file-header.ts'
import { defaultModelSources } from '../sources/default-source-dirs.ts'
import { ollamaManifestProblem } from '../sources/ollama-store.ts'
import { pulledOllamaDir } from '../sources/pulled-store.ts'
import { formatBytes } from '../format-bytes.ts'
import { freeDiskBytes } from './disk-space.ts'
import { DownloadError } from './download-error.ts'
import { RateMeter } from './download-progress.ts'
import { hfAlternative } from './hf-alternatives.ts'
import { BlobDownload, OLLAMA_PART_POLICY, sha256File, type PartPolicy } from './ollama-blob-download.ts'
import { parsePullName, type PullName } from './ollama-pull-name.ts'
import { blobPath, digestsOf, manifestPath, removeUnusedBlobs, writeManifest } from './ollama-pulled-store.ts'
import { OLLAMA_MEDIA, RegistryClient, type ManifestLayer } from './ollama-registry.ts'
import { DEFAULT_RETRY, type RetryPolicy } from './remote-file.ts'

export interface OllamaPullOptions {
  /** Hearth's models folder: the model goes into its `ollama/` store. */
  modelsDir: string
  /** Plain http to the registry, as `ollama pull --insecure`. */
  insecure?: boolean
  /** Stops the pull; what was fetched stays for the next pull of the same name. */
  signal?: AbortSignal
  /**
   * Ollama's own stores, whose blobs are linked (or copied) instead of downloaded where they have
   * the digest. Default: where the environment puts Ollama's store (`$OLLAMA_MODELS`, ~/.ollama/models).
   */
  ollamaStores?: readonly string[]
  /** Ollama's: 16 parts of 100 MB to 1,000 MB, all in flight. */
  parts?: Partial<PartPolicy>
  retry?: Partial<RetryPolicy>
  /** The first bytes of the model layer fetched for a look at its GGUF header (4 MiB, doubled up to 64 MiB when the header is longer). */
  headerProbeBytes?: number
  maxHeaderProbeBytes?: number
  freeBytes?: (dir: string) => Promise<number>
  fetch?: typeof fetch
  /** Told the blobs of the model (config included, each once) as soon as the manifest is read. */
  onManifest?: (layers: readonly ManifestLayer[]) => void
}

/** One step of a pull, as Ollama reports it (`status`), with what Hearth's Models page also shows. */
export type OllamaPullEvent =
  | { status: 'pulling manifest' }
  | {
      status: 'pulling'
      digest: string
      mediaType: string
      total: number
      completed: number
      /** Where a blob not downloaded came from: already in Hearth's store, or Ollama's. */
      reused?: 'hearth' | 'ollama'
      /** The whole pull: bytes on disk of every blob, their total, and the download rate. */
      pullCompleted: number
      pullTotal: number
      rateBps: number
    }
  | { status: 'verifying sha256 digest' }
  | { status: 'writing manifest' }
  | { status: 'removing unused layers' }
  | { status: 'success'; model: PulledOllamaModel }

export interface PulledOllamaModel {
  /** The name it is served under (`qwen3:0.6b`, `127.0.0.1:5000/library/tiny:1`). */
  name: string
  manifestPath: string
  /** Every blob's bytes, the config's included. */
  size: number
  /** Bytes downloaded by this pull (the rest was there already, or linked from Ollama's store). */
  downloaded: number
  /** Blobs linked or copied from Ollama's own store. */
  reusedFromOllama: string[]
}

/** A line of `/api/pull`'s stream, as Ollama's api.ProgressResponse writes it (zero fields left out). */
export interface OllamaProgressLine {
  status: string
  digest?: string
  total?: number
  completed?: number
}

/** The line Ollama sends for an event: `pulling <12 hex digits>` for a blob. */
export function ollamaProgressLine(event: OllamaPullEvent): OllamaProgressLine {
  if (event.status !== 'pulling') return { status: event.status }
  return {
    status: `pulling ${event.digest.slice(7, 19)}`,
    digest: event.digest,
    ...(event.total ? { total: event.total } : {}),
    ...(event.completed ? { completed: event.completed } : {}),
  }
}

/**
 * The pull as `/api/pull` streams it: one JSON line per event (`application/x-ndjson`), and an
 * `{"error": …}` line last where it fails, as Ollama ends a failed stream.
 */
export async function* ollamaProgressNdjson(events: AsyncIterable<OllamaPullEvent>): AsyncGenerator<string> {
  try {
    for await (const event of events) yield `${JSON.stringify(ollamaProgressLine(event))}\n`
  } catch (e) {
    yield `${JSON.stringify({ error: (e as Error).message ?? String(e) })}\n`
  }
}

const MAX_CONFIG_BYTES = 4 * 1024 * 1024
const PROGRESS_INTERVAL_MS = 100

/**
 * Pulls a model by its Ollama name into Hearth's store, yielding its progress; returns the model
 * (also in the `success` event). Throws DownloadError: `invalid_value` for a bad name or a model
 * llama.cpp cannot load (with what to pull instead), `not_found` for a name the registry lacks
 * ("file does not exist"), `checksum_mismatch` for a blob that is not its digest (not kept),
 * `network` when the registry cannot be reached or the transfer broke (pull again to resume),
 * `insufficient_storage`, `cancelled`. The download goes on while the events wait to be read:
 * progress events the reader was too slow for are merged, never queued without end.
 */
export function pullOllamaModel(name: string | PullName, options: OllamaPullOptions): AsyncGenerator<OllamaPullEvent, PulledOllamaModel> {
  const queue: OllamaPullEvent[] = []
  let wake: (() => void) | undefined
  let outcome: { model: PulledOllamaModel } | { error: unknown } | undefined
  const emit = (event: OllamaPullEvent) => {
    const last = queue[queue.length - 1]
    // A slow reader gets the latest progress of a blob, not every step of it.
    if (event.status === 'pulling' && last?.status === 'pulling' && last.digest === event.digest) queue[queue.length - 1] = event
    else queue.push(event)
    wake?.()
  }
  // A reader that stops reading (a client gone, a `break`) stops the pull too; what came is kept.
  const abandoned = new AbortController()
  const signal = options.signal ? AbortSignal.any([options.signal, abandoned.signal]) : abandoned.signal
  const run = new OllamaPull(name, { ...options, signal }, emit).run().then(
    (model) => void (outcome = { model }),
    (error: unknown) => void (outcome = { error }),
  )
  void run.then(() => wake?.())
  return (async function* () {
    try {
      while (true) {
        if (queue.length > 0) {
          yield queue.shift()!
          continue
        }
        if (outcome) {
          if ('error' in outcome) throw outcome.error
          return outcome.model
        }
        await new Promise<void>((resolve) => (wake = resolve))
        wake = undefined
      }
    } finally {
      if (!outcome) {
        abandoned.abort()
        await run
      }
    }
  })()
}

/** Blobs being fetched in this process, by path: a second pull of one waits for the first. */
const inFlight = new Map<string, Promise<unknown>>()

interface LayerPlan {
  layer: ManifestLayer
  path: string
  state: 'present' | 'download'
  completed: number
  reused?: 'hearth' | 'ollama'
  download?: BlobDownload
  /** Its turn has come: progress is reported from then on, in the manifest's order, as Ollama does. */
  shown?: boolean
}

class OllamaPull {
  private readonly signal: AbortSignal
  private readonly store: string
  private readonly parts: PartPolicy
  private readonly retry: RetryPolicy
  private readonly meter = new RateMeter()
  private lastEmit = new Map<string, number>()
  /** Progress held back by the interval, shown once it is over: the last step before a stall is seen too. */
  private trailing = new Map<string, NodeJS.Timeout>()
  private plans: LayerPlan[] = []
  private downloaded = 0
  private readonly reusedFromOllama: string[] = []

  constructor(
    private readonly nameText: string | PullName,
    private readonly options: OllamaPullOptions,
    private readonly emit: (event: OllamaPullEvent) => void,
  ) {
    this.signal = options.signal ?? new AbortController().signal
    this.store = pulledOllamaDir(options.modelsDir)
    this.parts = { ...OLLAMA_PART_POLICY, ...options.parts }
    this.retry = { ...DEFAULT_RETRY, ...options.retry }
  }

  async run(): Promise<PulledOllamaModel> {
    try {
      return await this.pull()
    } catch (e) {
      // What arrived stays for the next pull; a partial file with nothing in it is no use to it.
      for (const plan of this.plans) await (plan.download?.completed === 0 ? plan.download.discard() : plan.download?.close())
      if (this.signal.aborted)
        throw new DownloadError('cancelled', `the pull was cancelled; what was fetched is kept, pull the same name again to resume`, 'model')
      throw e
    } finally {
      for (const timer of this.trailing.values()) clearTimeout(timer)
      this.trailing.clear()
    }
  }

  private async pull(): Promise<PulledOllamaModel> {
    const parsed = typeof this.nameText === 'string' ? parsePullName(this.nameText) : this.nameText
    if (parsed.kind !== 'registry') {
      const text = parsed.kind === 'huggingface' ? parsed.name : parsed.reference
      throw new DownloadError('invalid_value', `"${text}" is not a name in an Ollama registry: pull it as a Hugging Face model instead`, 'model')
    }
    const { name, shortName } = parsed
    const client = new RegistryClient(parsed, { insecure: this.options.insecure, ...(this.options.fetch ? { fetch: this.options.fetch } : {}) })

    this.emit({ status: 'pulling manifest' })
    const { manifest, bytes: manifestBytes } = await client.manifest(this.signal)
    const config = manifest.config ? await this.configOf(client, manifest.config) : undefined
    const refuse = (why: string) => new DownloadError('invalid_value', `${shortName} ${why}; ${hfAlternative(name.model, name.tag)}`, 'model')
    const problem = ollamaManifestProblem(manifest.layers, config?.json)
    if (problem) throw refuse(problem)

    await mkdir(join(this.store, 'blobs'), { recursive: true })
    const layers = [...manifest.layers, ...(manifest.config ? [manifest.config] : [])]
    const unique = layers.filter((l, i) => layers.findIndex((o) => o.digest === l.digest) === i)
    this.options.onManifest?.(unique)
    const release = await this.lockBlobs(unique.map((l) => blobPath(this.store, l.digest)))
    try {
      this.plans = []
      for (const layer of unique) this.plans.push(await this.plan(layer, config))
      await this.checkSpace()
      const modelPlan = this.plans.find((p) => p.layer.mediaType === `${OLLAMA_MEDIA}model`)
      let header: ModelFileHeader | undefined
      if (modelPlan) {
        header = modelPlan.state === 'present' ? await readModelFileHeader(modelPlan.path).catch(() => undefined) : await this.probeHeader(client, modelPlan)
        const loadProblem = header?.format === 'gguf' ? llamaLoadProblem(header) : undefined
        if (loadProblem) {
          // Refused before its weights came: nothing of this pull is kept.
          for (const plan of this.plans) await plan.download?.discard()
          throw refuse(`is a GGUF that ${loadProblem}`)
        }
      }

      this.meter.record(this.pullCompleted())
      for (const plan of this.plans) {
        plan.shown = true
        this.progress(plan, true)
        if (plan.state === 'present') continue
        await this.fetchBlob(client, plan)
      }

      this.emit({ status: 'verifying sha256 digest' })
      for (const plan of this.plans) {
        if (plan.state !== 'download') continue
        await plan.download!.verifyAndKeep()
        plan.state = 'present'
      }
      if (modelPlan && header?.format !== 'gguf') {
        // The header did not fit in the first bytes: it is read now, before the model is offered.
        const full = await readModelFileHeader(modelPlan.path).catch((e: Error) => e)
        const loadProblem =
          full instanceof Error ? `cannot be read as a model (${full.message})` : full.format === 'gguf' ? llamaLoadProblem(full) : 'is not a GGUF'
        if (loadProblem) {
          await removeUnusedBlobs(
            this.store,
            unique.map((l) => l.digest),
          )
          throw refuse(`is a file that ${loadProblem}`)
        }
      }

      this.emit({ status: 'writing manifest' })
      const previous = await digestsOf(manifestPath(this.store, name))
      const path = await writeManifest(this.store, name, manifestBytes)
      const stale = previous.filter((d) => !unique.some((l) => l.digest === d))
      if (stale.length > 0) {
        this.emit({ status: 'removing unused layers' })
        await removeUnusedBlobs(this.store, stale)
      }
      const model: PulledOllamaModel = {
        name: shortName,
        manifestPath: path,
        size: unique.reduce((sum, l) => sum + l.size, 0),
        downloaded: this.downloaded,
        reusedFromOllama: this.reusedFromOllama,
      }
      this.emit({ status: 'success', model })
      return model
    } finally {
      release()
    }
  }

  /** The config blob, fetched first (a few hundred bytes) for what it says of the model; checked against its digest. */
  private async configOf(client: RegistryClient, layer: ManifestLayer): Promise<{ bytes: Buffer; json: Record<string, unknown> | undefined }> {
    let bytes: Buffer | undefined
    for (const path of [blobPath(this.store, layer.digest), ...this.ollamaStores().map((s) => blobPath(s, layer.digest))]) {
      bytes = await readFile(path).catch(() => undefined)
      if (bytes && bytes.length === layer.size && `sha256:${sha256(bytes)}` === layer.digest) break
      bytes = undefined
    }
    bytes ??= await client.smallBlob(layer, MAX_CONFIG_BYTES, this.signal)
    if (`sha256:${sha256(bytes)}` !== layer.digest) {
      throw new DownloadError(
        'checksum_mismatch',
        `digest mismatch, file must be downloaded again: blob ${layer.digest} (the config) arrived with the sha256 ${sha256(bytes)}; it was not kept`,
        'model',
      )
    }
    let json: Record<string, unknown> | undefined
    try {
      const value = JSON.parse(bytes.toString('utf8')) as unknown
      if (typeof value === 'object' && value !== null && !Array.isArray(value)) json = value as Record<string, unknown>
    } catch {
      // A config that is not JSON says nothing; the GGUF's header decides.
    }
    return { bytes, json }
  }

  /** Whether a blob is here already, can come from Ollama's store, or must be downloaded. */
  private async plan(layer: ManifestLayer, config: { bytes: Buffer } | undefined): Promise<LayerPlan> {
    const path = blobPath(this.store, layer.digest)
    const plan: LayerPlan = { layer, path, state: 'present', completed: layer.size }
    const here = await stat(path).catch(() => undefined)
    if (here?.isFile() && here.size === layer.size) {
      plan.reused = 'hearth'
      return plan
    }
    if (config && layer.digest === this.configDigest(config)) {
      await this.writeVerified(path, config.bytes)
      return plan
    }
    for (const store of this.ollamaStores()) {
      if (await this.linkFromOllama(blobPath(store, layer.digest), path, layer)) {
        plan.reused = 'ollama'
        this.reusedFromOllama.push(layer.digest)
        return plan
      }
    }
    plan.state = 'download'
    plan.download = new BlobDownload({
      blobsDir: join(this.store, 'blobs'),
      digest: layer.digest,
      size: layer.size,
      url: '',
      headers: {},
      parts: this.parts,
      retry: this.retry,
      signal: this.signal,
      ...(this.options.fetch ? { fetch: this.options.fetch } : {}),
      onProgress: (completed) => {
        plan.completed = completed
        this.meter.record(this.pullCompleted())
        this.progress(plan, false)
      },
    })
    await plan.download.prepare()
    return plan
  }

  private configDigest(config: { bytes: Buffer }): string {
    return `sha256:${sha256(config.bytes)}`
  }

  /**
   * Ollama's copy of a blob, hard-linked (or copied, across disks) under a temporary name, checked
   * against its digest, then put in place. Ollama's file is only read; a copy that does not match
   * is removed (ours), and the blob is downloaded instead.
   */
  private async linkFromOllama(theirs: string, ours: string, layer: ManifestLayer): Promise<boolean> {
    const info = await stat(theirs).catch(() => undefined)
    if (!info?.isFile() || info.size !== layer.size) return false
    const temporary = `${ours}-from-ollama-${randomBytes(4).toString('hex')}`
    try {
      await link(theirs, temporary).catch(async () => copyFile(theirs, temporary))
      if (`sha256:${await sha256File(temporary)}` !== layer.digest) {
        await rm(temporary, { force: true })
        return false
      }
      await rename(temporary, ours)
      return true
    } catch {
      await rm(temporary, { force: true })
      return false
    }
  }

  private async writeVerified(path: string, bytes: Buffer): Promise<void> {
    const temporary = `${path}-${randomBytes(4).toString('hex')}.tmp`
    await writeFile(temporary, bytes)
    await rename(temporary, path)
  }

  /** Room on the disk for what is still to be downloaded, before a byte of it comes. */
  private async checkSpace(): Promise<void> {
    const needed = this.plans.reduce((sum, p) => sum + (p.state === 'download' ? p.layer.size - p.completed : 0), 0)
    if (needed === 0) return
    const free = await (this.options.freeBytes ?? freeDiskBytes)(this.store)
    if (needed > free) {
      throw new DownloadError(
        'insufficient_storage',
        `Not enough disk space: the pull needs ${formatBytes(needed)} (${needed} bytes) but only ${formatBytes(Math.max(0, free))} (${Math.max(0, free)} bytes) are free in ${this.store}`,
        'model',
      )
    }
  }

  /**
   * The GGUF header from the model layer's first bytes (fetched into its partial file, so they are
   * not fetched again), read before the rest of the download: a file llama.cpp cannot load is
   * refused at once. Undefined where the header is longer than the bytes looked at.
   */
  private async probeHeader(client: RegistryClient, plan: LayerPlan): Promise<ModelFileHeader | undefined> {
    const download = plan.download!
    const max = Math.min(plan.layer.size, this.options.maxHeaderProbeBytes ?? 64 * 1024 * 1024)
    let length = Math.min(max, this.options.headerProbeBytes ?? 4 * 1024 * 1024)
    const scratch = `${download.partialPath}-header`
    let head: Buffer = Buffer.alloc(0)
    try {
      while (true) {
        const kept = await download.readHead(length)
        if (kept) head = kept
        else {
          // Only what the last look lacked is fetched.
          const more = await this.fetchRange(client, plan.layer, head.length, length)
          if (!more) return undefined
          head = Buffer.concat([head, more])
          await download.writeHead(head)
        }
        await writeFile(scratch, head)
        const header = await readModelFileHeader(scratch).catch(() => undefined)
        if (header && (header.format !== 'gguf' || header.tensorsByPrefix !== undefined)) return header
        if (length >= max) return undefined
        length = Math.min(max, length * 2)
      }
    } finally {
      await rm(scratch, { force: true })
    }
  }

  /** Bytes `from` to `to` (exclusive) of a blob. */
  private async fetchRange(client: RegistryClient, layer: ManifestLayer, from: number, to: number): Promise<Buffer | undefined> {
    const length = to - from
    const { url, headers } = await client.blobLocation(layer.digest, this.signal)
    const fetcher = this.options.fetch ?? fetch
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await fetcher(url, {
          headers: { ...headers, 'accept-encoding': 'identity', range: `bytes=${from}-${to - 1}` },
          redirect: 'follow',
          signal: this.signal,
        })
        if (res.status === 200 && from > 0) {
          // No ranges here: the look at the header waits for the whole blob.
          await res.body?.cancel()
          return undefined
        }
        if (res.status !== 206 && res.status !== 200) {
          await res.body?.cancel()
          throw new DownloadError('network', `blob ${layer.digest}: the server answered ${res.status}`, 'model')
        }
        // A server that ignores the range sends the whole blob: only its first bytes are read.
        const chunks: Buffer[] = []
        let size = 0
        const reader = res.body!.getReader()
        try {
          while (size < length) {
            const { done, value } = await reader.read()
            if (done) break
            chunks.push(Buffer.from(value))
            size += value.length
          }
        } finally {
          await reader.cancel().catch(() => undefined)
        }
        return Buffer.concat(chunks).subarray(0, length)
      } catch (e) {
        if (this.signal.aborted) throw this.signal.reason ?? e
        if (attempt >= this.retry.attempts)
          throw e instanceof DownloadError ? e : new DownloadError('network', `blob ${layer.digest}: ${(e as Error).message}`, 'model')
        await new Promise((r) => setTimeout(r, Math.min(30_000, this.retry.baseDelayMs * 2 ** attempt)))
      }
    }
  }

  private async fetchBlob(client: RegistryClient, plan: LayerPlan): Promise<void> {
    const download = plan.download!
    const before = download.completed
    const { url, headers } = await client.blobLocation(plan.layer.digest, this.signal)
    download.relocate(url, headers)
    await download.run()
    this.downloaded += download.completed - before
    plan.completed = download.completed
    this.progress(plan, true)
  }

  private progress(plan: LayerPlan, force: boolean): void {
    if (!plan.shown) return
    const digest = plan.layer.digest
    const wait = PROGRESS_INTERVAL_MS - (Date.now() - (this.lastEmit.get(digest) ?? 0))
    if (!force && wait > 0) {
      if (!this.trailing.has(digest))
        this.trailing.set(
          digest,
          setTimeout(() => this.progress(plan, true), wait),
        )
      return
    }
    clearTimeout(this.trailing.get(digest))
    this.trailing.delete(digest)
    this.lastEmit.set(digest, Date.now())
    this.emit({
      status: 'pulling',
      digest: plan.layer.digest,
      mediaType: plan.layer.mediaType,
      total: plan.layer.size,
      completed: plan.completed,
      ...(plan.reused ? { reused: plan.reused } : {}),
      pullCompleted: this.pullCompleted(),
      pullTotal: this.plans.reduce((sum, p) => sum + p.layer.size, 0),
      rateBps: this.meter.bytesPerSecond(),
    })
  }

  private pullCompleted(): number {
    return this.plans.reduce((sum, p) => sum + p.completed, 0)
  }

  private ollamaStores(): string[] {
    const stores = this.options.ollamaStores ?? defaultModelSources().ollama ?? []
    return stores.map((s) => resolve(s)).filter((s) => s !== resolve(this.store))
  }

  /** Waits while another pull in this process fetches one of these blobs; resolves to the release. */
  private async lockBlobs(paths: string[]): Promise<() => void> {
    while (true) {
      const busy = paths.map((p) => inFlight.get(p)).filter((p) => p !== undefined)
      if (busy.length === 0) break
      await Promise.allSettled(busy)
    }
    let done!: () => void
    const held = new Promise<void>((resolve) => (done = resolve))
    for (const p of paths) inFlight.set(p, held)
    return () => {
      for (const p of paths) if (inFlight.get(p) === held) inFlight.delete(p)
      done()
    }
  }
}

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex')
}
