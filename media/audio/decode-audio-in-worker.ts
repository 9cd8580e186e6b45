/**
 * Runs `decodeAudio` on worker threads so a 50-minute MP3 does not stall the server's event loop.
 *
 * Workers are kept warm between requests: starting one (TypeScript loader, decoder modules,
 * WebAssembly compilation) costs about half a second, a decode of a short clip about 15 ms.
 * Each worker runs one decode at a time; cancelling a decode terminates its worker, which is the
 * only way to stop WebAssembly mid-call. Idle workers do not keep the process alive and are
 * closed after a while, returning their memory.
 */
import { availableParallelism } from 'node:os'
import { Worker } from 'node:worker_threads'
import type { DecodeAudioOptions, DecodedAudio, DecodedAudioFile } from './decoded-audio.ts'
import { AudioTooLongError } from './mono-16k-collector.ts'
import { UnsupportedAudioError, type UnsupportedAudioReason } from './unsupported-audio-error.ts'

/** Plain JavaScript entry: it makes sure the thread can load TypeScript, then runs decode-audio.worker.ts. */
const WORKER_ENTRY = new URL('./decode-audio-worker-entry.mjs', import.meta.url)
/** Decoding is CPU-bound and whisper.cpp wants the cores too: at most two decodes at once. */
const MAX_WORKERS = Math.max(1, Math.min(2, availableParallelism()))
const IDLE_WORKER_TTL_MS = 30_000

export interface DecodeWorkerRequest {
  input: Uint8Array | string
  ffmpegPath: string | null | undefined
  maxSeconds: number | undefined
  /** Where the samples go; undefined = back in the reply. */
  outputPath: string | undefined
}

export type DecodeWorkerReply =
  | { ok: true; audio: DecodedAudio | DecodedAudioFile }
  | { ok: false; error: { message: string; stack?: string; reason?: UnsupportedAudioReason; detail?: string; maxSeconds?: number } }

interface Job {
  request: DecodeWorkerRequest
  resolve(audio: DecodedAudio | DecodedAudioFile): void
  reject(error: unknown): void
}

interface PooledWorker {
  thread: Worker
  job: Job | null
  idleTimer: NodeJS.Timeout | null
}

const workers = new Set<PooledWorker>()
const waiting: Job[] = []

/**
 * Same contract as `decodeAudio`, off the main thread. Bytes are copied to the worker (the
 * caller's array stays usable); a path is read by the worker itself. Aborting the signal
 * rejects with the signal's reason and stops the decode.
 */
export async function decodeAudioInWorker(input: Uint8Array | string, options: DecodeAudioOptions = {}): Promise<DecodedAudio> {
  return (await runInWorker(input, undefined, options)) as DecodedAudio
}

/** `decodeAudioToFile` off the main thread: the worker writes the samples, a few seconds at a time. */
export async function decodeAudioToFileInWorker(input: Uint8Array | string, path: string, options: DecodeAudioOptions = {}): Promise<DecodedAudioFile> {
  return (await runInWorker(input, path, options)) as DecodedAudioFile
}

function runInWorker(input: Uint8Array | string, outputPath: string | undefined, options: DecodeAudioOptions): Promise<DecodedAudio | DecodedAudioFile> {
  const { signal } = options
  signal?.throwIfAborted()
  return new Promise((resolve, reject) => {
    const onAbort = (): void => cancel(job, signal!.reason)
    const done = (): void => signal?.removeEventListener('abort', onAbort)
    const job: Job = {
      request: { input, ffmpegPath: options.ffmpegPath, maxSeconds: options.maxSeconds, outputPath },
      resolve: (audio) => (done(), resolve(audio)),
      reject: (error) => (done(), reject(error)),
    }
    signal?.addEventListener('abort', onAbort, { once: true })
    waiting.push(job)
    dispatch()
  })
}

/** Terminates every worker; queued and running decodes reject. For shutdown and tests. */
export async function closeAudioDecodeWorkers(): Promise<void> {
  for (const job of waiting.splice(0)) job.reject(new Error('audio decode workers were closed'))
  await Promise.all([...workers].map((worker) => retire(worker, new Error('audio decode workers were closed'))))
}

function dispatch(): void {
  while (waiting.length > 0) {
    const worker = [...workers].find((candidate) => !candidate.job) ?? (workers.size < MAX_WORKERS ? spawn() : null)
    if (!worker) return
    start(worker, waiting.shift()!)
  }
}

function start(worker: PooledWorker, job: Job): void {
  if (worker.idleTimer) clearTimeout(worker.idleTimer)
  worker.idleTimer = null
  worker.job = job
  worker.thread.ref() // a running decode keeps the process alive
  worker.thread.postMessage(job.request)
}

function spawn(): PooledWorker {
  const worker: PooledWorker = { thread: new Worker(WORKER_ENTRY), job: null, idleTimer: null }
  workers.add(worker)
  worker.thread.on('message', (reply: DecodeWorkerReply) => {
    const job = worker.job
    if (!job) return
    finishJob(worker)
    if (reply.ok) job.resolve(reply.audio)
    else job.reject(errorFromWorker(reply.error))
  })
  worker.thread.on('error', (error) => void retire(worker, error))
  worker.thread.on('exit', (code) => void retire(worker, new Error(`audio decode worker exited with code ${code}`)))
  return worker
}

function finishJob(worker: PooledWorker): void {
  worker.job = null
  worker.thread.unref()
  worker.idleTimer = setTimeout(() => void retire(worker, null), IDLE_WORKER_TTL_MS).unref()
  queueMicrotask(dispatch)
}

function cancel(job: Job, reason: unknown): void {
  const queued = waiting.indexOf(job)
  if (queued >= 0) {
    waiting.splice(queued, 1)
    job.reject(reason)
    return
  }
  const worker = [...workers].find((candidate) => candidate.job === job)
  if (worker) void retire(worker, reason)
}

/** Removes a worker from the pool, failing its job (if any) with `reason`, and terminates it. */
async function retire(worker: PooledWorker, reason: unknown): Promise<void> {
  if (!workers.delete(worker)) return
  if (worker.idleTimer) clearTimeout(worker.idleTimer)
  const job = worker.job
  worker.job = null
  job?.reject(reason)
  queueMicrotask(dispatch) // a replacement worker picks up whatever is waiting
  await worker.thread.terminate()
}

function errorFromWorker(error: Extract<DecodeWorkerReply, { ok: false }>['error']): Error {
  if (error.maxSeconds !== undefined) return new AudioTooLongError(error.maxSeconds)
  if (error.reason && error.detail !== undefined) return new UnsupportedAudioError(error.reason, error.detail)
  const rebuilt = new Error(error.message)
  if (error.stack) rebuilt.stack = error.stack
  return rebuilt
}
