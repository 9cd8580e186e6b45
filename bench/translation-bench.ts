/**
 * Audio translation speed as a real-time factor (seconds of audio per second of wall time): one
 * file through the HTTP API (upload, decode, engine, answer) against the same samples through
 * @fugood/whisper.node in this process, same model, threads and greedy options. Target: the API
 * keeps ≥ 95 % of the direct rate. Also printed: how long decoding each test fixture takes on the
 * server's decode workers, per format.
 *
 * Alone: `npx tsx bench/translation-bench.ts [--base-url URL --api-key KEY --model ID] [--threads N] [--runs N]`
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { closeAudioDecodeWorkers, decodeAudio, decodeAudioInWorker } from '../native-models/audio/decode-audio.ts'
import { toPcm16 } from '../native-models/engine/audio-chunks.ts'
import { whisperNode, type WhisperContext } from '../native-models/engine/whisper-binding.ts'
import { benchTarget, fmt, median } from './bench-server.ts'

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
  const { samples, durationSeconds } = await decodeAudio(new Uint8Array(bytes))
  console.log(`\n# translation: ${basename(options.audioPath)} (${fmt(durationSeconds)} s), ${runs} runs, ${options.threads} thread(s), ${basename(options.modelPath)}`)

  // Runs alternate between the two paths, so a machine that gets busier or quieter part way
  // through weighs on both alike.
  const whisper = await whisperNode.initWhisper({ filePath: options.modelPath, useGpu: true }) // as the engine loads it
  const keepAlive = setInterval(() => undefined, 1000) // the binding's work does not hold the event loop
  const target = await benchTarget({ ...options, modelFiles: [options.modelPath] })
  const model = options.model ?? basename(options.modelPath).replace(/\.bin$/, '')
  const direct: number[] = []
  const api: number[] = []
  try {
    await directSeconds(whisper, samples, options.threads) // warms up
    await apiSeconds(target.baseUrl, target.apiKey, model, bytes) // loads the model and warms the decoder
    for (let i = 0; i < runs; i++) {
      direct.push(await directSeconds(whisper, samples, options.threads))
      api.push(await apiSeconds(target.baseUrl, target.apiKey, model, bytes))
    }
  } finally {
    clearInterval(keepAlive)
    await target.close()
    await whisper.release()
  }

  const figures: Record<string, number> = {
    direct_rtf: durationSeconds / median(direct),
    api_rtf: durationSeconds / median(api),
  }
  figures.rtf_ratio = figures.api_rtf! / figures.direct_rtf!
  // The fastest runs are the ones least disturbed by anything else on the machine.
  figures.best_rtf_ratio = Math.min(...direct) / Math.min(...api)
  console.log(
    `real-time factor  direct ${fmt(figures.direct_rtf!, 2)}   api ${fmt(figures.api_rtf!, 2)}   ratio ${fmt(figures.rtf_ratio * 100)} % (target ≥ 95 %)` +
      `   (median ${fmt(median(direct) * 1000, 0)} ms direct, ${fmt(median(api) * 1000, 0)} ms api; fastest runs: ratio ${fmt(figures.best_rtf_ratio * 100)} %)`,
  )
  Object.assign(figures, await decodeTimes(runs))
  return figures
}

/** Wall seconds of transcribeData on already decoded samples, called as the engine calls it. */
async function directSeconds(context: WhisperContext, samples: Float32Array, threads: number): Promise<number> {
  const started = performance.now()
  await context.transcribeData(toPcm16(samples).buffer as ArrayBuffer, {
    language: 'auto',
    translate: true,
    maxThreads: threads,
    temperature: 0,
    temperatureInc: 0,
    beamSize: 1,
    bestOf: 1,
  }).promise
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
