/**
 * Building native engine programs for this machine with CMake, once: the CPU's own vector units
 * (GGML_NATIVE), the GPU toolkit it has, and a cache outside the clone keyed by source, options,
 * compiler and CPU, so a machine compiles each engine once and finds it at once afterwards.
 * What it prints is one line per stage (configure, compile with a count, link) with the time taken;
 * CMake's and the compiler's own output goes to a log file, named when something fails.
 */
import { spawn, spawnSync } from 'node:child_process'
import { createWriteStream, type WriteStream } from 'node:fs'
import { createHash } from 'node:crypto'
import { copyFileSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { availableParallelism, homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
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

export interface GpuProbes {
  nvidiaDriver: () => boolean
  /** A GPU the kernel exposes for compute (a DRM render node), which Vulkan could use. */
  renderNode: () => boolean
}

const SYSTEM_PROBES: GpuProbes = {
  nvidiaDriver: hasNvidiaDriver,
  renderNode: () => process.platform === 'linux' && existsSync('/dev/dri') && readdirSync('/dev/dri').some((d) => d.startsWith('renderD')),
}

/**
 * A GPU this machine has but cannot build for, with the toolkit to install: the engines are then
 * built for the CPU, and install says so. Undefined where there is no such GPU, or one was chosen.
 */
export function missingGpuToolkit(gpu: GpuToolkit, env: NodeJS.ProcessEnv = process.env, probes: GpuProbes = SYSTEM_PROBES): string | undefined {
  if (gpu !== 'none' || env.HEARTH_ENGINE_GPU === 'none' || process.platform === 'darwin') return undefined
  if (probes.nvidiaDriver()) {
    return 'an NVIDIA GPU is here, but not the CUDA toolkit (nvcc), so the engines run on the CPU only. Install it (Debian/Ubuntu: sudo apt-get install -y nvidia-cuda-toolkit; or NVIDIA\'s CUDA Toolkit), then run: npm run build:engines'
  }
  if (probes.renderNode()) {
    return 'a GPU is here, but not the Vulkan build tools (glslc and the Vulkan headers), so the engines run on the CPU only. Install them (Debian/Ubuntu: sudo apt-get install -y libvulkan-dev glslc), then run: npm run build:engines'
  }
  return undefined
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

/**
 * Where install put the engines, kept in the project: a server started under another HOME (a
 * service account, a container, a test harness) finds them there. HEARTH_ENGINE_RECORD moves it.
 */
function recordPath(env: NodeJS.ProcessEnv): string {
  return env.HEARTH_ENGINE_RECORD ?? fileURLToPath(new URL('../../.hearth-engines.json', import.meta.url))
}

function recordedCacheDir(env: NodeJS.ProcessEnv): string | undefined {
  try {
    return (JSON.parse(readFileSync(recordPath(env), 'utf8')) as { cacheDir?: string }).cacheDir
  } catch {
    return undefined
  }
}

function recordCacheDir(dir: string, env: NodeJS.ProcessEnv): void {
  try {
    writeFileSync(recordPath(env), `${JSON.stringify({ cacheDir: dir }, null, 2)}\n`)
  } catch {
    // a read-only project: the cache path alone still finds them
  }
}

/**
 * The cached build of `recipe` for this machine, or undefined: the one in `explicitDir`, else in
 * HEARTH_ENGINE_CACHE where that is set, else in the default cache or where install recorded it.
 */
export function findBuild(recipe: BuildRecipe, explicitDir?: string, env: NodeJS.ProcessEnv = process.env): NativeBuild | undefined {
  const name = `${recipe.name}-${buildKey(recipe)}`
  const dirs = explicitDir ? [explicitDir] : env.HEARTH_ENGINE_CACHE ? [join(env.HEARTH_ENGINE_CACHE, name)] : [engineCacheDir(env), recordedCacheDir(env)].filter((d) => d !== undefined).map((d) => join(d, name))
  for (const dir of dirs) {
    const manifest = join(dir, 'build.json')
    if (!existsSync(manifest)) continue
    if (!recipe.programs.every((p) => existsSync(programPath(dir, p)))) continue
    return { ...(JSON.parse(readFileSync(manifest, 'utf8')) as Omit<NativeBuild, 'dir'>), dir }
  }
  return undefined
}

/** Builds `recipe` (or finds it cached); progress goes to `log`, one line per stage. */
export async function cmakeBuild(recipe: BuildRecipe, gpu: GpuToolkit, log: (line: string) => void, env: NodeJS.ProcessEnv = process.env): Promise<NativeBuild> {
  const existing = findBuild(recipe, undefined, env)
  if (existing) {
    recordCacheDir(dirname(existing.dir), env)
    return existing
  }
  requireTool('cmake', ['--version'], 'CMake')
  const compiler = compilerId()
  if (!compiler) throw new EngineBuildError(`no C++ compiler was found. ${installHint()}`)
  const cache = engineCacheDir(env)
  const key = buildKey(recipe)
  const started = Date.now()
  const source = recipe.source(cache, log)
  const buildDir = join(cache, `build-${recipe.name}-${key}`)
  const ninja = answers('ninja', ['--version'])
  mkdirSync(cache, { recursive: true })
  const logFile = join(cache, `build-${recipe.name}-${key}.log`)
  const output = createWriteStream(logFile)
  log(`${recipe.name}: building ${recipe.sourceVersion} for this machine (GPU: ${gpu}), once; full output in ${logFile}`)
  try {
    let stage = Date.now()
    await run('cmake', ['-S', source, '-B', buildDir, ...(ninja ? ['-G', 'Ninja'] : []), ...recipe.flags], output, logFile)
    log(`${recipe.name}: configured (${elapsed(stage)})`)
    stage = Date.now()
    const jobs = String(Math.max(1, availableParallelism()))
    const progress = new CompileProgress(recipe.name, log)
    await run('cmake', ['--build', buildDir, '--config', 'Release', '-j', jobs, '--target', ...recipe.programs], output, logFile, (line) => progress.read(line))
    log(`${recipe.name}: compiled and linked ${recipe.programs.join(', ')} (${elapsed(stage)})`)
  } finally {
    // Flushed before anyone reads it: a failing install exits right after.
    await new Promise<void>((resolve) => output.end(resolve))
  }

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
  rmSync(logFile, { force: true })
  recordCacheDir(cache, env)
  log(`${recipe.name}: ready in ${elapsed(started)}: ${final}`)
  return { ...manifest, dir: final }
}

/**
 * Reads the build tool's `[done/total]` (Ninja) or `[ NN%]` (Make) lines and prints a line each
 * tenth of the way, and one as each program links.
 */
class CompileProgress {
  private shownTenth = 0
  private readonly started = Date.now()

  constructor(
    private readonly name: string,
    private readonly log: (line: string) => void,
  ) {}

  read(line: string): void {
    const counted = line.match(/^\[(\d+)\/(\d+)\]/)
    const percent = counted ? (100 * Number(counted[1])) / Number(counted[2]) : Number(line.match(/^\[\s*(\d+)%\]/)?.[1] ?? NaN)
    const linking = line.match(/Linking CXX executable (?:.*\/)?([\w.-]+)$/)
    if (linking) this.log(`${this.name}: linking ${linking[1]}`)
    if (!Number.isFinite(percent)) return
    const tenth = Math.floor(percent / 10)
    if (tenth <= this.shownTenth || tenth >= 10) return
    this.shownTenth = tenth
    const count = counted ? `${counted[1]}/${counted[2]} steps` : `${Math.round(percent)}%`
    this.log(`${this.name}: compiling, ${count} (${elapsed(this.started)})`)
  }
}

function elapsed(since: number): string {
  const s = Math.round((Date.now() - since) / 1000)
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`
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

/** Runs a build step with its output in the log, each line also given to `onLine`; a failure names the log. */
function run(tool: string, args: string[], output: WriteStream, logFile: string, onLine?: (line: string) => void): Promise<void> {
  output.write(`$ ${tool} ${args.join(' ')}\n`)
  return new Promise((resolve, reject) => {
    const child = spawn(tool, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let partial = ''
    const read = (chunk: Buffer) => {
      output.write(chunk)
      if (!onLine) return
      const lines = (partial + chunk.toString('utf8')).split('\n')
      partial = lines.pop()!
      for (const line of lines) onLine(line)
    }
    child.stdout.on('data', read)
    child.stderr.on('data', (chunk: Buffer) => output.write(chunk))
    child.on('error', (e) => reject(new EngineBuildError(`${tool} could not start: ${e.message}`)))
    child.on('close', (code, signal) => {
      if (code === 0) resolve()
      else reject(new EngineBuildError(`${tool} ${args.slice(0, 2).join(' ')} … failed (exit ${code ?? signal}); its output is in ${logFile}`))
    })
  })
}
