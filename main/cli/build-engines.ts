/**
 * `npm run build:engines` (and `npm install`'s postinstall with --soft): builds llama.cpp's
 * llama-server and whisper.cpp's whisper-server for this machine from the pinned sources, once;
 * later runs find the cached builds. With --soft a machine that cannot build gets the message and
 * the install goes on (models on other machines still serve); the server starts, and answers
 * requests for local models with a 503 naming the command that builds the engines.
 *
 * Each build is ready only once its self-test has run every weight type on it (install prints the
 * verdict); one that crashes is built again without the CPU feature behind it. `--without amx|avx512|native`
 * builds without one from the start, for a crash the self-test did not foresee.
 *
 * Once both are ready, what earlier versions left in the engine cache and nothing uses goes
 * (engine-cache-tidy.ts), in one line.
 *
 * `--portable --into DIR` (what `npm run dist` runs) builds engines for every CPU level instead and
 * copies them to DIR/llama and DIR/whisper, for the installer to ship.
 */
import { cpSync, rmSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { parseArgs } from 'node:util'
import { gpuToolkit, missingGpuToolkit, type NativeBuild } from '../../engines/builder/cmake-build.ts'
import { describeTidy, tidyEngineCache } from '../../engines/builder/engine-cache-tidy.ts'
import { pinnedSourceNames } from '../../engines/builder/pinned-source.ts'
import { buildLlama, EngineBuildError } from '../../engines/builder/llama-build.ts'
import { buildWhisper } from '../../engines/builder/whisper-build.ts'
import { selfTestVerdict } from '../../engines/builder/self-test/engine-self-test.ts'

const { values: flags } = parseArgs({
  options: { soft: { type: 'boolean' }, portable: { type: 'boolean' }, into: { type: 'string' }, without: { type: 'string' } },
})
const log = (line: string) => console.log(`hearth engines: ${line}`)

try {
  const portable = flags.portable ?? false
  const gpuMissing = portable ? undefined : missingGpuToolkit(gpuToolkit())
  if (gpuMissing) log(`note: ${gpuMissing}`)
  const llama = await buildLlama(log, process.env, portable, flags.without)
  const whisper = await buildWhisper(log, process.env, portable, flags.without)
  // The verdicts last, where a person reads first.
  log(`llama.cpp ${llama.commit.slice(0, 7)}, GPU ${llama.gpu}, CPU ${llama.cpuFeatures.join(' ') || 'baseline'}: ${llama.dir}`)
  log(`  ${verdictOf(llama)}`)
  log(`${whisper.sourceVersion}: ${whisper.dir}`)
  log(`  ${verdictOf(whisper)}`)
  // Earlier updates' sources and builds nothing uses: only once today's engines are ready.
  const cache = dirname(llama.dir)
  const inCache = [llama, whisper].filter((b) => dirname(b.dir) === cache).map((b) => basename(b.dir))
  const tidied = describeTidy(tidyEngineCache(cache, { builds: inCache, sources: pinnedSourceNames() }))
  if (tidied) log(tidied)
  if (flags.into) {
    for (const [name, build] of [
      ['llama', llama],
      ['whisper', whisper],
    ] as const) {
      rmSync(join(flags.into, name), { recursive: true, force: true })
      cpSync(build.dir, join(flags.into, name), { recursive: true })
    }
    log(`copied to ${flags.into}`)
  }
} catch (e) {
  if (!(e instanceof EngineBuildError)) throw e
  console.error(`hearth engines: cannot build an engine here: ${e.message}`)
  if (!flags.soft) process.exit(1)
  console.error('hearth engines: local models answer 503 until the engines are built. Fix the above, then: npm run build:engines')
}

function verdictOf(build: NativeBuild): string {
  const withheld = build.withheld?.length
    ? ` (built without ${build.withheld.join(', ')}: the self-test crashed with ${build.withheld.length > 1 ? 'them' : 'it'})`
    : ''
  return `${build.selfTest ? selfTestVerdict(build.selfTest) : 'not self-tested'}${withheld}`
}
