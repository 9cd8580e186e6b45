/**
 * POST /v1/audio/transcriptions and /v1/audio/translations, one pipeline: read the upload → check
 * the fields → decode the audio off the event loop into a scratch file, a few seconds at a time →
 * hand the file to the model's engine → answer in the asked format, or stream one delta per
 * segment as whisper finishes it.
 */
import { randomBytes } from 'node:crypto'
import { mkdir, readdir, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { Router, type Request, type Response } from 'express'
import { decodeAudioToFileInWorker } from '../../../../media/audio/decode-audio.ts'
import { readAudioUpload } from '../../http/audio-upload.ts'
import { invalidRequest } from '../../services/api-error.ts'
import { recordUsage } from '../../services/keys/key-quotas.ts'
import { requireModel } from '../../services/pipeline/model-lookup.ts'
import { MAX_AUDIO_FILE_BYTES, parseSpeechForm, planSpeech, type SpeechTask } from './speech-request.ts'
import { formatSpeech, TranscriptStreamWriter, type TranscriptEvent } from './speech-response.ts'
import { requestLifetime } from '../../services/pipeline/request-lifetime.ts'
import type { ServerContext } from '../../server-context.ts'
import { DEFAULT_MAX_AUDIO_SECONDS } from '../../settings.ts'
import { SseStream } from '../../http/sse.ts'

export function speechRoute(ctx: ServerContext): Router {
  const router = Router()
  const scratch = new AudioScratch(join(ctx.settings.dataDir, 'tmp'))
  router.post('/audio/transcriptions', (req, res) => answerSpeech(ctx, scratch, 'transcribe', req, res))
  router.post('/audio/translations', (req, res) => answerSpeech(ctx, scratch, 'translate', req, res))
  return router
}

async function answerSpeech(ctx: ServerContext, scratch: AudioScratch, task: SpeechTask, req: Request, res: Response): Promise<void> {
  const lifetime = requestLifetime(res, ctx.settings.requestTimeoutMs)
  let audioPath: string | undefined
  try {
    const upload = await readAudioUpload(req, res, MAX_AUDIO_FILE_BYTES)
    const request = parseSpeechForm(upload.fields, upload.lists)
    if (!upload.file) throw invalidRequest("Missing required parameter: 'file'", 'file', 'missing_required_parameter')
    const model = await requireModel(ctx.folder, request.model)
    res.locals.model = model.id
    const job = planSpeech(task, request, model, ctx.settings.vad ?? false)

    audioPath = await scratch.newPath()
    const maxSeconds = ctx.settings.maxAudioSeconds ?? DEFAULT_MAX_AUDIO_SECONDS
    // Bytes that are not audio, or audio longer than the server takes, are the client's error (http-errors.ts).
    const audio = await decodeAudioToFileInWorker(upload.file.bytes, audioPath, { signal: lifetime.signal, maxSeconds })
    upload.file.bytes = Buffer.alloc(0) // the upload's memory goes back while whisper works
    const durationSeconds = audio.durationSeconds

    const sse = request.stream ? new SseStream(res) : undefined
    const writer = new TranscriptStreamWriter({ logprobs: request.logprobs, usageSeconds: request.includeUsage ? durationSeconds : undefined })
    const send = (events: TranscriptEvent[]) => events.forEach((e) => sse?.send(e))
    const result = await ctx.scheduler.run(model, { ...job, audioPath }, { signal: lifetime.signal, onProgress: sse && ((p) => send(writer.progress(p))) })
    recordUsage(res, { audioSeconds: durationSeconds })

    if (sse) {
      send(writer.finish(result))
      sse.done()
      return
    }
    const output = { task, segments: result.segments, language: result.language, durationSeconds }
    const { contentType, body } = formatSpeech(request, output)
    res.status(200).type(contentType).send(body)
  } catch (e) {
    throw lifetime.explain(e)
  } finally {
    lifetime.dispose()
    if (audioPath) await scratch.remove(audioPath)
  }
}

/**
 * Decoded audio on its way to an engine: raw float32 files in the data folder, deleted when the
 * request ends. Files a crashed server left behind are cleared the first time the folder is used.
 */
class AudioScratch {
  private ready: Promise<void> | undefined

  constructor(private readonly dir: string) {}

  /** A fresh file name in the folder, for the decoder to write. */
  async newPath(): Promise<string> {
    this.ready ??= this.prepare()
    await this.ready
    return join(this.dir, `audio-${randomBytes(8).toString('hex')}.f32`)
  }

  async remove(path: string): Promise<void> {
    await rm(path, { force: true }).catch(() => undefined)
  }

  private async prepare(): Promise<void> {
    await mkdir(this.dir, { recursive: true })
    const stale = Date.now() - 60 * 60 * 1000
    for (const name of await readdir(this.dir).catch(() => [])) {
      if (!/^audio-[0-9a-f]+\.f32$/.test(name)) continue
      const path = join(this.dir, name)
      const info = await stat(path).catch(() => undefined)
      if (info && info.mtimeMs < stale) await this.remove(path)
    }
  }
}
