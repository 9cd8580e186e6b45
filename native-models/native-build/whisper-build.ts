/**
 * whisper.cpp's own server (and CLI), built for this machine from the pinned whisper.cpp with the
 * pinned llama.cpp's ggml (see cmake-build.ts for the how and the cache).
 */
import { cmakeBuild, findBuild, ggmlFlags, gpuToolkit, type BuildRecipe, type GpuToolkit, type NativeBuild } from './cmake-build.ts'
import { LLAMA_SOURCE, pinnedWhisperSource, WHISPER_SOURCE, whisperPatchesId } from './pinned-source.ts'

export const WHISPER_PROGRAMS = ['whisper-server', 'whisper-cli'] as const
/** Bump when native-build/whisper/CMakeLists.txt changes, so cached builds are made anew. */
const WHISPER_CMAKE_VERSION = 2

export function whisperRecipe(gpu: GpuToolkit, portable = false): BuildRecipe {
  return {
    name: portable ? 'whisper-portable' : 'whisper',
    portable,
    sourceId: `${WHISPER_SOURCE.npmPackage}@${WHISPER_SOURCE.version}+ggml@${LLAMA_SOURCE.commit}+patches@${whisperPatchesId()}`,
    commit: LLAMA_SOURCE.commit,
    sourceVersion: `whisper.cpp ${WHISPER_SOURCE.whisperVersion} (${WHISPER_SOURCE.npmPackage}@${WHISPER_SOURCE.version}), ggml of llama.cpp ${LLAMA_SOURCE.commit.slice(0, 7)}`,
    programs: WHISPER_PROGRAMS,
    flags: [
      ...ggmlFlags(gpu, portable),
      // Our CMakeLists.txt (native-build/whisper/) builds the server and the CLI, nothing else.
      `-DHEARTH_WHISPER_CMAKE=${WHISPER_CMAKE_VERSION}`,
    ],
    source: pinnedWhisperSource,
  }
}

/** The cached build for this machine (HEARTH_WHISPER_BUILD_DIR names one by hand), or undefined. */
export function findWhisperBuild(env: NodeJS.ProcessEnv = process.env): NativeBuild | undefined {
  return findBuild(whisperRecipe(gpuToolkit(env)), env.HEARTH_WHISPER_BUILD_DIR, env)
}

export function buildWhisper(log: (line: string) => void = console.log, env: NodeJS.ProcessEnv = process.env, portable = false): Promise<NativeBuild> {
  const gpu = gpuToolkit(env)
  return cmakeBuild(whisperRecipe(gpu, portable), gpu, log, env)
}
