/**
 * The builds the AMX figures compare Hearth's with, made from the same pinned source and options
 * and cached beside it (each about ten minutes of two cores, once):
 * - `llama-upstream`: llama.cpp as upstream ships it, without Hearth's patches, so without the fix
 *   to ggml's AMX kernels (on a CPU with AMX its quantized models crash, and the bench says so);
 * - `llama-without-amx`: Hearth's build with AMX left out, ggml's best path on this CPU without
 *   the matrix units (AVX-512 and its repacked weights), as install builds it where AMX crashes.
 */
import { cmakeBuild, cpuLevels, nativeCpuFeatures, type NativeBuild } from '../engines/build/cmake-build.ts'
import { llamaRecipe } from '../engines/build/llama-build.ts'
import { pinnedLlamaSource } from '../engines/build/pinned-source.ts'

export function upstreamLlamaBuild(log: (line: string) => void = console.log): Promise<NativeBuild> {
  const hearth = llamaRecipe('none')
  const { selfTest: _, ...recipe } = hearth
  return cmakeBuild({ ...recipe, name: 'llama-upstream', sourceId: `${hearth.commit}+unpatched`, source: pinnedLlamaSource }, 'none', log)
}

/** Undefined on a CPU without AMX. */
export async function llamaBuildWithoutAmx(log: (line: string) => void = console.log): Promise<NativeBuild | undefined> {
  const level = cpuLevels(nativeCpuFeatures()).find((l) => l.withheld.length === 1 && l.withheld[0] === 'AMX')
  if (!level) return undefined
  const hearth = llamaRecipe('none')
  return cmakeBuild({ ...hearth, name: 'llama-without-amx', flags: [...hearth.flags, ...level.flags] }, 'none', log)
}
