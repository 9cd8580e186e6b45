/**
 * Runs inside an engine process: one whisper.cpp model through @fugood/whisper.node, the fallback
 * for machines where whisper-server is not built: speech to text, transcribed or translated. It
 * reports segments' text and times only, so details (tokens, probabilities, word timings) and voice
 * activity detection are refused with the command that builds the full engine.
 *
 * Known traps of the binding, designed around here:
 * - transcribeData() takes 16-bit PCM, not float samples (its typings do not say so), so each piece
 *   is converted on the way in;
 * - stop() only raises a flag that whisper.cpp never reads while it decodes: the call runs on to the
 *   end of its audio, and stop() itself may never settle. So audio goes in as pieces of at most
 *   CHUNK_SECONDS, a cancelled job ends at the next piece, and when that is too far away the parent
 *   kills this process after its grace period (engine-process.ts). The job is never reported
 *   finished while whisper.cpp still works on it, or the next job would queue behind it unseen;
 * - its asynchronous work does not keep the event loop alive (here the IPC channel does);
 * - an empty language means English to whisper.cpp: detection has to be asked for with 'auto'.
 */
import { ModelError } from '../../errors.ts'
import { toPcm16 } from '../audio-chunks.ts'
import type { EngineLoadSpec, EngineModelInfo, JobProgress, SpeechJob, SpeechResult } from '../engine-protocol.ts'
import { cancelled, inAudioTime, speechInPieces, type PieceOptions, type PieceResult } from '../speech-in-pieces.ts'
import { whisperNode, type TranscribeOptions, type WhisperContext } from './whisper-binding.ts'

/** whisper.cpp's own fallback step, used when the client chose a temperature. */
const TEMPERATURE_STEP = 0.2

export class WhisperRuntime {
  private released = false

  private constructor(
    private readonly spec: EngineLoadSpec,
    private readonly context: WhisperContext,
    readonly info: EngineModelInfo,
  ) {}

  static async load(spec: EngineLoadSpec): Promise<WhisperRuntime> {
    const started = performance.now()
    const variant = spec.backend === 'default' ? undefined : spec.backend
    const context = await whisperNode.initWhisper({ filePath: spec.path, useGpu: spec.gpuLayers !== 0 }, variant)
    // whisper.node does not say where it placed the model.
    const info: EngineModelInfo = { devices: [], loadMs: Math.round(performance.now() - started), vision: false }
    return new WhisperRuntime(spec, context, info)
  }

  run(job: SpeechJob, emit: (p: JobProgress) => void, signal: AbortSignal): Promise<SpeechResult> {
    const needsServer = job.vad ? 'Voice activity detection' : job.detailed ? 'Each segment\'s tokens, probabilities and word timings' : undefined
    if (needsServer) {
      const message = `${needsServer} come from the whisper-server engine, which is not built on this machine (run: npm run build:engines)`
      return Promise.reject(new ModelError('model_not_compatible', message, job.vad ? 'chunking_strategy' : null))
    }
    return speechInPieces(job, (samples, offset, options) => this.transcribe(job, samples, offset, options, emit, signal), signal)
  }

  async release(): Promise<void> {
    if (this.released) return
    this.released = true
    await this.context.release()
  }

  /** One piece through whisper.cpp; segments are emitted as it finishes them, in audio time. */
  private async transcribe(
    job: SpeechJob,
    samples: Float32Array,
    offset: number,
    options: PieceOptions,
    emit: (p: JobProgress) => void,
    signal: AbortSignal,
  ): Promise<PieceResult> {
    const timed = (s: { text: string; t0: number; t1: number }) => inAudioTime({ text: s.text, startMs: s.t0, endMs: s.t1 }, offset, samples.length)
    const transcribeOptions: TranscribeOptions = {
      language: options.language ?? 'auto',
      translate: job.task === 'translate',
      maxThreads: this.spec.threads,
      prompt: options.prompt || undefined,
      onNewSegments: ({ segments }) => {
        if (signal.aborted) return
        for (const s of segments) emit({ type: 'segment', segment: timed(s) })
      },
      ...(options.temperature === undefined
        ? { temperature: 0, temperatureInc: 0, beamSize: 1, bestOf: 1 } // greedy, no fallback: deterministic
        : { temperature: options.temperature, temperatureInc: TEMPERATURE_STEP }),
    }
    const transcription = this.context.transcribeData(toPcm16(samples).buffer as ArrayBuffer, transcribeOptions)
    const stop = () => void transcription.stop().catch(() => undefined)
    signal.addEventListener('abort', stop, { once: true })
    try {
      const result = await transcription.promise
      if (signal.aborted || result.isAborted) throw cancelled()
      return { segments: result.segments.map(timed), language: result.language || undefined }
    } catch (e) {
      if (signal.aborted) throw cancelled()
      if (e instanceof ModelError) throw e
      throw new ModelError('internal_error', `whisper.cpp failed: ${e instanceof Error ? e.message : String(e)}`)
    } finally {
      signal.removeEventListener('abort', stop)
    }
  }
}
