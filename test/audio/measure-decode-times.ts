/**
 * Prints how long each fixture takes to decode: `npx tsx test/audio/measure-decode-times.ts`.
 * "first" includes loading that format's decoder (module + WebAssembly compile) on this thread;
 * "warm" is the median of later runs; "worker" is a warm pooled worker, including the copy in and out.
 */
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { closeAudioDecodeWorkers } from '../../media/audio/decode-audio-in-worker.ts'
import { decodeAudio, decodeAudioInWorker } from '../../media/audio/decode-audio.ts'

const FIXTURES = fileURLToPath(new URL('../fixtures/audio/', import.meta.url))
const RUNS = 5

async function time(run: () => Promise<unknown>): Promise<number> {
  const started = performance.now()
  await run()
  return performance.now() - started
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

const names = (await readdir(FIXTURES)).filter((name) => name.startsWith('speech')).sort()
await decodeAudioInWorker(join(FIXTURES, 'speech-s16.wav'), { ffmpegPath: null }) // start the worker
console.log('file                        bytes    first   warm  worker  (ms)')
for (const name of names) {
  const bytes = new Uint8Array(await readFile(join(FIXTURES, name)))
  const first = await time(() => decodeAudio(bytes, { ffmpegPath: null }))
  const warm: number[] = []
  const worker: number[] = []
  for (let i = 0; i < RUNS; i++) {
    warm.push(await time(() => decodeAudio(bytes, { ffmpegPath: null })))
    worker.push(await time(() => decodeAudioInWorker(bytes, { ffmpegPath: null })))
  }
  const cells = [first, median(warm), median(worker)].map((ms) => ms.toFixed(1).padStart(7))
  console.log(`${name.padEnd(26)}${String(bytes.length).padStart(8)} ${cells.join('')}`)
}
await closeAudioDecodeWorkers()
