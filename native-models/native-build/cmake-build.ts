/**
 * Building native engine programs for this machine with CMake, once: the CPU's own vector units
 * (GGML_NATIVE), the GPU toolkit it has, and a cache outside the clone keyed by source, options,
 * compiler and CPU, so a machine compiles each engine once and finds it at once afterwards.
 */
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { copyFileSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { availableParallelism, homedir } from 'node:os'
import { join } from 'node:path'
import { EngineBuildError, installHint, requireTool } from './pinned-source.ts'

export type GpuToolkit = 'cuda' | 'vulkan' | 'metal' | 'none'

/** What a cached build says of itself (`build.json` beside its programs). */
export interface NativeBuild {
  dir: string
  /** The source it was built from: the llama.cpp commit (and for whisper, whisper.cpp's version too). */
  commit: string
  sourceVersion: string
  gpu: GpuToolkit
  /** The CPU features the build was compiled for, as llama.cpp names them (AVX2, AVX512, …). */
  cpuFeatures: string[]
  compiler: string
  cmakeFlags: string[]
  builtAt: string
}

export interface BuildRecipe {
  /** Names the cache folder: `<name>-<key>`. */
  name: string
  /** Identifies the source exactly (commits, versions). */
  sourceId: string
  commit: string
  sourceVersion: string
  programs: readonly string[]
  flags: string[]
  /** Makes the source tree (fetching and checking it) and returns its path; called only when building. */
  source: (cacheDir: string, log: (line: string) => void) => string
  /**
   * For an installer: not for this CPU but for every x86-64 level (or ARM profile), ggml choosing
   * the best at run time (GGML_CPU_ALL_VARIANTS with GGML_BACKEND_DL); the programs come with their
   * shared libraries, found beside them.
   */
  portable?: boolean
}

/** Where engine builds and the sources they come from are kept: outside any clone, per user. */
export function engineCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.HEARTH_ENGINE_CACHE) return env.HEARTH_ENGINE_CACHE
  if (process.platform === 'darwin') return join(homedir(), 'Library/Caches/Hearth/engines')
  if (process.platform === 'win32') return join(env.LOCALAPPDATA ?? homedir(), 'Hearth/engines')
  return join(env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'hearth/engines')
}

/** Which GPU toolkit this machine can build for; HEARTH_ENGINE_GPU=none|cuda|vulkan overrides. */
export function gpuToolkit(env: NodeJS.ProcessEnv = process.env): GpuToolkit {
  const wanted = env.HEARTH_ENGINE_GPU
  if (wanted === 'none' || wanted === 'cuda' || wanted === 'vulkan' || wanted === 'metal') return wanted
  if (process.platform === 'darwin') return 'metal'
  // CUDA kernels take an hour to compile: worth it only where an NVIDIA driver is there to use them.
  if (answers('nvcc', ['--version']) && hasNvidiaDriver()) return 'cuda'
  const vulkanHeaders = ['/usr/include/vulkan/vulkan.h', join(env.VULKAN_SDK ?? '/nonexistent', 'include/vulkan/vulkan.h')]
  if (answers('glslc', ['--version']) && vulkanHeaders.some((h) => existsSync(h))) return 'vulkan'
  return 'none'
}

/** The ggml options every engine shares: for this CPU, or portable (every CPU level, chosen at run time). */
export function ggmlFlags(gpu: GpuToolkit, portable = false): string[] {
  return [
    '-DCMAKE_BUILD_TYPE=Release',
    ...(portable ? portableFlags() : ['-DGGML_NATIVE=ON', '-DBUILD_SHARED_LIBS=OFF']),
    `-DGGML_CUDA=${gpu === 'cuda' ? 'ON' : 'OFF'}`,
    `-DGGML_VULKAN=${gpu === 'vulkan' ? 'ON' : 'OFF'}`,
    `-DGGML_METAL=${gpu === 'metal' ? 'ON' : 'OFF'}`,
  ]
}

/** One build for every CPU: each CPU backend variant is a library loaded at run time; programs find their libraries beside them. */
export function portableFlags(): string[] {
  const origin = process.platform === 'darwin' ? '@loader_path' : '$ORIGIN'
  return [
    '-DGGML_NATIVE=OFF',
    '-DGGML_BACKEND_DL=ON',
    '-DGGML_CPU_ALL_VARIANTS=ON',
    '-DBUILD_SHARED_LIBS=ON',
    `-DCMAKE_INSTALL_RPATH=${origin}`,
    '-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON',
  ]
}

/** The cache key: what makes two builds interchangeable. */
export function buildKey(recipe: Pick<BuildRecipe, 'sourceId' | 'flags' | 'portable'>): string {
  const hash = createHash('sha256')
  hash.update(recipe.sourceId)
  hash.update(recipe.flags.join(' '))
  hash.update(compilerId())
  hash.update(`${process.platform}-${process.arch}`)
  if (!recipe.portable) hash.update(cpuIdentity()) // GGML_NATIVE code may not run on another CPU
  return hash.digest('hex').slice(0, 16)
}

export function programPath(dir: string, program: string): string {
  return join(dir, process.platform === 'win32' ? `${program}.exe` : program)
}

/** The cached build of `recipe` for this machine (or the one in `explicitDir`), or undefined. */
export function findBuild(recipe: BuildRecipe, explicitDir?: string, env: NodeJS.ProcessEnv = process.env): NativeBuild | undefined {
  const dir = explicitDir ?? join(engineCacheDir(env), `${recipe.name}-${buildKey(recipe)}`)
  const manifest = join(dir, 'build.json')
  if (!existsSync(manifest)) return undefined
  if (!recipe.programs.every((p) => existsSync(programPath(dir, p)))) return undefined
  return { ...(JSON.parse(readFileSync(manifest, 'utf8')) as Omit<NativeBuild, 'dir'>), dir }
}

/** Builds `recipe` (or finds it cached); progress goes to `log`. */
export function cmakeBuild(recipe: BuildRecipe, gpu: GpuToolkit, log: (line: string) => void, env: NodeJS.ProcessEnv = process.env): NativeBuild {
  const existing = findBuild(recipe, undefined, env)
  if (existing) return existing
  requireTool('cmake', ['--version'], 'CMake')
  const compiler = compilerId()
  if (!compiler) throw new EngineBuildError(`no C++ compiler was found. ${installHint()}`)
  const cache = engineCacheDir(env)
  const key = buildKey(recipe)
  const source = recipe.source(cache, log)
  const buildDir = join(cache, `build-${recipe.name}-${key}`)
  const ninja = answers('ninja', ['--version'])
  log(`building ${recipe.name} (${recipe.sourceVersion}) for this machine (GPU: ${gpu}); this takes several minutes, once`)
  run('cmake', ['-S', source, '-B', buildDir, ...(ninja ? ['-G', 'Ninja'] : []), ...recipe.flags])
  const jobs = String(Math.max(1, availableParallelism()))
  run('cmake', ['--build', buildDir, '--config', 'Release', '-j', jobs, '--target', ...recipe.programs])

  const staging = join(cache, `${recipe.name}-${key}.partial`)
  rmSync(staging, { recursive: true, force: true })
  mkdirSync(staging, { recursive: true })
  for (const program of recipe.programs) {
    const found = [join(buildDir, 'bin', program), join(buildDir, 'bin', 'Release', program)]
      .map((p) => (process.platform === 'win32' ? `${p}.exe` : p))
      .find((p) => existsSync(p))
    if (!found) throw new EngineBuildError(`the build finished without ${program}`)
    copyFileSync(found, programPath(staging, program))
  }
  if (recipe.portable) {
    // The ggml backends (one per CPU level, and the GPU's) and the libraries the programs link.
    const libraries = join(buildDir, 'bin')
    for (const file of readdirSync(libraries).filter((f) => /\.(so(\.\d+)*|dylib|dll)$/.test(f))) {
      const from = join(libraries, file)
      // Versioned names stay links to the one library, not copies of it.
      if (lstatSync(from).isSymbolicLink()) symlinkSync(readlinkSync(from), join(staging, file))
      else copyFileSync(from, join(staging, file))
    }
  }
  const manifest: Omit<NativeBuild, 'dir'> = {
    commit: recipe.commit,
    sourceVersion: recipe.sourceVersion,
    gpu,
    cpuFeatures: recipe.portable ? ['every CPU level, chosen at run time'] : nativeCpuFeatures(),
    compiler,
    cmakeFlags: recipe.flags,
    builtAt: new Date().toISOString(),
  }
  writeFileSync(join(staging, 'build.json'), JSON.stringify(manifest, null, 2))
  const final = join(cache, `${recipe.name}-${key}`)
  rmSync(final, { recursive: true, force: true })
  renameSync(staging, final)
  rmSync(buildDir, { recursive: true, force: true })
  log(`${recipe.name} ready in ${final}`)
  return { ...manifest, dir: final }
}

/**
 * The vector extensions GGML_NATIVE compiles for: those the compiler turns on for -march=native,
 * named as llama.cpp's own `system_info` names them.
 */
function nativeCpuFeatures(): string[] {
  const features: Array<[string, string]> = [
    ['__SSE3__', 'SSE3'],
    ['__SSSE3__', 'SSSE3'],
    ['__AVX__', 'AVX'],
    ['__AVX2__', 'AVX2'],
    ['__FMA__', 'FMA'],
    ['__F16C__', 'F16C'],
    ['__AVX512F__', 'AVX512'],
    ['__AVX512VNNI__', 'AVX512_VNNI'],
    ['__AVX512BF16__', 'AVX512_BF16'],
    ['__AVXVNNI__', 'AVX_VNNI'],
    ['__AMX_INT8__', 'AMX_INT8'],
    ['__ARM_NEON', 'NEON'],
    ['__ARM_FEATURE_DOTPROD', 'DOTPROD'],
    ['__ARM_FEATURE_MATMUL_INT8', 'MATMUL_INT8'],
    ['__ARM_FEATURE_SVE', 'SVE'],
  ]
  const result = spawnSync('c++', ['-march=native', '-dM', '-E', '-x', 'c++', '/dev/null'], { encoding: 'utf8' })
  const defined = new Set((result.stdout ?? '').split('\n').map((l) => l.split(' ')[1]))
  return features.filter(([macro]) => defined.has(macro)).map(([, name]) => name)
}

function compilerId(): string {
  for (const cxx of [process.env.CXX, 'c++', 'g++', 'clang++'].filter(Boolean) as string[]) {
    const out = spawnSync(cxx, ['--version'], { encoding: 'utf8' })
    if (out.status === 0) return out.stdout.split('\n')[0]!.trim()
  }
  return ''
}

/** The CPU model and feature flags (Linux); a build for one CPU is not reused on another. */
function cpuIdentity(): string {
  try {
    const info = readFileSync('/proc/cpuinfo', 'utf8')
    return [/^model name\s*:.*$/m, /^flags\s*:.*$/m].map((re) => info.match(re)?.[0] ?? '').join('\n')
  } catch {
    return `${process.platform}-${process.arch}`
  }
}

function hasNvidiaDriver(): boolean {
  return existsSync('/proc/driver/nvidia/version') || answers('nvidia-smi', ['-L'])
}

function answers(tool: string, args: string[]): boolean {
  return spawnSync(tool, args, { stdio: 'ignore' }).status === 0
}

function run(tool: string, args: string[]): void {
  const result = spawnSync(tool, args, { stdio: ['ignore', 'inherit', 'inherit'] })
  if (result.status !== 0) throw new EngineBuildError(`${tool} ${args.slice(0, 2).join(' ')} … failed (exit ${result.status ?? result.signal})`)
}
