/**
 * `npm run engines:rebase -- --pypi llama-cpp-python==0.3.36 [--commit 0c1e570] [--build] [--write]`,
 * or `-- --tree /path/to/llama.cpp`: carries Hearth's llama.cpp patches onto a newer llama.cpp by
 * three-way merge and says, patch by patch, what merged and where each one that did not conflicts.
 * With --build, the merged tree is built beside the pinned build, to run the tests on it
 * (HEARTH_LLAMA_BUILD_DIR). With --write, the merged patches replace ours (headers kept); the pin
 * itself is changed by hand (docs/engines.md#moving-to-a-new-llamacpp). The output also goes to a
 * log file.
 */
import { appendFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { cmakeBuild, engineCacheDir, gpuToolkit } from '../../engines/builder/cmake-build.ts'
import { llamaRecipe } from '../../engines/builder/llama-build.ts'
import { rebasePatches, writeRefreshed } from '../../engines/builder/patch-rebase.ts'
import { EngineBuildError, LLAMA_PATCHES, LLAMA_SOURCE, llamaSourceId, pinnedLlamaSource } from '../../engines/builder/pinned-source.ts'
import { findSdist, llamaTreeFromSdist } from '../../engines/builder/pypi-source.ts'

const { values: flags } = parseArgs({
  options: { pypi: { type: 'string' }, tree: { type: 'string' }, commit: { type: 'string' }, write: { type: 'boolean' }, build: { type: 'boolean' } },
})
const cache = engineCacheDir()
mkdirSync(cache, { recursive: true })
const logFile = join(cache, 'rebase.log')
writeFileSync(logFile, '')
const log = (line: string) => {
  console.log(line)
  appendFileSync(logFile, `${line}\n`)
}

try {
  if (!flags.pypi === !flags.tree) throw new EngineBuildError('name the new llama.cpp: --pypi llama-cpp-python==VERSION, or --tree DIR')
  const oldTree = pinnedLlamaSource(cache, log)
  let newTree: string
  let commit: string
  if (flags.pypi) {
    const [project, version] = flags.pypi.split('==')
    if (!project || !version) throw new EngineBuildError('--pypi takes PROJECT==VERSION, e.g. llama-cpp-python==0.3.36')
    const sdist = await findSdist(project, version)
    ;({ tree: newTree, commit } = await llamaTreeFromSdist(cache, sdist, flags.commit, log))
    log(`new tree: llama.cpp ${commit} from ${project} ${version} (sha256 ${sdist.sha256})`)
  } else {
    newTree = flags.tree!
    if (!existsSync(join(newTree, 'CMakeLists.txt'))) throw new EngineBuildError(`${newTree} is not a llama.cpp tree`)
    commit = flags.commit ?? 'unknown'
    log(`new tree: ${newTree}`)
  }
  log(`pinned: ${LLAMA_SOURCE.commit} (${LLAMA_SOURCE.npmPackage}@${LLAMA_SOURCE.version}); ${LLAMA_PATCHES.length} patches`)
  const workDir = join(cache, `rebase-${commit.slice(0, 12)}`)
  const outcomes = rebasePatches({ oldTree, newTree, patches: LLAMA_PATCHES, workDir, log })
  const failed = outcomes.filter((o) => !o.applied)
  log(`${outcomes.length - failed.length} of ${outcomes.length} patches merged; the merged tree is in ${workDir}`)
  if (flags.build && failed.length === 0) {
    const gpu = gpuToolkit()
    const pinned = llamaRecipe(gpu)
    const build = await cmakeBuild(
      {
        ...pinned,
        name: `llama-rebase-${commit.slice(0, 12)}`,
        sourceId: `rebase:${commit}:${llamaSourceId()}`,
        commit,
        sourceVersion: `llama.cpp ${commit.slice(0, 7)} with our patches`,
        source: () => workDir,
      },
      gpu,
      log,
    )
    log(`built; run the tests on it with: HEARTH_LLAMA_BUILD_DIR=${build.dir} npm test`)
  }
  if (flags.write && failed.length === 0) {
    writeRefreshed(outcomes, fileURLToPath(new URL('../../engines/builder/patches/', import.meta.url)))
    log('patches rewritten against the new tree; now change LLAMA_SOURCE in engines/builder/pinned-source.ts and run npm run build:engines')
  } else if (flags.write) {
    log('nothing written: mend the patches that did not merge first (in the scratch repository above), then run again')
  }
  log(`log: ${logFile}`)
  process.exit(failed.length === 0 ? 0 : 1)
} catch (e) {
  if (!(e instanceof EngineBuildError)) throw e
  console.error(`hearth engines:rebase: ${e.message}`)
  process.exit(2)
}
