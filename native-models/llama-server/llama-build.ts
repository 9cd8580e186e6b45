/**
 * llama.cpp's own programs (llama-server, llama-bench, llama-quantize), built from the pinned source
 * for this machine: the CPU's vector units (GGML_NATIVE), CUDA where nvcc exists, Vulkan where its
 * headers and shader compiler exist, Metal on macOS. A build is cached outside the clone under a
 * key of source, options, compiler and CPU, so each machine compiles once.
 */
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, homedir } from 'node:os'
import { join } from 'node:path'
import { EngineBuildError, installHint, LLAMA_SOURCE, pinnedLlamaSource, requireTool } from './pinned-source.ts'

export const LLAMA_PROGRAMS = ['llama-server', 'llama-bench', 'llama-quantize'] as const
export type LlamaProgram = (typeof LLAMA_PROGRAMS)[number]

export type GpuToolkit = 'cuda' | 'vulkan' | 'metal' | 'none'

export interface LlamaBuild {
  dir: string
  commit: string
  sourceVersion: string
  gpu: GpuToolkit
  /** The CPU features the build was compiled for, as llama.cpp names them (AVX2, AVX512, …). */
  cpuFeatures: string[]
  compiler: string
  cmakeFlags: string[]
  builtAt: string
}

/** Where engine builds and the source they come from are kept: outside any clone, per user. */
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

export function cmakeFlags(gpu: GpuToolkit): string[] {
  return [
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
  ]
}

/** The cache key: what makes two builds interchangeable. */
export function buildKey(gpu: GpuToolkit): string {
  const hash = createHash('sha256')
  hash.update(LLAMA_SOURCE.commit)
  hash.update(cmakeFlags(gpu).join(' '))
  hash.update(compilerId())
  hash.update(`${process.platform}-${process.arch}`)
  hash.update(cpuIdentity()) // GGML_NATIVE code may not run on another CPU
  return hash.digest('hex').slice(0, 16)
}

/** The cached build for this machine, or undefined when none has been made. */
export function findLlamaBuild(env: NodeJS.ProcessEnv = process.env): LlamaBuild | undefined {
  const explicit = env.HEARTH_LLAMA_BUILD_DIR
  const dir = explicit ?? join(engineCacheDir(env), `llama-${buildKey(gpuToolkit(env))}`)
  const manifest = join(dir, 'build.json')
  if (!existsSync(manifest)) return undefined
  const build = JSON.parse(readFileSync(manifest, 'utf8')) as LlamaBuild
  if (!LLAMA_PROGRAMS.every((p) => existsSync(programPath(dir, p)))) return undefined
  return { ...build, dir }
}

export function programPath(dir: string, program: LlamaProgram): string {
  return join(dir, process.platform === 'win32' ? `${program}.exe` : program)
}

/** Builds (or finds) the engines for this machine; progress goes to `log`. */
export function buildLlama(log: (line: string) => void = console.log, env: NodeJS.ProcessEnv = process.env): LlamaBuild {
  const existing = findLlamaBuild(env)
  if (existing) return existing
  requireTool('cmake', ['--version'], 'CMake')
  const compiler = compilerId()
  if (!compiler) throw new EngineBuildError(`no C++ compiler was found. ${installHint()}`)
  const cache = engineCacheDir(env)
  const gpu = gpuToolkit(env)
  const key = buildKey(gpu)
  const source = pinnedLlamaSource(cache, log)
  const buildDir = join(cache, `build-${key}`)
  const flags = cmakeFlags(gpu)
  const ninja = answers('ninja', ['--version'])
  log(`building llama.cpp ${LLAMA_SOURCE.commit.slice(0, 7)} for this machine (GPU: ${gpu}); this takes about 10 minutes once`)
  run('cmake', ['-S', source, '-B', buildDir, ...(ninja ? ['-G', 'Ninja'] : []), ...flags])
  const jobs = String(Math.max(1, availableParallelism()))
  run('cmake', ['--build', buildDir, '--config', 'Release', '-j', jobs, '--target', ...LLAMA_PROGRAMS])

  const staging = join(cache, `llama-${key}.partial`)
  rmSync(staging, { recursive: true, force: true })
  mkdirSync(staging, { recursive: true })
  for (const program of LLAMA_PROGRAMS) {
    const built = [join(buildDir, 'bin', program), join(buildDir, 'bin', 'Release', program)].map((p) =>
      process.platform === 'win32' ? `${p}.exe` : p,
    )
    const found = built.find((p) => existsSync(p))
    if (!found) throw new EngineBuildError(`the build finished without ${program}`)
    copyFileSync(found, programPath(staging, program))
  }
  const manifest: Omit<LlamaBuild, 'dir'> = {
    commit: LLAMA_SOURCE.commit,
    sourceVersion: `${LLAMA_SOURCE.npmPackage}@${LLAMA_SOURCE.version}`,
    gpu,
    cpuFeatures: nativeCpuFeatures(),
    compiler,
    cmakeFlags: flags,
    builtAt: new Date().toISOString(),
  }
  writeFileSync(join(staging, 'build.json'), JSON.stringify(manifest, null, 2))
  const final = join(cache, `llama-${key}`)
  rmSync(final, { recursive: true, force: true })
  renameSync(staging, final)
  rmSync(buildDir, { recursive: true, force: true })
  log(`llama.cpp engines ready in ${final}`)
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

export { EngineBuildError }
