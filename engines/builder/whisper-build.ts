/**
 * whisper.cpp's own server (and CLI), built for this machine from the pinned whisper.cpp with the
 * pinned llama.cpp's ggml (see cmake-build.ts for the how and the cache).
 */
import { cmakeBuild, findBuild, ggmlFlags, gpuToolkit, programPath, type BuildRecipe, type GpuToolkit, type NativeBuild } from './cmake-build.ts'
import { selfTestWhisper } from './self-test/engine-self-test.ts'
import { LLAMA_SOURCE, ownWhisperFilesId, pinnedWhisperSource, WHISPER_SOURCE, whisperPatchesId } from './pinned-source.ts'

export const WHISPER_PROGRAMS = ['whisper-server', 'whisper-cli', 'whisper-quantize', 'hearth-whisper-self-test'] as const

export function whisperRecipe(gpu: GpuToolkit, portable = false): BuildRecipe {
  return {
    name: portable ? 'whisper-portable' : 'whisper',
    portable,
    sourceId: `${WHISPER_SOURCE.npmPackage}@${WHISPER_SOURCE.version}+ggml@${LLAMA_SOURCE.commit}+patches@${whisperPatchesId()}+own@${ownWhisperFilesId()}`,
    commit: LLAMA_SOURCE.commit,
    sourceVersion: `whisper.cpp ${WHISPER_SOURCE.whisperVersion} (${WHISPER_SOURCE.npmPackage}@${WHISPER_SOURCE.version}), ggml of llama.cpp ${LLAMA_SOURCE.commit.slice(0, 7)}`,
    programs: WHISPER_PROGRAMS,
    // Our CMakeLists.txt (engines/builder/whisper/) builds what Hearth runs, nothing else.
    flags: ggmlFlags(gpu, portable),
    source: pinnedWhisperSource,
    selfTest: (dir, scratch, onRun) => selfTestWhisper((program) => programPath(dir, program), scratch, onRun, gpu === 'none' ? {} : { gpu }),
  }
}

/** The cached build for this machine (HEARTH_WHISPER_BUILD_DIR names one by hand), or undefined. */
export function findWhisperBuild(env: NodeJS.ProcessEnv = process.env): NativeBuild | undefined {
  return findBuild(whisperRecipe(gpuToolkit(env)), env.HEARTH_WHISPER_BUILD_DIR, env)
}

export function buildWhisper(
  log: (line: string) => void = console.log,
  env: NodeJS.ProcessEnv = process.env,
  portable = false,
  without?: string,
): Promise<NativeBuild> {
  const gpu = gpuToolkit(env)
  return cmakeBuild(whisperRecipe(gpu, portable), gpu, log, env, without)
}
