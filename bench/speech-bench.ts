/**
 * Speech speed as a real-time factor (seconds of audio per second of wall time), for translation,
 * transcription, and transcription with word timings (verbose_json): one file through Hearth's API
 * (upload, decode, engine, answer) against the same file posted to whisper.cpp's own
 * whisper-server, built from the same source with the same options, same model, one thread,
 * greedy; both engines pinned to the same core, runs interleaved. Target: Hearth keeps ≥ 95 % of
 * whisper-server's rate. Also printed: how long decoding each test fixture takes on the server's
 * decode workers, per format.
 *
 * Alone: `npx tsx bench/speech-bench.ts [--threads N] [--runs N]`
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { closeAudioDecodeWorkers, decodeAudio, decodeAudioInWorker } from '../media/audio/decode-audio.ts'
import { realModelPath } from '../test/support/real-models/catalog.ts'
import { engineCacheDir } from '../engines/builder/cmake-build.ts'
import { findWhisperBuild } from '../engines/builder/whisper-build.ts'
import { startTestServer } from '../test/support/server-process.ts'
import { startUpstreamProgram } from '../test/support/upstream-servers.ts'
import { fmt, median } from './bench-server.ts'
import { CLIENT_CORES, ENGINE_CORE, pinEngines, pinProcess } from './cores.ts'

export interface SpeechBenchOptions {
  label: string
  modelPath: string
  audioPath: string
  threads: number
  /** Per-format decode times as well (once is enough). */
  decodeTimes?: boolean
  runs?: number
}

const AUDIO_FIXTURES = resolve(import.meta.dirname, '../test/fixtures/audio')

/** What is measured: the route, the answer asked for, and the whisper-server fields that match it. */
const CASES = [
  // Without word timings Hearth asks whisper-server for no token timestamps (it computes them by default).
  { name: 'translate', route: 'translations', fields: {}, upstream: { translate: 'true', response_format: 'json', token_timestamps: 'false' } },
  { name: 'transcribe', route: 'transcriptions', fields: {}, upstream: { translate: 'false', response_format: 'json', token_timestamps: 'false' } },
  {
    name: 'transcribe_words',
    route: 'transcriptions',
    fields: { response_format: 'verbose_json', 'timestamp_granularities[]': 'word' },
    upstream: { translate: 'false', response_format: 'verbose_json', token_timestamps: 'true' },
  },
] as const

type SpeechCase = (typeof CASES)[number]

export async function runSpeechBench(options: SpeechBenchOptions): Promise<Record<string, number>> {
  const runs = options.runs ?? 5
  const bytes = readFileSync(options.audioPath)
  const { durationSeconds } = await decodeAudio(new Uint8Array(bytes))
  console.log(
    `\n# speech, ${options.label}: ${basename(options.audioPath)} (${fmt(durationSeconds)} s), ${runs} runs, ${options.threads} thread(s), ${basename(options.modelPath)}`,
  )

  const build = findWhisperBuild()
  if (!build) throw new Error('whisper.cpp is not built on this machine: npm run build:engines')
  const upstream = await startUpstreamProgram(
    build,
    'whisper-server',
    ['--model', options.modelPath, '--threads', String(options.threads), '--no-language-probabilities'],
    {
      cpus: ENGINE_CORE,
    },
  )
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-speech-bench-'))
  copyFileSync(options.modelPath, join(modelsDir, basename(options.modelPath)))
  const server = await startTestServer({ modelsDir, threads: options.threads })
  pinProcess(server.process.pid!, CLIENT_CORES)
  const model = basename(options.modelPath).replace(/\.bin$/, '')
  const figures: Record<string, number> = {}
  try {
    await apiSeconds(server.url, server.apiKey, model, bytes, CASES[0]) // loads the model and warms the decoder
    pinEngines(server.process.pid!)
    for (const speechCase of CASES) {
      const direct: number[] = []
      const api: number[] = []
      await upstreamSeconds(upstream.url, bytes, speechCase)
      // Runs alternate, so a machine that gets busier or quieter part way through weighs on both alike.
      for (let i = 0; i < runs; i++) {
        direct.push(await upstreamSeconds(upstream.url, bytes, speechCase))
        api.push(await apiSeconds(server.url, server.apiKey, model, bytes, speechCase))
      }
      const name = speechCase.name
      figures[`${name}_direct_rtf`] = durationSeconds / median(direct)
      figures[`${name}_api_rtf`] = durationSeconds / median(api)
      figures[`${name}_rtf_ratio`] = figures[`${name}_api_rtf`]! / figures[`${name}_direct_rtf`]!
      // The fastest runs are the ones least disturbed by anything else on the machine.
      figures[`${name}_best_rtf_ratio`] = Math.min(...direct) / Math.min(...api)
      console.log(
        `${name.padEnd(17)} real-time factor  whisper-server ${fmt(figures[`${name}_direct_rtf`]!, 2)}   hearth ${fmt(figures[`${name}_api_rtf`]!, 2)}   ` +
          `ratio ${fmt(figures[`${name}_rtf_ratio`]!, 3)} (target ≥ 0.95)   (median ${fmt(median(direct) * 1000, 0)} ms whisper-server, ` +
          `${fmt(median(api) * 1000, 0)} ms hearth; fastest runs: ratio ${fmt(figures[`${name}_best_rtf_ratio`]!, 3)})`,
      )
    }
  } finally {
    await upstream.stop()
    await server.stop()
  }
  if (options.decodeTimes) Object.assign(figures, await decodeTimes(runs))
  return figures
}

/** Wall seconds of one request to whisper-server, the same file and the greedy options Hearth uses. */
async function upstreamSeconds(url: string, bytes: Buffer, speechCase: SpeechCase): Promise<number> {
  const body = new FormData()
  body.append('file', new Blob([new Uint8Array(bytes)]), 'audio.wav')
  const fields = { ...speechCase.upstream, language: 'auto', temperature: '0', temperature_inc: '0', best_of: '1', beam_size: '-1' }
  for (const [name, value] of Object.entries(fields)) body.append(name, value)
  const started = performance.now()
  const res = await fetch(`${url}/inference`, { method: 'POST', body })
  const text = await res.text()
  if (!res.ok) throw new Error(`whisper-server failed: ${res.status} ${text}`)
  return (performance.now() - started) / 1000
}

/** Wall seconds of one request, from sending the upload to the last byte of the answer. */
async function apiSeconds(baseUrl: string, apiKey: string, model: string, bytes: Buffer, speechCase: SpeechCase): Promise<number> {
  const body = new FormData()
  body.append('model', model)
  for (const [name, value] of Object.entries(speechCase.fields)) body.append(name, value)
  body.append('file', new Blob([new Uint8Array(bytes)]), 'audio')
  const started = performance.now()
  const res = await fetch(`${baseUrl}/v1/audio/${speechCase.route}`, { method: 'POST', headers: { authorization: `Bearer ${apiKey}` }, body })
  const text = await res.text()
  if (!res.ok) throw new Error(`${speechCase.name} request failed: ${res.status} ${text}`)
  return (performance.now() - started) / 1000
}

/** Median milliseconds to decode each fixture on a warm decode worker (the copy in and out included). */
async function decodeTimes(runs: number): Promise<Record<string, number>> {
  const names = readdirSync(AUDIO_FIXTURES)
    .filter((n) => n.startsWith('speech'))
    .sort()
  await decodeAudioInWorker(readFileSync(join(AUDIO_FIXTURES, 'speech-s16.wav'))) // starts the worker
  const figures: Record<string, number> = {}
  console.log('decode ms per format (warm worker, 2.4 s of speech):')
  for (const name of names) {
    const bytes = readFileSync(join(AUDIO_FIXTURES, name))
    await decodeAudioInWorker(bytes) // loads that format's decoder
    const times: number[] = []
    for (let i = 0; i < Math.max(runs, 3); i++) {
      const started = performance.now()
      await decodeAudioInWorker(bytes)
      times.push(performance.now() - started)
    }
    figures[`decode_ms_${name}`] = median(times)
    console.log(`  ${name.padEnd(26)} ${fmt(median(times), 1).padStart(6)} ms`)
  }
  await closeAudioDecodeWorkers()
  return figures
}

/**
 * The audio (jfk.wav from the shared fixtures when present), and three models: the shared tiny random
 * whisper, whose figures are Hearth's overhead, a random whisper shaped like whisper-base (74 M
 * parameters, F16), and the trained whisper base itself (npm run models:fetch), whose figures are
 * the speed a user sees. Our writer steers any whisper's
 * decoder to " hello world." ending at 2 s, so both sides do the same work on every run; whisper
 * then moves its window on 2 s at a time, so an 11 s clip costs about five encoder passes where
 * real speech would cost one: the ratio is what counts, the real-time factor understates.
 */
export async function speechBenchInputs(): Promise<Array<{ label: string; modelPath: string; audioPath: string }>> {
  const shared = resolve(import.meta.dirname, '../../shared/fixtures')
  const tiny = join(shared, 'models/ggml-tiny-random-multilingual.bin')
  const jfk = join(shared, 'audio/jfk.wav')
  const audioPath = existsSync(jfk) ? jfk : join(AUDIO_FIXTURES, 'speech-s16.wav')
  if (!existsSync(jfk)) console.warn('*** ../shared/fixtures is missing: benchmarking on test/fixtures/audio/speech-s16.wav ***')
  const { writeTinyWhisper } = await import('../test/support/tiny-models.ts')
  const dir = join(engineCacheDir(), 'bench-models')
  const base = join(dir, 'random-whisper-base-f16.bin')
  if (!existsSync(base)) {
    mkdirSync(dir, { recursive: true })
    console.log('writing a random-weight whisper-base-shaped model (F16, 148 MB)…')
    writeTinyWhisper(`${base}.partial`, { state: 512, heads: 8, audioLayers: 6, textLayers: 6 })
    renameSync(`${base}.partial`, base)
  }
  let overheadModel = tiny
  if (!existsSync(tiny)) {
    overheadModel = join(mkdtempSync(join(tmpdir(), 'hearth-bench-whisper-')), 'ggml-tiny-whisper.bin')
    writeTinyWhisper(overheadModel)
  }
  const trained = realModelPath('whisper-base')
  if (!trained) console.warn('*** whisper base (real weights) is not fetched: npm run models:fetch -- whisper-base ***')
  return [
    { label: 'overhead (tiny random whisper)', modelPath: overheadModel, audioPath },
    { label: 'real size (whisper-base shape)', modelPath: base, audioPath },
    ...(trained ? [{ label: 'real weights (whisper base, F16)', modelPath: trained, audioPath }] : []),
  ]
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { values } = parseArgs({ options: { threads: { type: 'string', default: '1' }, runs: { type: 'string', default: '5' } } })
  const figures: Record<string, Record<string, number>> = {}
  for (const inputs of await speechBenchInputs()) {
    figures[inputs.label] = await runSpeechBench({ ...inputs, threads: Number(values.threads), runs: Number(values.runs) })
  }
  console.log(`\n${JSON.stringify(figures, null, 2)}`)
  process.exit(0)
}
