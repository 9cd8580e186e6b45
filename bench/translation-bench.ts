/**
 * Audio translation speed as a real-time factor (seconds of audio per second of wall time): one
 * file through Hearth's API (upload, decode, engine, answer) against the same file posted to
 * whisper.cpp's own whisper-server, built from the same source with the same options, same model,
 * one thread, greedy; both engines pinned to the same core, runs interleaved. Target: Hearth keeps
 * ≥ 95 % of whisper-server's rate. Also printed: how long decoding each test fixture takes on the
 * server's decode workers, per format.
 *
 * Alone: `npx tsx bench/translation-bench.ts [--base-url URL --api-key KEY --model ID] [--threads N] [--runs N]`
 */
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { closeAudioDecodeWorkers, decodeAudio, decodeAudioInWorker } from '../native-models/audio/decode-audio.ts'
import { findWhisperBuild } from '../native-models/native-build/whisper-build.ts'
import { startTestServer } from '../test/support/server-process.ts'
import { startUpstreamProgram } from '../test/support/upstream-servers.ts'
import { fmt, median } from './bench-server.ts'
import { CLIENT_CORES, ENGINE_CORE, pinEngines, pinProcess } from './cores.ts'

export interface TranslationBenchOptions {
  baseUrl?: string
  apiKey?: string
  /** The id the server at baseUrl knows the model by; defaults to the file's name without .bin. */
  model?: string
  modelPath: string
  audioPath: string
  threads: number
  runs?: number
}

const AUDIO_FIXTURES = resolve(import.meta.dirname, '../test/fixtures/audio')

export async function runTranslationBench(options: TranslationBenchOptions): Promise<Record<string, number>> {
  const runs = options.runs ?? 5
  const bytes = readFileSync(options.audioPath)
  const { durationSeconds } = await decodeAudio(new Uint8Array(bytes))
  console.log(`\n# translation: ${basename(options.audioPath)} (${fmt(durationSeconds)} s), ${runs} runs, ${options.threads} thread(s), ${basename(options.modelPath)}`)

  const build = findWhisperBuild()
  if (!build) throw new Error('whisper.cpp is not built on this machine: npm run build:engines')
  const upstream = await startUpstreamProgram(build, 'whisper-server', ['--model', options.modelPath, '--threads', String(options.threads)], {
    cpus: ENGINE_CORE,
  })
  const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-translation-bench-'))
  copyFileSync(options.modelPath, join(modelsDir, basename(options.modelPath)))
  const server = await startTestServer({ modelsDir, threads: options.threads })
  pinProcess(server.process.pid!, CLIENT_CORES)
  const model = options.model ?? basename(options.modelPath).replace(/\.bin$/, '')
  const direct: number[] = []
  const api: number[] = []
  try {
    await apiSeconds(server.url, server.apiKey, model, bytes) // loads the model and warms the decoder
    pinEngines(server.process.pid!)
    await upstreamSeconds(upstream.url, bytes)
    // Runs alternate, so a machine that gets busier or quieter part way through weighs on both alike.
    for (let i = 0; i < runs; i++) {
      direct.push(await upstreamSeconds(upstream.url, bytes))
      api.push(await apiSeconds(server.url, server.apiKey, model, bytes))
    }
  } finally {
    await upstream.stop()
    await server.stop()
  }

  const figures: Record<string, number> = {
    direct_rtf: durationSeconds / median(direct),
    api_rtf: durationSeconds / median(api),
  }
  figures.rtf_ratio = figures.api_rtf! / figures.direct_rtf!
  // The fastest runs are the ones least disturbed by anything else on the machine.
  figures.best_rtf_ratio = Math.min(...direct) / Math.min(...api)
  console.log(
    `real-time factor  whisper-server ${fmt(figures.direct_rtf!, 2)}   hearth ${fmt(figures.api_rtf!, 2)}   ratio ${fmt(figures.rtf_ratio, 3)} (target ≥ 0.95)` +
      `   (median ${fmt(median(direct) * 1000, 0)} ms whisper-server, ${fmt(median(api) * 1000, 0)} ms hearth; fastest runs: ratio ${fmt(figures.best_rtf_ratio, 3)})`,
  )
  Object.assign(figures, await decodeTimes(runs))
  return figures
}

/** Wall seconds of one request to whisper-server, the same file and the greedy options Hearth uses. */
async function upstreamSeconds(url: string, bytes: Buffer): Promise<number> {
  const body = new FormData()
  body.append('file', new Blob([new Uint8Array(bytes)]), 'audio.wav')
  body.append('translate', 'true')
  body.append('response_format', 'json')
  body.append('language', 'auto')
  body.append('temperature', '0')
  body.append('temperature_inc', '0')
  body.append('best_of', '1')
  body.append('beam_size', '-1')
  const started = performance.now()
  const res = await fetch(`${url}/inference`, { method: 'POST', body })
  const text = await res.text()
  if (!res.ok) throw new Error(`whisper-server failed: ${res.status} ${text}`)
  return (performance.now() - started) / 1000
}

/** Wall seconds of one request, from sending the upload to the last byte of the answer. */
async function apiSeconds(baseUrl: string, apiKey: string, model: string, bytes: Buffer): Promise<number> {
  const body = new FormData()
  body.append('model', model)
  body.append('file', new Blob([new Uint8Array(bytes)]), 'audio')
  const started = performance.now()
  const res = await fetch(`${baseUrl}/v1/audio/translations`, { method: 'POST', headers: { authorization: `Bearer ${apiKey}` }, body })
  const text = await res.text()
  if (!res.ok) throw new Error(`translation request failed: ${res.status} ${text}`)
  return (performance.now() - started) / 1000
}

/** Median milliseconds to decode each fixture on a warm decode worker (the copy in and out included). */
async function decodeTimes(runs: number): Promise<Record<string, number>> {
  const names = readdirSync(AUDIO_FIXTURES).filter((n) => n.startsWith('speech')).sort()
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

/** The shared fixtures' random multilingual whisper and jfk.wav when present, else a generated tiny whisper and a fixture. */
export async function translationBenchInputs(): Promise<{ modelPath: string; audioPath: string }> {
  const shared = resolve(import.meta.dirname, '../../shared/fixtures')
  const model = join(shared, 'models/ggml-tiny-random-multilingual.bin')
  const audio = join(shared, 'audio/jfk.wav')
  if (existsSync(model) && existsSync(audio)) return { modelPath: model, audioPath: audio }
  console.warn('*** ../shared/fixtures is missing: benchmarking a generated tiny whisper on test/fixtures/audio/speech-s16.wav ***')
  const { writeTinyWhisper } = await import('../test/support/tiny-models.ts')
  const modelPath = join(mkdtempSync(join(tmpdir(), 'hearth-bench-whisper-')), 'ggml-tiny-whisper.bin')
  writeTinyWhisper(modelPath)
  return { modelPath, audioPath: join(AUDIO_FIXTURES, 'speech-s16.wav') }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { values } = parseArgs({
    options: {
      'base-url': { type: 'string' },
      'api-key': { type: 'string' },
      model: { type: 'string' },
      threads: { type: 'string', default: '1' },
      runs: { type: 'string', default: '5' },
    },
  })
  const inputs = await translationBenchInputs()
  const figures = await runTranslationBench({
    ...inputs,
    baseUrl: values['base-url'],
    apiKey: values['api-key'],
    model: values.model,
    threads: Number(values.threads),
    runs: Number(values.runs),
  })
  console.log(`\n${JSON.stringify(figures, null, 2)}`)
  process.exit(0)
}
