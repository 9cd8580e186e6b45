/**
 * What the download manager holds of a job, whatever it fetches (download-job.ts: files from a hub
 * or a URL; registry-pull-job.ts: a model by its Ollama name), and the lifecycle both share: the
 * state, the signal that cancels or interrupts the job, the rate meter, and snapshots to listeners
 * at most every PROGRESS_INTERVAL_MS.
 */
import type { DownloadError } from './download-error.ts'
import { RateMeter } from './download-progress.ts'

export type DownloadState = 'queued' | 'downloading' | 'verifying' | 'done' | 'failed' | 'cancelled'

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

const FINAL: ReadonlySet<DownloadState> = new Set(['done', 'failed', 'cancelled'])
export const PROGRESS_INTERVAL_MS = 250

export function isFinalState(state: DownloadState): boolean {
  return FINAL.has(state)
}

/** Why a job's signal fired: the user cancelled, or the process is stopping (what came stays). */
const CANCELLED = Symbol('cancelled')
const INTERRUPTED = Symbol('interrupted')

/** A job's state and its listeners; a job adds what it fetches and how (`run`, `snapshot`). */
export abstract class DownloadLifecycle implements ManagedDownload {
  abstract readonly id: string
  abstract readonly modelId: string
  abstract readonly finished: Promise<DownloadSnapshot>
  readonly createdAt = Date.now()
  readonly prepared: Promise<void>

  protected state: DownloadState = 'queued'
  protected error: DownloadError | undefined
  protected finishedAt: number | undefined
  /** When the transfer began, for the average rate once done. */
  protected downloadStartedAt: number | undefined
  protected readonly controller = new AbortController()
  protected readonly meter = new RateMeter()
  protected markPrepared!: () => void
  private readonly listeners = new Set<(snapshot: DownloadSnapshot) => void>()
  private lastEmit = 0
  private trailingEmit: NodeJS.Timeout | undefined

  constructor() {
    this.prepared = new Promise((resolve) => (this.markPrepared = resolve))
  }

  abstract get targetPaths(): string[]
  abstract remainingBytes(): number
  abstract discard(keepFiles?: boolean): Promise<void>
  abstract snapshot(): DownloadSnapshot

  get currentState(): DownloadState {
    return this.state
  }

  get failure(): DownloadError | undefined {
    return this.error
  }

  cancel(): void {
    if (!isFinalState(this.state)) this.controller.abort(CANCELLED)
  }

  /** Stops without discarding: what came stays for the next pull of the same source. */
  interrupt(): void {
    if (!isFinalState(this.state)) this.controller.abort(INTERRUPTED)
  }

  subscribe(listener: (snapshot: DownloadSnapshot) => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /** Why the job stopped, if it was told to. */
  protected stopReason(): 'cancelled' | 'interrupted' | undefined {
    const signal = this.controller.signal
    if (!signal.aborted) return undefined
    if (signal.reason === CANCELLED) return 'cancelled'
    if (signal.reason === INTERRUPTED) return 'interrupted'
    return undefined
  }

  protected setState(state: DownloadState): void {
    this.state = state
    if (state === 'downloading') this.meter.reset()
    this.emit(true)
  }

  /** Progress at most every PROGRESS_INTERVAL_MS; `force` for a change of state. */
  protected emit(force: boolean): void {
    const wait = PROGRESS_INTERVAL_MS - (Date.now() - this.lastEmit)
    if (!force && wait > 0) {
      // Held back, not dropped: the last progress before a stall reaches the listeners too.
      this.trailingEmit ??= setTimeout(() => this.emit(true), wait)
      return
    }
    clearTimeout(this.trailingEmit)
    this.trailingEmit = undefined
    this.lastEmit = Date.now()
    const snapshot = this.snapshot()
    for (const listener of this.listeners) listener(snapshot)
  }
}
