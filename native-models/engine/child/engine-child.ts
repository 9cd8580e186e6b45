/**
 * Entry point of an engine process (child_process.fork headless, utilityProcess.fork in the app).
 * Holds one model and runs one job at a time; the parent queues the rest.
 */
import { ModelError, isModelError, type SerializedModelError } from '../../errors.ts'
import type { EngineJob, EngineLoadSpec, EngineResult, FromEngine, JobProgress, ToEngine } from '../engine-protocol.ts'
import { EmbeddingRuntime } from './embedding-runtime.ts'
import { LlamaRuntime } from './llama-runtime.ts'
import { ProgressCoalescer } from '../progress-coalescer.ts'
import { WhisperRuntime } from './whisper-runtime.ts'

type Runtime = LlamaRuntime | EmbeddingRuntime | WhisperRuntime

let runtime: Runtime | undefined
const running = new Map<number, AbortController>()

function send(message: FromEngine): void {
  process.send?.(message)
}

function serialize(e: unknown): SerializedModelError {
  if (isModelError(e)) return e.toJSON()
  return { code: 'internal_error', message: e instanceof Error ? e.message : String(e), param: null }
}

async function runJob(id: number, job: EngineJob): Promise<void> {
  const controller = new AbortController()
  running.set(id, controller)
  const progress = new ProgressCoalescer((p: JobProgress) => send({ type: 'progress', id, progress: p }))
  const emit = (p: JobProgress) => progress.emit(p)
  try {
    if (!runtime) throw new ModelError('internal_error', 'no model is loaded in this engine')
    const result: EngineResult = await runOn(runtime, job, emit, controller.signal)
    progress.flush()
    send({ type: 'done', id, result })
  } catch (e) {
    progress.flush()
    send({ type: 'failed', id, error: serialize(e) })
  } finally {
    running.delete(id)
  }
}

function loadRuntime(spec: EngineLoadSpec): Promise<Runtime> {
  if (spec.kind === 'speech') return WhisperRuntime.load(spec)
  return spec.kind === 'embedding' ? EmbeddingRuntime.load(spec) : LlamaRuntime.load(spec)
}

/** Each kind of model has its own runtime; a job for another kind is a routing bug upstream. */
function runOn(r: Runtime, job: EngineJob, emit: (p: JobProgress) => void, signal: AbortSignal): Promise<EngineResult> {
  if (job.type === 'chat' && r instanceof LlamaRuntime) return r.chat(job, emit, signal)
  if (job.type === 'embed' && r instanceof EmbeddingRuntime) return r.embed(job, signal)
  if (job.type === 'speech' && r instanceof WhisperRuntime) return r.run(job, emit, signal)
  if (job.type === 'rerank') {
    return Promise.reject(new ModelError('model_not_compatible', 'Reranking needs the llama-server engine, which is not built on this machine (run: npm run build:engines)', 'model'))
  }
  if (job.type === 'complete') {
    return Promise.reject(new ModelError('model_not_compatible', 'Completions need the llama-server engine, which is not built on this machine (run: npm run build:engines)', 'model'))
  }
  return Promise.reject(new ModelError('model_not_compatible', `this model cannot run '${job.type}' jobs`))
}

process.on('message', (message: ToEngine) => {
  switch (message.type) {
    case 'load':
      loadRuntime(message.spec).then(
        (loaded) => {
          runtime = loaded
          send({ type: 'loaded', info: loaded.info })
        },
        (e) => send({ type: 'load-failed', error: serialize(e) }),
      )
      break
    case 'run':
      void runJob(message.id, message.job)
      break
    case 'cancel':
      running.get(message.id)?.abort()
      break
    case 'shutdown':
      void shutdown()
      break
    case 'stats':
      send({ type: 'stats', rssBytes: process.memoryUsage.rss() })
      break
    case 'probe-devices':
      break // answered by device-probe-child.cjs
  }
})

async function shutdown(): Promise<void> {
  for (const c of running.values()) c.abort()
  await runtime?.release().catch(() => undefined)
  process.exit(0)
}

// The parent is gone (even killed with SIGKILL): an orphaned engine must not linger. Not
// process.exit(): it joins the native worker threads, and one stuck in a native call (whisper on a
// few samples of audio never returns) would keep the process alive for ever.
process.on('disconnect', () => process.kill(process.pid, 'SIGKILL'))
