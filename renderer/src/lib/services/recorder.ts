/**
 * Recording from the microphone as WebM/Opus (what the translation endpoint reads, and what
 * Chromium records natively). One Recording per take; stop() gives the file.
 */

export const RECORDING_TYPE = 'audio/webm;codecs=opus'

export interface Recording {
  /** Resolves with the recorded file once stopped. */
  stop(): Promise<File>
  /** Stops without keeping anything. */
  cancel(): void
}

export class RecorderError extends Error {
  override name = 'RecorderError'
}

export async function startRecording(): Promise<Recording> {
  if (!navigator.mediaDevices?.getUserMedia || typeof MediaRecorder === 'undefined') {
    throw new RecorderError('This browser cannot record audio here (it needs https, localhost or the desktop app)')
  }
  if (!MediaRecorder.isTypeSupported(RECORDING_TYPE)) throw new RecorderError('This browser cannot record WebM/Opus audio')
  let stream: MediaStream
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true } })
  } catch (e) {
    const name = (e as DOMException).name
    throw new RecorderError(
      name === 'NotAllowedError'
        ? 'Microphone access was refused'
        : name === 'NotFoundError'
          ? 'No microphone was found'
          : `The microphone could not be opened (${name})`,
    )
  }
  const recorder = new MediaRecorder(stream, { mimeType: RECORDING_TYPE, audioBitsPerSecond: 64_000 })
  const chunks: Blob[] = []
  recorder.ondataavailable = (e) => {
    if (e.data.size > 0) chunks.push(e.data)
  }
  const release = () => stream.getTracks().forEach((t) => t.stop())
  recorder.start(1000)
  return {
    stop: () =>
      new Promise<File>((resolve) => {
        recorder.onstop = () => {
          release()
          const stamp = new Date().toISOString().slice(0, 19).replace(/[T:]/g, '-')
          resolve(new File(chunks, `recording-${stamp}.webm`, { type: 'audio/webm' }))
        }
        recorder.stop()
      }),
    cancel: () => {
      recorder.onstop = release
      if (recorder.state !== 'inactive') recorder.stop()
      else release()
    },
  }
}
