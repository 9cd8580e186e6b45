/**
 * The downloads of one models folder: checks a pull before it starts (references, id and file names
 * free), runs a few at a time, and remembers recent ones for the API and the command line. A source
 * is files from Hugging Face or a URL (DownloadJob), or a model's Ollama name (RegistryPullJob).
 */
import { randomBytes } from 'node:crypto'
import { stat } from 'node:fs/promises'
import { join } from 'node:path'
import type { ModelFolder } from '../catalog/model-folder.ts'
import { freeDiskBytes } from './disk-space.ts'
import { DownloadError } from './download-error.ts'
import { DownloadJob } from './download-job.ts'
import { isFinalState, type DownloadSnapshot, type ManagedDownload } from './managed-download.ts'
import { hubEndpointFromEnv, parseModelSource } from './hf-reference.ts'
import { fileStem, validateModelId } from './model-names.ts'
import { parsePullName } from './ollama-pull-name.ts'
import { RegistryPullJob, type RegistryName, type RegistryPullOptions } from './registry-pull-job.ts'
import { DEFAULT_RETRY, type RetryPolicy } from './remote-file.ts'

export interface PullRequest {
  /** `hf://owner/repo/file.gguf`, an https URL, or an Ollama name (`qwen3:0.6b`, `host:port/namespace/model:tag`). */
  source: string
  mmproj?: string
  id?: string
  /** Plain http to the registry a name carries, as `ollama pull --insecure`. */
  insecure?: boolean
}

export interface DownloadManagerOptions {
  folder: ModelFolder
  /** The hub's base URL; defaults to HEARTH_HF_ENDPOINT, else https://huggingface.co. */
  hubEndpoint?: string
  /** For gated repositories; defaults to HF_TOKEN. */
  hubToken?: string
  /** Free bytes on the disk that holds `dir`; injectable for tests. */
  freeBytes?: (dir: string) => Promise<number>
  maxConcurrent?: number
  retry?: Partial<RetryPolicy>
  probeTimeoutMs?: number
  /** Finished downloads kept for GET /api/downloads. */
  historyLimit?: number
  /** For pulls by name: Ollama's stores to link blobs from, part sizes, retries (tests). */
  registry?: RegistryPullOptions
}

export class DownloadManager {
  readonly hubEndpoint: string
  private readonly jobs = new Map<string, ManagedDownload>()
  private readonly slots: Slots
  private readonly retry: RetryPolicy

  constructor(private readonly options: DownloadManagerOptions) {
    this.hubEndpoint = (options.hubEndpoint ?? hubEndpointFromEnv()).replace(/\/+$/, '')
    this.slots = new Slots(options.maxConcurrent ?? 2)
    this.retry = { ...DEFAULT_RETRY, ...options.retry }
  }

  get modelsDir(): string {
    return this.options.folder.dir
  }

  /** Validates the request and starts the job; throws DownloadError('invalid_value') naming the field. */
  async pull(request: PullRequest): Promise<ManagedDownload> {
    const name = registryNameIn(request.source)
    if (name) return this.pullByName(name, request)
    if (request.insecure !== undefined) {
      throw new DownloadError(
        'invalid_value',
        `Invalid value for 'insecure': only a pull by name from a registry (host:port/namespace/model:tag) takes it`,
        'insecure',
      )
    }
    const model = parseModelSource(request.source, 'source', this.hubEndpoint)
    const mmproj = request.mmproj === undefined ? undefined : parseModelSource(request.mmproj, 'mmproj', this.hubEndpoint)
    const idParam = request.id === undefined ? 'source' : 'id'
    const modelId = request.id === undefined ? fileStem(model.fileName) : validateModelId(request.id)
    if (mmproj && mmproj.fileName === model.fileName) {
      throw new DownloadError('invalid_value', `Invalid value for 'mmproj': it has the same file name as the model`, 'mmproj')
    }

    if (await stat(join(this.modelsDir, model.fileName)).catch(() => undefined)) {
      throw new DownloadError('invalid_value', `The models folder already has a file named "${model.fileName}"`, 'source')
    }
    const { models, broken } = await this.options.folder.scan()
    if (models.some((m) => m.id === modelId) || broken.some((b) => b.id === modelId)) {
      throw new DownloadError(
        'invalid_value',
        `A model with the id "${modelId}" already exists${idParam === 'source' ? '; pass "id" to add this one under another id' : ''}`,
        idParam,
      )
    }
    for (const job of this.active()) {
      if (job.modelId === modelId) throw new DownloadError('invalid_value', `The model "${modelId}" is already being downloaded (${job.id})`, idParam)
      const busy = job.targetPaths
      if (busy.includes(join(this.modelsDir, model.fileName))) {
        throw new DownloadError('invalid_value', `"${model.fileName}" is already being downloaded (${job.id})`, 'source')
      }
      if (mmproj && busy.includes(join(this.modelsDir, mmproj.fileName))) {
        throw new DownloadError('invalid_value', `"${mmproj.fileName}" is already being downloaded (${job.id})`, 'mmproj')
      }
    }

    const id = `dl-${randomBytes(6).toString('hex')}`
    const job = new DownloadJob(
      { id, modelId, model, mmproj },
      {
        modelsDir: this.modelsDir,
        access: { hubToken: this.options.hubToken ?? process.env.HF_TOKEN, hubOrigin: new URL(this.hubEndpoint).origin },
        retry: this.retry,
        probeTimeoutMs: this.options.probeTimeoutMs ?? 30_000,
        freeBytes: this.options.freeBytes ?? freeDiskBytes,
        reservedByOthers: () => this.active().reduce((sum, j) => (j.id === id ? sum : sum + j.remainingBytes()), 0),
        acquireSlot: (signal) => this.slots.acquire(signal),
      },
    )
    return this.track(job)
  }

  /**
   * A model by its Ollama name, into the folder's `ollama/` store, served under that name. It comes
   * with its own projector and name, so `mmproj` and `id` are refused; pulling a name again updates it.
   */
  private async pullByName(name: RegistryName, request: PullRequest): Promise<ManagedDownload> {
    const bad = (param: string, why: string) => new DownloadError('invalid_value', `Invalid value for '${param}': ${why}`, param)
    if (request.mmproj !== undefined) throw bad('mmproj', `${name.shortName} is pulled by name, with the projector its manifest names`)
    if (request.id !== undefined && request.id !== name.shortName) throw bad('id', `a model pulled by name is served under that name, ${name.shortName}`)
    if (name.scheme === 'http' && request.insecure !== true)
      throw bad('source', `${name.shortName} is named with http://: pull it with "insecure": true to allow plain http`)
    for (const job of this.active()) {
      if (job.modelId === name.shortName) throw new DownloadError('invalid_value', `${name.shortName} is already being pulled (${job.id})`, 'source')
    }
    const { models } = await this.options.folder.scan()
    // A model of the folder's own by that id would be served in the pulled one's place.
    if (models.some((m) => m.id === name.shortName && !m.source)) {
      throw new DownloadError(
        'invalid_value',
        `A model with the id "${name.shortName}" already exists in the models folder; remove it before pulling ${name.shortName}`,
        'source',
      )
    }
    const id = `dl-${randomBytes(6).toString('hex')}`
    const job = new RegistryPullJob(id, name, {
      modelsDir: this.modelsDir,
      insecure: request.insecure === true,
      freeBytes: this.options.freeBytes ?? freeDiskBytes,
      reservedByOthers: () => this.active().reduce((sum, j) => (j.id === id ? sum : sum + j.remainingBytes()), 0),
      acquireSlot: (signal) => this.slots.acquire(signal),
      ...(this.options.registry ? { pullOptions: this.options.registry } : {}),
    })
    for (const earlier of this.jobs.values()) if (earlier instanceof RegistryPullJob && earlier.modelId === name.shortName) earlier.handOver()
    return this.track(job)
  }

  private track(job: ManagedDownload): ManagedDownload {
    this.jobs.set(job.id, job)
    void job.finished.then(() => this.prune())
    return job
  }

  /** Newest first, finished ones included. */
  list(): DownloadSnapshot[] {
    return [...this.jobs.values()].reverse().map((j) => j.snapshot())
  }

  get(id: string): ManagedDownload | undefined {
    return this.jobs.get(id)
  }

  /**
   * Cancels a running job (a file download's partial files go; a pull by name keeps what came), or
   * discards what a stopped one kept for resuming.
   */
  async cancel(id: string): Promise<DownloadSnapshot | undefined> {
    const job = this.jobs.get(id)
    if (!job) return undefined
    if (!isFinalState(job.currentState)) {
      job.cancel()
      return job.finished
    }
    const resumedElsewhere = this.active().some((other) => other.targetPaths.some((p) => job.targetPaths.includes(p)))
    await job.discard(resumedElsewhere)
    return job.snapshot()
  }

  /** Drops a job from the list (one refused before it really started). */
  forget(id: string): void {
    this.jobs.delete(id)
  }

  /** Stops every running download, keeping partial files so the next pull resumes. */
  async shutdown(): Promise<void> {
    const running = this.active()
    for (const job of running) job.interrupt()
    await Promise.all(running.map((j) => j.finished))
  }

  private active(): ManagedDownload[] {
    return [...this.jobs.values()].filter((j) => !isFinalState(j.currentState))
  }

  private prune(): void {
    const limit = this.options.historyLimit ?? 50
    const finished = [...this.jobs.values()].filter((j) => isFinalState(j.currentState))
    for (const job of finished.slice(0, Math.max(0, finished.length - limit))) this.jobs.delete(job.id)
  }
}

/**
 * The Ollama name a source is, if it is one: not `hf://…`, a URL of a file, nor `hf.co/…` (a
 * repository, whose file is named with hf://). A source that is neither a name nor a URL is refused
 * with what it may be.
 */
function registryNameIn(source: unknown): RegistryName | undefined {
  if (typeof source !== 'string') return undefined
  let parsed: ReturnType<typeof parsePullName>
  try {
    parsed = parsePullName(source, 'source')
  } catch (e) {
    // A URL that is no name (ftp://, a page) is refused as the reference it meant to be.
    if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(source.trim())) return undefined
    const why = (e as Error).message
    throw new DownloadError(
      'invalid_value',
      `Invalid value for 'source': ${why}; expected an Ollama name (qwen3:0.6b), hf://owner/repo/file.gguf or an https URL`,
      'source',
    )
  }
  if (parsed.kind === 'huggingface') {
    throw new DownloadError(
      'invalid_value',
      `Invalid value for 'source': ${parsed.name} is a Hugging Face repository; name its GGUF file, hf://${parsed.owner}/${parsed.repo}/<file>.gguf`,
      'source',
    )
  }
  return parsed.kind === 'registry' ? parsed : undefined
}

/** A counting semaphore whose waiters can give up. */
class Slots {
  private free: number
  private readonly waiting: Array<() => void> = []

  constructor(count: number) {
    this.free = Math.max(1, count)
  }

  acquire(signal: AbortSignal): Promise<() => void> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason)
      const grant = () => {
        signal.removeEventListener('abort', onAbort)
        let released = false
        resolve(() => {
          if (released) return
          released = true
          this.free++
          this.next()
        })
      }
      const onAbort = () => {
        const i = this.waiting.indexOf(take)
        if (i >= 0) this.waiting.splice(i, 1)
        reject(signal.reason)
      }
      const take = () => {
        this.free--
        grant()
      }
      signal.addEventListener('abort', onAbort, { once: true })
      this.waiting.push(take)
      this.next()
    })
  }

  private next(): void {
    while (this.free > 0 && this.waiting.length > 0) this.waiting.shift()!()
  }
}
