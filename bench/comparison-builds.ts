/**
 * The builds the benchmarks compare Hearth's with, made from the same pinned source and options
 * and cached beside it (each about ten minutes of two cores, once; a CUDA one much longer):
 * - `llama-upstream`: llama.cpp as upstream ships it, without Hearth's patches, so without the fix
 *   to ggml's AMX kernels (on a CPU with AMX its quantized models crash, and the bench says so);
 * - `llama-without-amx`: Hearth's build with AMX left out, ggml's best path on this CPU without
 *   the matrix units (AVX-512 and its repacked weights), as install builds it where AMX crashes.
 *
 * Where Hearth's own CMake build folder was kept (`HEARTH_KEEP_CMAKE_BUILD=1` at build time), the
 * upstream build is that folder rebuilt with the patches taken back out: only the patched files
 * compile again, minutes instead of a CUDA hour, and nothing else can differ.
 */
import { spawnSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { join } from 'node:path'
import {
  buildKey,
  cmakeBuild,
  compilerId,
  cpuLevels,
  engineCacheDir,
  findBuild,
  nativeCpuFeatures,
  programPath,
  type BuildRecipe,
  type GpuToolkit,
  type NativeBuild,
} from '../engines/builder/cmake-build.ts'
import { llamaRecipe } from '../engines/builder/llama-build.ts'
import { applyPatch, LLAMA_PATCHES, pinnedLlamaSource } from '../engines/builder/pinned-source.ts'

export async function upstreamLlamaBuild(log: (line: string) => void = console.log, gpu: GpuToolkit = 'none'): Promise<NativeBuild> {
  const hearth = llamaRecipe(gpu)
  const { selfTest: _, ...rest } = hearth
  const recipe = { ...rest, name: 'llama-upstream', sourceId: `${hearth.commit}+unpatched`, source: pinnedLlamaSource }
  return findBuild(recipe) ?? rebuiltWithoutPatches(gpu, recipe, log) ?? cmakeBuild(recipe, gpu, log)
}

/** Undefined on a CPU without AMX. */
export async function llamaBuildWithoutAmx(log: (line: string) => void = console.log): Promise<NativeBuild | undefined> {
  const level = cpuLevels(nativeCpuFeatures()).find((l) => l.withheld.length === 1 && l.withheld[0] === 'AMX')
  if (!level) return undefined
  const hearth = llamaRecipe('none')
  return cmakeBuild({ ...hearth, name: 'llama-without-amx', flags: [...hearth.flags, ...level.flags] }, 'none', log)
}

/**
 * Hearth's kept build folder compiled again with the patched source's patches reversed (then
 * applied again), its programs cached as `upstream`; undefined where no folder was kept.
 */
function rebuiltWithoutPatches(gpu: GpuToolkit, upstream: BuildRecipe, log: (line: string) => void): NativeBuild | undefined {
  const hearth = llamaRecipe(gpu)
  const cache = engineCacheDir()
  const buildDir = join(cache, `build-${hearth.name}-${buildKey(hearth)}`)
  if (!existsSync(join(buildDir, 'CMakeCache.txt'))) return undefined
  const tree = hearth.source(cache, log)
  log(`${upstream.name}: Hearth's build folder without its ${LLAMA_PATCHES.length} patches, compiled again`)
  const started = Date.now()
  const reversed: string[] = []
  try {
    for (const patch of [...LLAMA_PATCHES].reverse()) {
      applyPatch(tree, patch, { reverse: true })
      reversed.push(patch)
    }
    const built = spawnSync('cmake', ['--build', buildDir, '--config', 'Release', '-j', String(availableParallelism()), '--target', ...upstream.programs], {
      encoding: 'utf8',
      maxBuffer: 256 * 1024 * 1024,
    })
    if (built.status !== 0) throw new Error(`the rebuild failed: ${(built.stdout + built.stderr).slice(-2000)}`)
    const final = join(cache, `${upstream.name}-${buildKey(upstream)}`)
    const staging = `${final}.partial`
    rmSync(staging, { recursive: true, force: true })
    mkdirSync(staging, { recursive: true })
    for (const program of upstream.programs) copyFileSync(join(buildDir, 'bin', program), programPath(staging, program))
    const manifest: Omit<NativeBuild, 'dir'> = {
      commit: upstream.commit,
      sourceVersion: upstream.sourceVersion,
      gpu,
      cpuFeatures: nativeCpuFeatures(upstream.flags),
      compiler: compilerId(),
      cmakeFlags: upstream.flags,
      builtAt: new Date().toISOString(),
      withheld: [],
    }
    writeFileSync(join(staging, 'build.json'), JSON.stringify(manifest, null, 2))
    rmSync(final, { recursive: true, force: true })
    renameSync(staging, final)
    log(`${upstream.name}: ready in ${Math.round((Date.now() - started) / 1000)} s: ${final}`)
    return { ...manifest, dir: final }
  } finally {
    try {
      for (const patch of reversed.reverse()) applyPatch(tree, patch)
    } catch {
      // A tree left half-patched must not pass for the patched source: it is made again next time.
      rmSync(join(tree, '.hearth-complete'), { force: true })
    }
  }
}
