/**
 * Last resort for inputs the JavaScript path does not know (AIFF, WMA, AMR, AC-3 in a program
 * stream, ...): a system ffmpeg, used only when one is installed. Nothing here is needed for the
 * formats the JavaScript path decodes.
 */
import { spawn } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { WHISPER_SAMPLE_RATE, type Mono16kCollector } from './mono-16k-collector.ts'
import { UnsupportedAudioError } from './unsupported-audio-error.ts'

/** Keeps the tail of ffmpeg's stderr for the error message without letting it grow without bound. */
const STDERR_TAIL_CHARS = 2000

/** The ffmpeg executable on `pathList` (a PATH-style string), or null when there is none. */
export function findFfmpegOnPath(pathList = process.env.PATH ?? ''): string | null {
  const names = process.platform === 'win32' ? ['ffmpeg.exe'] : ['ffmpeg']
  for (const directory of pathList.split(delimiter)) {
    if (!directory) continue
    for (const name of names) {
      const candidate = join(directory, name)
      try {
        accessSync(candidate, constants.X_OK)
        return candidate
      } catch {
        // not here
      }
    }
  }
  return null
}

/**
 * Decodes the first audio stream of `input` (bytes, or a file path) to 16 kHz mono float32.
 * Bytes go through a temporary file because MP4 and friends need a seekable input.
 */
export async function decodeWithFfmpeg(
  ffmpegPath: string,
  input: Uint8Array | string,
  collector: Mono16kCollector,
  options: { signal?: AbortSignal } = {},
): Promise<void> {
  if (typeof input === 'string') return runFfmpeg(ffmpegPath, input, collector, options.signal)
  const directory = await mkdtemp(join(tmpdir(), 'hearth-audio-'))
  try {
    const path = join(directory, 'input')
    await writeFile(path, input)
    return await runFfmpeg(ffmpegPath, path, collector, options.signal)
  } finally {
    await rm(directory, { recursive: true, force: true })
  }
}

/** ffmpeg's output goes to the collector as it comes, so a long file is never held whole. */
function runFfmpeg(ffmpegPath: string, inputPath: string, collector: Mono16kCollector, signal?: AbortSignal): Promise<void> {
  const args = [
    ...['-nostdin', '-hide_banner', '-loglevel', 'error'],
    ...['-i', inputPath, '-map', '0:a:0', '-vn'],
    ...['-ac', '1', '-ar', String(WHISPER_SAMPLE_RATE), '-f', 'f32le', 'pipe:1'],
  ]
  return new Promise((resolve, reject) => {
    const child = spawn(ffmpegPath, args, { stdio: ['ignore', 'pipe', 'pipe'], signal })
    let carry = Buffer.alloc(0) // a sample split between two chunks
    let failure: unknown
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => {
      if (failure) return
      const bytes = carry.length > 0 ? Buffer.concat([carry, chunk]) : chunk
      const whole = bytes.length - (bytes.length % 4)
      carry = Buffer.from(bytes.subarray(whole))
      try {
        collector.push([toFloat32(bytes.subarray(0, whole))], WHISPER_SAMPLE_RATE)
      } catch (error) {
        failure = error // too long, say: stop reading and stop ffmpeg
        child.kill()
      }
    })
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      stderr = (stderr + text).slice(-STDERR_TAIL_CHARS)
    })
    child.once('error', (error) => {
      if (signal?.aborted) reject(signal.reason)
      else reject(error)
    })
    child.once('close', (code) => {
      if (signal?.aborted) return reject(signal.reason)
      if (failure) return reject(failure)
      if (code !== 0) {
        const reason = lastLine(stderr) || `exit code ${code}`
        return reject(new UnsupportedAudioError('corrupt', `ffmpeg could not decode it: ${reason}`))
      }
      if (collector.sampleCount === 0) return reject(new UnsupportedAudioError('no_audio', 'ffmpeg found no audio in it'))
      resolve()
    })
  })
}

/** Copies into a fresh, aligned Float32Array (Buffer chunks may sit at odd offsets in a shared pool). */
function toFloat32(bytes: Buffer): Float32Array {
  const samples = new Float32Array(bytes.length / 4)
  new Uint8Array(samples.buffer).set(bytes)
  return samples
}

function lastLine(text: string): string {
  return text.trim().split('\n').at(-1)?.trim() ?? ''
}
