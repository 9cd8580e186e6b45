/**
 * Runs inside an engine process: one whisper.cpp model through @fugood/whisper.node, turning speech
 * in any language into English text.
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
import { open, type FileHandle } from 'node:fs/promises'
import { ModelError } from '../errors.ts'
import { CHUNK_SECONDS, WHISPER_SAMPLE_RATE, carriedPrompt, chunkEnd, toPcm16 } from './audio-chunks.ts'
import type { EngineLoadSpec, EngineModelInfo, JobProgress, TranslateJob, TranslateResult, TranslateSegment } from './engine-protocol.ts'
import { whisperNode, type TranscribeOptions, type WhisperContext } from './whisper-binding.ts'

const BYTES_PER_SAMPLE = Float32Array.BYTES_PER_ELEMENT
/**
 * whisper.cpp skips input shorter than 100 ms anyway, but on a few samples its language detection
 * fails and the binding's promise never settles (the engine had to be killed): such pieces (a WAV
 * whose header claims a huge sample rate, the last sliver of a long recording) are not sent at all.
 */
const MIN_PIECE_SAMPLES = WHISPER_SAMPLE_RATE / 10
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

  async translate(job: TranslateJob, emit: (p: JobProgress) => void, signal: AbortSignal): Promise<TranslateResult> {
    const file = await open(job.audioPath, 'r')
    try {
      const total = Math.floor((await file.stat()).size / BYTES_PER_SAMPLE)
      const chunkSamples = CHUNK_SECONDS * WHISPER_SAMPLE_RATE
      const segments: TranslateSegment[] = []
      let language = job.language
      let prompt = job.prompt
      let processMs = 0
      for (let start = 0; start < total; ) {
        if (signal.aborted) throw cancelled()
        const isLast = start + chunkSamples >= total
        const window = await readSamples(file, start, Math.min(total, start + chunkSamples))
        const end = start + chunkEnd(window, isLast)
        const began = performance.now()
        const piece = await this.transcribe(window.subarray(0, end - start), start, { language, prompt, temperature: job.temperature }, emit, signal)
        processMs += performance.now() - began
        segments.push(...piece.segments)
        language ??= piece.language
        const said = carriedPrompt(piece.segments.map((s) => s.text).join(''))
        if (said) prompt = said
        start = end
      }
      return { type: 'translate', segments, language: language ?? 'en', durationSeconds: total / WHISPER_SAMPLE_RATE, processMs }
    } finally {
      await file.close()
    }
  }

  async release(): Promise<void> {
    if (this.released) return
    this.released = true
    await this.context.release()
  }

  /** One piece through whisper.cpp; segments are emitted as it finishes them, in audio time. */
  private async transcribe(
    samples: Float32Array,
    offset: number,
    options: { language: string | undefined; prompt: string | undefined; temperature: number | undefined },
    emit: (p: JobProgress) => void,
    signal: AbortSignal,
  ): Promise<{ segments: TranslateSegment[]; language: string | undefined }> {
    if (samples.length < MIN_PIECE_SAMPLES) return { segments: [], language: undefined }
    const offsetMs = (offset / WHISPER_SAMPLE_RATE) * 1000
    const lengthMs = (samples.length / WHISPER_SAMPLE_RATE) * 1000
    const inAudioTime = (s: { text: string; t0: number; t1: number }): TranslateSegment => {
      // whisper.cpp may put the last timestamp past the end of a short piece.
      const endMs = Math.min(s.t1, lengthMs)
      return { startMs: offsetMs + Math.min(s.t0, endMs), endMs: offsetMs + endMs, text: s.text }
    }
    const transcribeOptions: TranscribeOptions = {
      language: options.language ?? 'auto',
      translate: true,
      maxThreads: this.spec.threads,
      prompt: options.prompt || undefined,
      onNewSegments: ({ segments }) => {
        if (signal.aborted) return
        for (const s of segments) emit({ type: 'segment', segment: inAudioTime(s) })
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
      return { segments: result.segments.map(inAudioTime), language: result.language || undefined }
    } catch (e) {
      if (signal.aborted) throw cancelled()
      if (e instanceof ModelError) throw e
      throw new ModelError('internal_error', `whisper.cpp failed: ${e instanceof Error ? e.message : String(e)}`)
    } finally {
      signal.removeEventListener('abort', stop)
    }
  }
}

function cancelled(): ModelError {
  return new ModelError('cancelled', 'the request was cancelled')
}

/** Samples [from, to) of a file of float32 samples. */
async function readSamples(file: FileHandle, from: number, to: number): Promise<Float32Array> {
  const samples = new Float32Array(to - from)
  const bytes = new Uint8Array(samples.buffer)
  for (let done = 0; done < bytes.length; ) {
    const { bytesRead } = await file.read(bytes, done, bytes.length - done, from * BYTES_PER_SAMPLE + done)
    if (bytesRead === 0) throw new ModelError('internal_error', 'the audio file ended early')
    done += bytesRead
  }
  return samples
}
