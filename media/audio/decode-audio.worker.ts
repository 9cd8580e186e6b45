/** Worker-thread side of decodeAudioInWorker: one decode per message, one reply per decode. */
import { parentPort } from 'node:worker_threads'
import type { DecodeWorkerReply, DecodeWorkerRequest } from './decode-audio-in-worker.ts'
import { AudioTooLongError, decodeAudio, decodeAudioToFile } from './decode-audio.ts'
import { UnsupportedAudioError } from './unsupported-audio-error.ts'

const port = parentPort!

port.on('message', (request: DecodeWorkerRequest) => void decode(request))

/** One decode, its answer or its error always sent back. */
async function decode(request: DecodeWorkerRequest): Promise<void> {
  try {
    const options = { ffmpegPath: request.ffmpegPath, maxSeconds: request.maxSeconds }
    if (request.outputPath) {
      reply({ ok: true, audio: await decodeAudioToFile(request.input, request.outputPath, options) })
      return
    }
    const audio = await decodeAudio(request.input, options)
    reply({ ok: true, audio }, [audio.samples.buffer as ArrayBuffer]) // moved, not copied
  } catch (error) {
    reply({ ok: false, error: serializeError(error) })
  }
}

function reply(message: DecodeWorkerReply, transfer: ArrayBuffer[] = []): void {
  port.postMessage(message, transfer)
}

function serializeError(error: unknown): Extract<DecodeWorkerReply, { ok: false }>['error'] {
  if (error instanceof AudioTooLongError) return { message: error.message, maxSeconds: error.maxSeconds }
  if (error instanceof UnsupportedAudioError) return { message: error.message, reason: error.reason, detail: error.detail }
  if (error instanceof Error) return { message: error.message, stack: error.stack }
  return { message: String(error) }
}
