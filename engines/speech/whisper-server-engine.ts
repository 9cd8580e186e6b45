/**
 * A loaded whisper model served by whisper.cpp's own whisper-server, built for this machine: speech
 * transcribed or translated. The audio goes in pieces (speech-in-pieces.ts), each a 16 kHz 16-bit WAV posted to /inference
 * with explicit options; the segments of each piece stream out as it finishes. whisper-server
 * cannot stop a piece it has started: a cancelled job ends with its piece, or the process is killed
 * after a grace period and the next request loads the model again.
 */
import { ModelError } from '../errors.ts'
import { toPcm16, WHISPER_SAMPLE_RATE } from './audio-chunks.ts'
import type { RunOptions } from '../engine.ts'
import { ServerEngine } from '../server-engine.ts'
import type { EngineJob, EngineLoadSpec, EngineModelInfo, EngineResult, JobProgress, SpeechJob, SpeechResult, SpeechSegment } from '../engine-jobs.ts'
import { EngineServerProcess } from '../engine-server-process.ts'
import { cancelled, inAudioTime, speechInPieces, type PieceOptions, type PieceResult } from './speech-in-pieces.ts'
import { whisperCodeOfName } from './whisper-languages.ts'
import { outOfQuiet, quietStretches, type QuietStretch } from './quiet-stretches.ts'
import { programPath, type NativeBuild } from '../builder/cmake-build.ts'

/** whisper.cpp's own fallback step, used when the client chose a temperature. */
const TEMPERATURE_STEP = 0.2
/**
 * Not speech, however whisper words it: the window whisper rates more likely silence than speech
 * (its no-speech probability, whisper's own threshold), unless it is sure of the words. On whisper
 * base, real speech rated 0.01–0.18 (jfk.wav, French, German, telephone-rate espeak), quiet noise
 * translated to "Thank you for watching." 0.75 at -0.59 a token, and silence 0.90.
 */
const NO_SPEECH_PROB = 0.6
const SURE_LOGPROB = -0.3
/** What whisper.cpp writes for a window with nothing in it. */
const BLANK_AUDIO = '[BLANK_AUDIO]'

/** Whether whisper heard speech in a segment of its answer (see NO_SPEECH_PROB). */
function isSpeech(s: NonNullable<VerboseJson['segments']>[number]): boolean {
  if (s.text.trim() === BLANK_AUDIO) return false
  return !((s.no_speech_prob ?? 0) > NO_SPEECH_PROB && (s.avg_logprob ?? 0) < SURE_LOGPROB)
}
/** How long a cancelled piece may run on before its engine is stopped the hard way. */
const CANCEL_GRACE_MS = 5_000

/** whisper-server's verbose_json: `words` are its tokens (a few merged where a character spans them). */
interface VerboseJson {
  /** The language whisper decoded in, by name ("english"). */
  language?: string
  segments?: Array<{
    text: string
    start: number
    end: number
    tokens?: number[]
    words?: Array<{ word: string; start?: number; end?: number; probability: number }>
    temperature?: number
    avg_logprob?: number
    no_speech_prob?: number
  }>
}

export class WhisperServerEngine extends ServerEngine {
  private constructor(
    server: EngineServerProcess,
    info: EngineModelInfo,
    private readonly hasVadModel: boolean,
  ) {
    super(server, info)
  }

  static async start(spec: EngineLoadSpec, build: NativeBuild, options: { forwardLog?: boolean; loadTimeoutMs?: number } = {}): Promise<WhisperServerEngine> {
    const started = performance.now()
    const args = [
      '--model',
      spec.path,
      '--threads',
      String(spec.threads),
      // verbose_json would otherwise run language detection a second time for its probabilities.
      '--no-language-probabilities',
      ...(spec.gpuLayers === 0 ? ['--no-gpu'] : []),
      // The detector is loaded per request that asks for it (form field `vad`).
      ...(spec.vadModelPath ? ['--vad-model', spec.vadModelPath] : []),
    ]
    const server = await EngineServerProcess.start({
      program: programPath(build.dir, 'whisper-server'),
      args,
      modelId: spec.modelId,
      loadTimeoutMs: options.loadTimeoutMs ?? 120_000,
      forwardLog: options.forwardLog ?? false,
    })
    const info: EngineModelInfo = {
      devices: build.gpu === 'none' || spec.gpuLayers === 0 ? ['CPU'] : [build.gpu.toUpperCase()],
      loadMs: Math.round(performance.now() - started),
      vision: false,
      engine: { name: 'whisper-server', commit: build.commit, cpuFeatures: build.cpuFeatures, gpu: build.gpu },
    }
    return new WhisperServerEngine(server, info, spec.vadModelPath !== undefined)
  }

  run(job: EngineJob, options: RunOptions = {}): Promise<EngineResult> {
    if (job.type !== 'speech') return Promise.reject(new ModelError('model_not_compatible', `this model cannot run '${job.type}' jobs`))
    return this.speech(job, options)
  }

  private async speech(job: SpeechJob, { onProgress, signal }: RunOptions): Promise<SpeechResult> {
    if (job.vad && !this.hasVadModel) {
      throw new ModelError(
        'model_not_compatible',
        'Voice activity detection needs a voice-activity model (Silero, such as ggml-silero-v5.1.2.bin from ggml-org/whisper-vad) in the models folder',
        'chunking_strategy',
      )
    }
    const abort = signal ?? new AbortController().signal
    return speechInPieces(job, (samples, offset, options) => this.transcribe(job, samples, offset, options, onProgress, abort), abort)
  }

  private async transcribe(
    job: SpeechJob,
    samples: Float32Array,
    offset: number,
    options: PieceOptions,
    emit: ((p: JobProgress) => void) | undefined,
    signal: AbortSignal,
  ): Promise<PieceResult> {
    const form = new FormData()
    form.append('file', new Blob([new Uint8Array(wavOf(samples))], { type: 'audio/wav' }), 'piece.wav')
    form.append('translate', String(job.task === 'translate'))
    form.append('response_format', 'verbose_json')
    form.append('token_timestamps', String(job.detailed))
    if (job.vad) {
      form.append('vad', 'true')
      if (job.vad.threshold !== undefined) form.append('vad_threshold', String(job.vad.threshold))
      if (job.vad.minSilenceMs !== undefined) form.append('vad_min_silence_duration_ms', String(job.vad.minSilenceMs))
      if (job.vad.speechPadMs !== undefined) form.append('vad_speech_pad_ms', String(job.vad.speechPadMs))
    }
    form.append('language', options.language ?? 'auto')
    if (options.prompt) form.append('prompt', options.prompt)
    if (options.temperature === undefined) {
      // Greedy without fallback: deterministic, as the contract's default promises.
      form.append('temperature', '0')
      form.append('temperature_inc', '0')
      form.append('best_of', '1')
      form.append('beam_size', '-1')
    } else {
      form.append('temperature', String(options.temperature))
      form.append('temperature_inc', String(TEMPERATURE_STEP))
    }
    // A cancelled piece: whisper-server works on until its end, so after a grace period the engine goes.
    let graceTimer: NodeJS.Timeout | undefined
    const onAbort = () => {
      graceTimer = setTimeout(() => this.server.kill(), CANCEL_GRACE_MS)
      graceTimer.unref()
    }
    if (signal.aborted) throw cancelled()
    signal.addEventListener('abort', onAbort, { once: true })
    try {
      const res = await this.server.request('/inference', { body: form })
      const text = await res.text()
      if (signal.aborted) throw cancelled()
      if (!res.ok) throw new ModelError('internal_error', `whisper.cpp failed: ${text.slice(0, 300)}`)
      const answer = JSON.parse(text) as VerboseJson & { error?: string }
      if (answer.error) throw new ModelError('internal_error', `whisper.cpp failed: ${answer.error}`)
      const quiet = job.detailed ? quietStretches(samples, WHISPER_SAMPLE_RATE) : []
      const segments = (answer.segments ?? []).filter(isSpeech).map((s) => inAudioTime(segmentOf(s, job.detailed, quiet), offset, samples.length))
      for (const segment of segments) emit?.({ type: 'segment', segment })
      return { segments, language: whisperCodeOfName(answer.language) }
    } catch (e) {
      if (signal.aborted) throw cancelled()
      throw e
    } finally {
      clearTimeout(graceTimer)
      signal.removeEventListener('abort', onAbort)
    }
  }
}

/** A segment of whisper-server's answer in the piece's time, with its details when they were asked for (token times out of the piece's pauses). */
function segmentOf(s: NonNullable<VerboseJson['segments']>[number], detailed: boolean, quiet: readonly QuietStretch[]): SpeechSegment {
  const segment: SpeechSegment = { text: s.text, startMs: s.start * 1000, endMs: s.end * 1000 }
  if (!detailed) return segment
  segment.detail = {
    tokenIds: s.tokens ?? [],
    tokens: outOfQuiet(
      (s.words ?? []).map((w) => ({
        text: w.word,
        probability: w.probability,
        startMs: (w.start ?? -1) * 1000,
        endMs: (w.end ?? -1) * 1000,
      })),
      quiet,
    ),
    temperature: s.temperature ?? 0,
    avgLogprob: s.avg_logprob ?? 0,
    noSpeechProb: s.no_speech_prob ?? 0,
  }
  return segment
}

/** 16 kHz mono 16-bit PCM in a WAV container, what whisper-server reads without converting. */
function wavOf(samples: Float32Array): Buffer {
  const pcm = toPcm16(samples)
  const header = Buffer.alloc(44)
  header.write('RIFF', 0)
  header.writeUInt32LE(36 + pcm.byteLength, 4)
  header.write('WAVE', 8)
  header.write('fmt ', 12)
  header.writeUInt32LE(16, 16)
  header.writeUInt16LE(1, 20) // PCM
  header.writeUInt16LE(1, 22) // mono
  header.writeUInt32LE(WHISPER_SAMPLE_RATE, 24)
  header.writeUInt32LE(WHISPER_SAMPLE_RATE * 2, 28)
  header.writeUInt16LE(2, 32)
  header.writeUInt16LE(16, 34)
  header.write('data', 36)
  header.writeUInt32LE(pcm.byteLength, 40)
  return Buffer.concat([header, Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength)])
}
