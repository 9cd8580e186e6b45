/**
 * llama.cpp's own programs (llama-server, llama-bench, llama-quantize), built from the pinned source
 * for this machine (see cmake-build.ts for the how and the cache).
 */
import { cmakeBuild, findBuild, ggmlFlags, gpuToolkit, programPath, type BuildRecipe, type GpuToolkit, type NativeBuild } from './cmake-build.ts'
import { selfTestLlama } from './self-test/engine-self-test.ts'
import { LLAMA_SOURCE, llamaSourceId, patchedLlamaSource } from './pinned-source.ts'

export { engineCacheDir, programPath, type GpuToolkit, type NativeBuild as LlamaBuild } from './cmake-build.ts'
export { EngineBuildError } from './pinned-source.ts'

// rpc-server: the lender's side of llama.cpp's RPC backend, for a model pooled over machines (docs/pool.md).
export const LLAMA_PROGRAMS = ['llama-server', 'llama-bench', 'llama-quantize', 'ggml-rpc-server'] as const

export function llamaRecipe(gpu: GpuToolkit, portable = false): BuildRecipe {
  if (portable) {
    const native = llamaRecipe(gpu)
    return {
      ...native,
      name: 'llama-portable',
      portable,
      flags: [...ggmlFlags(gpu, true), ...native.flags.filter((f) => f.startsWith('-DLLAMA_') || f === '-DGGML_RPC=ON')],
    }
  }
  return {
    name: 'llama',
    sourceId: llamaSourceId(),
    commit: LLAMA_SOURCE.commit,
    sourceVersion: `${LLAMA_SOURCE.npmPackage}@${LLAMA_SOURCE.version}`,
    programs: LLAMA_PROGRAMS,
    flags: [
      '-DCMAKE_BUILD_TYPE=Release',
      '-DGGML_NATIVE=ON',
      '-DBUILD_SHARED_LIBS=OFF',
      '-DLLAMA_BUILD_TESTS=OFF',
      '-DLLAMA_BUILD_EXAMPLES=OFF',
      // The embedded web UI is either built with npm or downloaded at build time; Hearth has its own.
      '-DLLAMA_BUILD_UI=OFF',
      '-DLLAMA_USE_PREBUILT_UI=OFF',
      // Engines talk to Hearth on loopback only; nothing here fetches over HTTPS.
      '-DLLAMA_OPENSSL=OFF',
      `-DGGML_CUDA=${gpu === 'cuda' ? 'ON' : 'OFF'}`,
      `-DGGML_VULKAN=${gpu === 'vulkan' ? 'ON' : 'OFF'}`,
      `-DGGML_METAL=${gpu === 'metal' ? 'ON' : 'OFF'}`,
      // llama-server takes `--rpc` to borrow other machines' memory; rpc-server lends this one's.
      '-DGGML_RPC=ON',
    ],
    source: patchedLlamaSource,
    selfTest: (dir, scratch, onRun) => selfTestLlama((program) => programPath(dir, program), scratch, onRun, gpu === 'none' ? {} : { gpu }),
  }
}

/** The cached build for this machine (HEARTH_LLAMA_BUILD_DIR names one by hand), or undefined. */
export function findLlamaBuild(env: NodeJS.ProcessEnv = process.env): NativeBuild | undefined {
  return findBuild(llamaRecipe(gpuToolkit(env)), env.HEARTH_LLAMA_BUILD_DIR, env)
}

export function buildLlama(
  log: (line: string) => void = console.log,
  env: NodeJS.ProcessEnv = process.env,
  portable = false,
  without?: string,
): Promise<NativeBuild> {
  const gpu = gpuToolkit(env)
  return cmakeBuild(llamaRecipe(gpu, portable), gpu, log, env, without)
}
