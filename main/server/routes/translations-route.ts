/**
 * POST /v1/audio/translations: read the upload → check the fields → decode the audio off the event
 * loop → hand it to the model's engine through a scratch file → answer in the asked format, or
 * stream one delta per segment as whisper finishes it.
 */
import { randomBytes } from 'node:crypto'
import { mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { Router } from 'express'
import { decodeAudioInWorker, UnsupportedAudioError, type DecodedAudio } from '../../../native-models/audio/decode-audio.ts'
import type { TranslateResult } from '../../../native-models/engine/engine-protocol.ts'
import { readAudioUpload } from '../audio-upload.ts'
import { invalidRequest } from '../http-errors.ts'
import { recordUsage } from '../key-quotas.ts'
import { requireModel } from '../model-lookup.ts'
import { MAX_AUDIO_FILE_BYTES, parseTranslationForm, planTranslation } from '../openai/translation-request.ts'
import { formatTranslation, SegmentText, textDeltaEvent, textDoneEvent } from '../openai/translation-response.ts'
import { requestLifetime } from '../request-lifetime.ts'
import type { ServerContext } from '../server-context.ts'
import { SseStream } from '../sse.ts'

export function translationsRoute(ctx: ServerContext): Router {
  const router = Router()
  const scratch = new AudioScratch(join(ctx.settings.dataDir, 'tmp'))
  router.post('/audio/translations', async (req, res) => {
    const lifetime = requestLifetime(res, ctx.settings.requestTimeoutMs)
    let audioPath: string | undefined
    try {
      const upload = await readAudioUpload(req, res, MAX_AUDIO_FILE_BYTES)
      const request = parseTranslationForm(upload.fields)
      if (!upload.file) throw invalidRequest("Missing required parameter: 'file'", 'file', 'missing_required_parameter')
      const model = await requireModel(ctx.folder, request.model)
      res.locals.model = model.id
      const job = planTranslation(request, model)

      const audio = await decode(upload.file.bytes, lifetime.signal)
      upload.file.bytes = Buffer.alloc(0) // the upload's memory goes back while whisper works
      audioPath = await scratch.write(audio.samples)
      const durationSeconds = audio.durationSeconds
      audio.samples = new Float32Array(0) // so do the samples: the engine reads them from the file

      const text = new SegmentText()
      let streamed = 0
      const sse = request.stream ? new SseStream(res) : undefined
      const sendDelta = (segmentText: string) => {
        const delta = text.push(segmentText)
        if (delta) sse?.send(textDeltaEvent(delta))
      }
      const result = (await ctx.scheduler.run(
        model,
        { ...job, audioPath },
        {
          signal: lifetime.signal,
          onProgress: sse
            ? (p) => {
                if (p.type !== 'segment') return
                streamed++
                sendDelta(p.segment.text)
              }
            : undefined,
        },
      )) as TranslateResult
      recordUsage(res, { audioSeconds: durationSeconds })

      if (sse) {
        for (const segment of result.segments.slice(streamed)) sendDelta(segment.text)
        sse.send(textDoneEvent(text.text, request.includeUsage ? durationSeconds : undefined))
        sse.done()
        return
      }
      const output = { segments: result.segments, language: result.language, durationSeconds, temperature: request.temperature ?? 0 }
      const { contentType, body } = formatTranslation(request.responseFormat, output)
      res.status(200).type(contentType).send(body)
    } catch (e) {
      throw lifetime.explain(e)
    } finally {
      lifetime.dispose()
      if (audioPath) await scratch.remove(audioPath)
    }
  })
  return router
}

/** What the client is told, by reason: the decoder's own detail may name server paths (ffmpeg's). */
const UNSUPPORTED_AUDIO: Record<UnsupportedAudioError['reason'], string> = {
  empty: 'the file is empty',
  unrecognized: 'the bytes are not a known audio or video format',
  unsupported_codec: 'the audio inside is in a codec that cannot be decoded',
  no_audio: 'the file has no audio in it',
  truncated: 'the file is truncated',
  corrupt: 'the audio data is corrupt',
}

/** Any upload to 16 kHz mono samples on a worker thread; bytes that are not audio are the client's error. */
async function decode(bytes: Buffer, signal: AbortSignal): Promise<DecodedAudio> {
  try {
    return await decodeAudioInWorker(bytes, { signal })
  } catch (e) {
    if (!(e instanceof UnsupportedAudioError)) throw e
    throw invalidRequest(
      `Unsupported or invalid audio file: ${UNSUPPORTED_AUDIO[e.reason]}. Send FLAC, MP3, MP4, MPEG, MPGA, M4A, Ogg, WAV or WebM.`,
      'file',
      'unsupported_audio_format',
    )
  }
}

/**
 * Decoded audio on its way to an engine: raw float32 files in the data folder, deleted when the
 * request ends. Files a crashed server left behind are cleared the first time the folder is used.
 */
class AudioScratch {
  private ready: Promise<void> | undefined

  constructor(private readonly dir: string) {}

  async write(samples: Float32Array): Promise<string> {
    this.ready ??= this.prepare()
    await this.ready
    const path = join(this.dir, `audio-${randomBytes(8).toString('hex')}.f32`)
    await writeFile(path, samples)
    return path
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
