/**
 * POST /v1/audio/transcriptions and /v1/audio/translations, one pipeline: read the upload → check
 * the fields → decode the audio off the event loop into a scratch file, a few seconds at a time →
 * hand the file to the model's engine → answer in the asked format, or stream one delta per
 * segment as whisper finishes it.
 */
import { Router, type Request, type Response } from 'express'
import { decodeAudioToFileInWorker } from '../../../../media/audio/decode-audio.ts'
import { readAudioUpload } from '../../http/audio-upload.ts'
import { invalidRequest } from '../../services/api-error.ts'
import { requireModel } from '../../services/pipeline/model-lookup.ts'
import { MAX_AUDIO_FILE_BYTES, parseSpeechForm, planSpeech, type SpeechTask } from './speech-request.ts'
import { formatSpeech, TranscriptStreamWriter } from './speech-response.ts'
import { streamOf, type AnswerShape } from '../../services/pipeline/answer-pipeline.ts'
import type { SpeechResult } from '../../../../engines/engine-jobs.ts'
import type { ServerContext } from '../../server-context.ts'
import type { AudioScratch } from './audio-scratch.ts'
import { DEFAULT_MAX_AUDIO_SECONDS } from '../../settings.ts'
import { sseEvents } from '../../http/sse.ts'

export function speechRoute(ctx: ServerContext): Router {
  const router = Router()
  const scratch = ctx.audioScratch
  router.post('/audio/transcriptions', (req, res) => answerSpeech(ctx, scratch, 'transcribe', req, res))
  router.post('/audio/translations', (req, res) => answerSpeech(ctx, scratch, 'translate', req, res))
  return router
}

async function answerSpeech(ctx: ServerContext, scratch: AudioScratch, task: SpeechTask, req: Request, res: Response): Promise<void> {
  let audioPath: string | undefined
  try {
    await ctx.pipeline.within(res, async (signal) => {
      const upload = await readAudioUpload(req, res, MAX_AUDIO_FILE_BYTES)
      const request = parseSpeechForm(upload.fields, upload.lists)
      if (!upload.file) throw invalidRequest("Missing required parameter: 'file'", 'file', 'missing_required_parameter')
      const model = await requireModel(ctx.folder, request.model)
      res.locals.model = model.id
      const job = planSpeech(task, request, model, ctx.settings.vad ?? false)

      audioPath = await scratch.newPath()
      const maxSeconds = ctx.settings.maxAudioSeconds ?? DEFAULT_MAX_AUDIO_SECONDS
      // Bytes that are not audio, or audio longer than the server takes, are the client's error (http-errors.ts).
      const audio = await decodeAudioToFileInWorker(upload.file.bytes, audioPath, { signal, maxSeconds })
      upload.file.bytes = Buffer.alloc(0) // the upload's memory goes back while whisper works
      const durationSeconds = audio.durationSeconds
      const writer = new TranscriptStreamWriter({ logprobs: request.logprobs, usageSeconds: request.includeUsage ? durationSeconds : undefined })
      const shape: AnswerShape<SpeechResult> = request.stream
        ? streamOf(() => sseEvents(res, 'done'), writer)
        : { formatted: (result) => formatSpeech(request, { task, segments: result.segments, language: result.language, durationSeconds }) }
      // Speech is charged by the second of audio, not by tokens.
      await ctx.pipeline.answer(res, model, { ...job, audioPath }, shape, signal, { usage: { audioSeconds: durationSeconds } })
    })
  } finally {
    if (audioPath) await scratch.remove(audioPath)
  }
}
