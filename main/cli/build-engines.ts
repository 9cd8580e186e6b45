/**
 * `npm run build:engines` (and `npm install`'s postinstall with --soft): builds llama.cpp's
 * llama-server and whisper.cpp's whisper-server for this machine from the pinned sources, once;
 * later runs find the cached builds.
 * With --soft a machine that cannot build gets the message and the install goes on: the server then
 * falls back, loudly, to the slow prebuilt binding.
 */
import { buildLlama, EngineBuildError } from '../../native-models/native-build/llama-build.ts'
import { buildWhisper } from '../../native-models/native-build/whisper-build.ts'

const soft = process.argv.includes('--soft')
const log = (line: string) => console.log(`hearth engines: ${line}`)

try {
  const llama = buildLlama(log)
  log(`llama.cpp ${llama.commit.slice(0, 7)}, GPU ${llama.gpu}, CPU ${llama.cpuFeatures.join(' ') || 'baseline'}: ${llama.dir}`)
  const whisper = buildWhisper(log)
  log(`${whisper.sourceVersion}: ${whisper.dir}`)
} catch (e) {
  if (!(e instanceof EngineBuildError)) throw e
  console.error(`hearth engines: cannot build an engine here: ${e.message}`)
  if (!soft) process.exit(1)
  console.error('hearth engines: what is not built runs on the prebuilt bindings instead, 6-13x slower. Fix the above, then: npm run build:engines')
}
