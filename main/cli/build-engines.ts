/**
 * `npm run build:engines` (and `npm install`'s postinstall with --soft): builds llama.cpp's
 * llama-server for this machine from the pinned source, once; later runs find the cached build.
 * With --soft a machine that cannot build gets the message and the install goes on: the server then
 * falls back, loudly, to the slow prebuilt binding.
 */
import { buildLlama, EngineBuildError } from '../../native-models/llama-server/llama-build.ts'

const soft = process.argv.includes('--soft')
const log = (line: string) => console.log(`hearth engines: ${line}`)

try {
  const build = buildLlama(log)
  log(`llama.cpp ${build.commit.slice(0, 7)}, GPU ${build.gpu}, CPU ${build.cpuFeatures.join(' ') || 'baseline'}: ${build.dir}`)
} catch (e) {
  if (!(e instanceof EngineBuildError)) throw e
  console.error(`hearth engines: cannot build llama.cpp here: ${e.message}`)
  if (!soft) process.exit(1)
  console.error('hearth engines: Hearth will run on the prebuilt binding instead, 6-13x slower. Fix the above, then: npm run build:engines')
}
