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
import {
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { availableParallelism, homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { stampBuildUsed } from './engine-cache-tidy.ts'
import { EngineBuildError, installHint, requireTool } from './pinned-source.ts'
import { selfTestVerdict, type SelfTestReport, type SelfTestRun } from './self-test/engine-self-test.ts'

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
  /**
   * What the build leaves out because its self-test crashed with it (`AMX`, `AVX512`, `native`, or a
   * portable build's CPU variant): empty for a build that runs with all this CPU has.
   */
  withheld?: string[]
  /** The self-test this build passed; absent on builds made before there was one. */
  selfTest?: SelfTestReport
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
  /**
   * Runs the programs built into `dir` on every weight type (scratch files in `scratch`); a build
   * whose self-test crashes is made again without the CPU feature behind it.
   */
  selfTest?: (dir: string, scratch: string, onRun: (run: SelfTestRun) => void) => SelfTestReport
}

/** One way to build for this CPU: the features it leaves out, and the CMake options that do so. */
export interface CpuLevel {
  withheld: string[]
  flags: string[]
  /** Said by install when it falls back to this level. */
  description: string
}

/**
 * The builds to fall back on when a self-test crashes, best first: all this CPU has; without AMX's
 * matrix units; without AVX-512 (and AMX, which ggml uses only beside it); then ggml's generic
 * build for the architecture (AVX2 on x86-64). Explicit -mno-* options win over -march=native.
 */
export function cpuLevels(features: readonly string[], arch: string = process.arch): CpuLevel[] {
  const levels: CpuLevel[] = [{ withheld: [], flags: [], description: 'with all this CPU has' }]
  const amx = features.includes('AMX_INT8') ? ['-mno-amx-tile', '-mno-amx-int8', '-mno-amx-bf16'] : []
  const compilerFlags = (options: string[]) => [`-DCMAKE_C_FLAGS=${options.join(' ')}`, `-DCMAKE_CXX_FLAGS=${options.join(' ')}`]
  if (arch === 'x64' && amx.length > 0) levels.push({ withheld: ['AMX'], flags: compilerFlags(amx), description: 'without AMX' })
  if (arch === 'x64' && features.includes('AVX512')) {
    levels.push({ withheld: [...(amx.length > 0 ? ['AMX'] : []), 'AVX512'], flags: compilerFlags([...amx, '-mno-avx512f']), description: 'without AVX-512' })
  }
  levels.push({
    withheld: ['native'],
    flags: ['-DGGML_NATIVE=OFF'],
    description: `for any ${arch === 'x64' ? 'x86-64 CPU with AVX2' : `${arch} CPU`} (not this one's own features)`,
  })
  return levels
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
    return "an NVIDIA GPU is here, but not the CUDA toolkit (nvcc), so the engines run on the CPU only. Install it (Debian/Ubuntu: sudo apt-get install -y nvidia-cuda-toolkit; or NVIDIA's CUDA Toolkit), then run: npm run build:engines"
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
  const dirs = explicitDir
    ? [explicitDir]
    : env.HEARTH_ENGINE_CACHE
      ? [join(env.HEARTH_ENGINE_CACHE, name)]
      : [engineCacheDir(env), recordedCacheDir(env)].filter((d) => d !== undefined).map((d) => join(d, name))
  for (const dir of dirs) {
    const manifest = join(dir, 'build.json')
    if (!existsSync(manifest)) continue
    if (!recipe.programs.every((p) => existsSync(programPath(dir, p)))) continue
    stampBuildUsed(dir)
    return { ...(JSON.parse(readFileSync(manifest, 'utf8')) as Omit<NativeBuild, 'dir'>), dir }
  }
  return undefined
}

/**
 * Builds `recipe` (or finds it cached) and runs its self-test; progress goes to `log`, one line
 * per stage. A build whose self-test crashes is made again at the next CPU level (cpuLevels), or,
 * for a portable build, without the CPU variant ggml chose; the cache keeps the first that passes.
 */
export async function cmakeBuild(
  recipe: BuildRecipe,
  gpu: GpuToolkit,
  log: (line: string) => void,
  env: NodeJS.ProcessEnv = process.env,
  /** A CPU feature to build without from the start (`amx`, `avx512`, `native`): the way out of a crash the self-test did not foresee. */
  without?: string,
): Promise<NativeBuild> {
  const cache = engineCacheDir(env)
  const key = buildKey(recipe)
  const existing = without ? undefined : findBuild(recipe, undefined, env)
  let firstLevel = 0
  if (existing) {
    if (existing.selfTest || !recipe.selfTest) {
      recordCacheDir(dirname(existing.dir), env)
      return existing
    }
    // Built before there was a self-test: it counts as ready once it has passed one.
    const report = runSelfTest(recipe, existing.dir, join(cache, `self-test-${recipe.name}-${key}`), log)
    const { dir, ...manifest } = existing
    if (!crashed(report)) {
      writeFileSync(join(dir, 'build.json'), JSON.stringify({ ...manifest, selfTest: report }, null, 2))
      recordCacheDir(dirname(dir), env)
      return { ...existing, selfTest: report }
    }
    firstLevel = 1
  }
  requireTool('cmake', ['--version'], 'CMake')
  const compiler = compilerId()
  if (!compiler) throw new EngineBuildError(`no C++ compiler was found. ${installHint()}`)
  const started = Date.now()
  const levels = recipe.portable ? cpuLevels([]).slice(0, 1) : cpuLevels(nativeCpuFeatures())
  if (without) {
    const wanted = without.toUpperCase().replace('-', '')
    firstLevel = levels.findIndex((l) => l.withheld.includes(wanted) || l.withheld.includes(wanted.toLowerCase()))
    const choices = levels
      .flatMap((l) => l.withheld.at(-1) ?? [])
      .map((w) => w.toLowerCase())
      .join(', ')
    if (firstLevel < 0) throw new EngineBuildError(`${recipe.name} for this CPU has no ${without} to leave out; it can be built without: ${choices}`)
  }
  const failures: string[] = []
  for (const [i, level] of levels.entries()) {
    if (i < firstLevel) continue
    if (i > 0) log(`${recipe.name}: building again ${level.description}`)
    const flags = [...recipe.flags, ...level.flags]
    const staging = await compileIntoStaging(recipe, gpu, flags, log, env)
    const withheld = [...level.withheld]
    let report = recipe.selfTest && runSelfTest(recipe, staging, `${staging}-self-test`, log)
    // A portable build carries a backend per CPU level: the one ggml chose is left out and the next best tried.
    while (report && crashed(report) && recipe.portable && report.cpuVariant && removeCpuVariant(staging, report.cpuVariant)) {
      withheld.push(report.cpuVariant)
      log(`${recipe.name}: left out the ${report.cpuVariant} CPU backend`)
      report = runSelfTest(recipe, staging, `${staging}-self-test`, log)
    }
    // Only a crash says the CPU is to blame; a run that fails otherwise is said, and the build kept.
    if (!report || !crashed(report)) {
      const features = recipe.portable ? ['every CPU level, chosen at run time'] : nativeCpuFeatures(flags)
      const manifest: Omit<NativeBuild, 'dir'> = {
        commit: recipe.commit,
        sourceVersion: recipe.sourceVersion,
        gpu,
        cpuFeatures: features,
        compiler,
        cmakeFlags: flags,
        builtAt: new Date().toISOString(),
        withheld,
        ...(report ? { selfTest: report } : {}),
      }
      writeFileSync(join(staging, 'build.json'), JSON.stringify(manifest, null, 2))
      const final = join(cache, `${recipe.name}-${key}`)
      rmSync(final, { recursive: true, force: true })
      renameSync(staging, final)
      recordCacheDir(cache, env)
      const fellBack = withheld.length > 0 ? ` (${withheld.join(', ')} left out: the self-test crashed with ${withheld.length > 1 ? 'them' : 'it'})` : ''
      log(`${recipe.name}: ready in ${elapsed(started)}${fellBack}: ${final}`)
      return { ...manifest, dir: final }
    }
    failures.push(`${level.description}: ${selfTestVerdict(report)}`)
    rmSync(staging, { recursive: true, force: true })
  }
  throw new EngineBuildError(
    `${recipe.name} does not run on this CPU however it is built (${failures.join('; ')}). Please report it with the output of: grep -m1 flags /proc/cpuinfo`,
  )
}

/** A run on the CPU died: building without a CPU feature may cure it (a GPU's crash it would not). */
function crashed(report: SelfTestReport): boolean {
  return report.runs.some((r) => r.outcome === 'crashed' && !r.gpu)
}

/** Runs the recipe's self-test on the programs in `dir`, saying what it does and what it found. */
function runSelfTest(recipe: BuildRecipe, dir: string, scratch: string, log: (line: string) => void): SelfTestReport {
  log(`${recipe.name}: self-test: every weight type at 1 and 2 threads (and on the GPU, for a GPU's build)`)
  const report = recipe.selfTest!(dir, scratch, (run) => {
    const where = run.gpu ? 'on the GPU' : `at ${run.threads} thread${run.threads > 1 ? 's' : ''}`
    if (run.outcome !== 'ran') log(`${recipe.name}:   ${run.weightType} ${where}: ${run.outcome === 'crashed' ? `killed by ${run.signal}` : run.detail}`)
  })
  log(`${recipe.name}: ${selfTestVerdict(report)}`)
  return report
}

/** Configures and compiles `recipe` with `flags`, and copies its programs (and a portable build's libraries) into a staging folder. */
async function compileIntoStaging(recipe: BuildRecipe, gpu: GpuToolkit, flags: string[], log: (line: string) => void, env: NodeJS.ProcessEnv): Promise<string> {
  const cache = engineCacheDir(env)
  const key = buildKey(recipe)
  const source = recipe.source(cache, log)
  const buildDir = join(cache, `build-${recipe.name}-${key}`)
  const ninja = answers('ninja', ['--version'])
  mkdirSync(cache, { recursive: true })
  const logFile = join(cache, `build-${recipe.name}-${key}.log`)
  const output = createWriteStream(logFile)
  log(`${recipe.name}: building ${recipe.sourceVersion} for this machine (GPU: ${gpu}), once; full output in ${logFile}`)
  try {
    let stage = Date.now()
    await run('cmake', ['-S', source, '-B', buildDir, ...(ninja ? ['-G', 'Ninja'] : []), ...flags], output, logFile)
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
  // Kept on request: the benchmark rebuilds it without Hearth's patches in minutes (comparison-builds.ts).
  if (!env.HEARTH_KEEP_CMAKE_BUILD) rmSync(buildDir, { recursive: true, force: true })
  rmSync(logFile, { force: true })
  return staging
}

/** Removes a portable build's CPU backend for one variant (`libggml-cpu-<variant>.so`); false if there is none. */
function removeCpuVariant(dir: string, variant: string): boolean {
  const library = readdirSync(dir).find((f) => new RegExp(`^(lib)?ggml-cpu-${variant}\\.(so|dylib|dll)$`).test(f))
  if (!library) return false
  rmSync(join(dir, library))
  return true
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
 * The vector extensions a build with these CMake options compiles for: those the compiler turns on
 * for -march=native (less what CMAKE_CXX_FLAGS leaves out; ggml's generic build where the options
 * turn GGML_NATIVE off), named as llama.cpp's own `system_info` names them.
 */
export function nativeCpuFeatures(cmakeFlags: readonly string[] = []): string[] {
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
  const generic = cmakeFlags.findLast((f) => f.startsWith('-DGGML_NATIVE=')) === '-DGGML_NATIVE=OFF'
  const leftOut =
    cmakeFlags
      .findLast((f) => f.startsWith('-DCMAKE_CXX_FLAGS='))
      ?.slice('-DCMAKE_CXX_FLAGS='.length)
      .split(' ') ?? []
  const options = generic ? (process.arch === 'x64' ? ['-march=x86-64-v3'] : []) : ['-march=native', ...leftOut]
  const result = spawnSync('c++', [...options, '-dM', '-E', '-x', 'c++', '/dev/null'], { encoding: 'utf8' })
  const defined = new Set((result.stdout ?? '').split('\n').map((l) => l.split(' ')[1]))
  return features.filter(([macro]) => defined.has(macro)).map(([, name]) => name)
}

export function compilerId(): string {
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
