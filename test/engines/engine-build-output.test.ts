/**
 * What `npm install` (`npm run build:engines`) prints while it builds the engines: one line per
 * stage with the time taken and a count while compiling, never CMake's or the compiler's own
 * output, which goes to a log file named when a step fails. CMake is replaced by a script that
 * talks like Ninja under CMake; the sources are the real pinned ones, from the engine cache.
 */
import { spawnSync } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { cpuLevels, engineCacheDir, nativeCpuFeatures } from '../../engines/builder/cmake-build.ts'
import { patchedLlamaSource, pinnedSourceNames, pinnedWhisperSource } from '../../engines/builder/pinned-source.ts'
import { PROJECT_ROOT, postJson, startTestServer } from '../support/server-process.ts'
import { writeTinyLlama } from '../support/tiny-models.ts'
import { llamaBuild } from '../support/upstream-servers.ts'
import { cannotRun, describeIf } from '../support/skips.ts'

const realCache = engineCacheDir()
// Today's pinned sources (not whatever earlier versions left there). A cache whose builds are
// cached may lack them (the cache's tidying removes trees no build of the pins then current
// needs): made again from the pinned packages, offline where those are cached.
try {
  patchedLlamaSource(realCache, () => undefined)
  pinnedWhisperSource(realCache, () => undefined)
} catch {
  // not here and not to be had: the check below says so
}
const sources = pinnedSourceNames().filter((name) => /^(whisper-)?src-/.test(name) && existsSync(join(realCache, name)))
const haveSources = sources.some((n) => n.startsWith('src-') && n.includes('-patched-')) && sources.some((n) => n.startsWith('whisper-src-'))
if (!haveSources) cannotRun('the pinned engine sources are not in the engine cache (npm run build:engines); the build output suite cannot run')

/**
 * A `cmake` that configures, then "compiles" 40 steps and links the programs asked for, as Ninja
 * prints it. The programs do nothing, but where CRASH_UNLESS is set and the configure options lack
 * it, the self-test's runners (llama-bench, hearth-whisper-self-test) die of SIGILL, as an AMX kernel
 * did on Xeons.
 */
const FAKE_CMAKE = `#!/bin/sh
if [ "$1" = "--version" ]; then echo "cmake version 3.99"; exit 0; fi
if [ "$1" = "-S" ]; then
  echo "-- The C compiler identification is GNU"
  [ -n "$FAIL_CONFIGURE" ] && { echo "CMake Error at CMakeLists.txt:1: boom" >&2; exit 1; }
  mkdir -p "$4"; echo "$@" > "$4/configured-with"
  echo "-- Build files have been written to: $4"; exit 0
fi
dir="$2"; shift; shift
while [ "$1" != "--target" ]; do shift; done; shift
mkdir -p "$dir/bin"
crash=""
if [ -n "$CRASH_UNLESS" ] && ! grep -q -- "$CRASH_UNLESS" "$dir/configured-with"; then crash='kill -ILL $$'; fi
# A portable build: a CPU backend per level, the runners load the best one left (and die on CRASH_VARIANT's).
if grep -q -- "-DGGML_CPU_ALL_VARIANTS=ON" "$dir/configured-with"; then
  for variant in haswell icelake sapphirerapids; do : > "$dir/bin/libggml-cpu-$variant.so"; done
  crash='here=$(dirname "$0"); for v in sapphirerapids icelake haswell; do [ -e "$here/libggml-cpu-$v.so" ] && break; done
echo "load_backend: loaded CPU backend from $here/libggml-cpu-$v.so" >&2
[ "$v" = "$CRASH_VARIANT" ] && kill -ILL $$
exit 0'
fi
i=1
while [ $i -le 40 ]; do echo "[$i/40] Building CXX object src/file$i.cpp.o"; i=$((i+1)); done
for program in "$@"; do
  echo "[40/40] Linking CXX executable bin/$program"
  # The runners say how they were called (ARGS_LOG), and a GPU's run dies where CRASH_ON_GPU says so.
  runner='if [ -n "$ARGS_LOG" ]; then echo "$(basename "$0") $*" >> "$ARGS_LOG"; fi
case " $* " in *" -rpc "*) ;; *" -ngl "*|*" gpu "*) if [ -n "$CRASH_ON_GPU" ]; then kill -ILL $$; fi ;; esac'
  # The lender's rpc-server listens where it is told, and closes every connection.
  rpc='while [ $# -gt 0 ]; do [ "$1" = "--port" ] && port=$2; shift; done
exec "$NODE" -e "require(\\"net\\").createServer((s) => s.destroy()).listen($port, \\"127.0.0.1\\")"'
  case "$program" in llama-bench|hearth-whisper-self-test) body="$runner
$crash" ;; ggml-rpc-server) body="$rpc" ;; *) body="" ;; esac
  printf '#!/bin/sh\\n%s\\n' "$body" > "$dir/bin/$program"; chmod +x "$dir/bin/$program"
done
`

function buildWith(
  env: Record<string, string>,
  args: string[] = [],
  prepareCache?: (cache: string) => void,
): { status: number | null; stdout: string; stderr: string; cache: string } {
  const bin = mkdtempSync(join(tmpdir(), 'hearth-fake-cmake-'))
  writeFileSync(join(bin, 'cmake'), FAKE_CMAKE)
  chmodSync(join(bin, 'cmake'), 0o755)
  const cache = mkdtempSync(join(tmpdir(), 'hearth-build-output-cache-'))
  for (const name of sources) symlinkSync(join(realCache, name), join(cache, name))
  prepareCache?.(cache)
  const result = spawnSync(process.execPath, ['--import', 'tsx', join(PROJECT_ROOT, 'main/cli/build-engines.ts'), ...args], {
    cwd: PROJECT_ROOT,
    // The fake builds are recorded in a file of their own, not in the project's record.
    env: {
      ...process.env,
      PATH: `${bin}:${process.env.PATH}`,
      HEARTH_ENGINE_CACHE: cache,
      HEARTH_ENGINE_RECORD: join(cache, 'record.json'),
      HEARTH_ENGINE_GPU: 'none',
      NODE: process.execPath,
      ...env,
    },
    encoding: 'utf8',
  })
  return { ...result, cache }
}

describeIf(haveSources, 'needs the pinned engine sources in the engine cache (npm run build:engines)')('the engine build as a person sees it', () => {
  it("prints a line per stage, with a count and the time, and none of the build tool's own", () => {
    const { status, stdout, stderr, cache } = buildWith({})
    expect(status, stderr).toBe(0)
    const lines = stdout.trim().split('\n')
    expect(lines.every((l) => l.startsWith('hearth engines: '))).toBe(true)
    expect(stdout).not.toMatch(/Building CXX|-- The C compiler|\[\d+\/40\]/)
    expect(stdout).toMatch(/llama: building .* full output in .*build-llama-\w+\.log/)
    expect(stdout).toMatch(/llama: configured \(\d+ s\)/)
    const counts = [...stdout.matchAll(/llama: compiling, (\d+)\/40 steps \(\d+ s\)/g)].map((m) => Number(m[1]))
    expect(counts).toEqual([4, 8, 12, 16, 20, 24, 28, 32, 36])
    expect(stdout).toMatch(/llama: linking llama-server\n/)
    expect(stdout).toMatch(/llama: ready in \d+ s: /)
    expect(stdout).toMatch(/whisper: ready in \d+ s: /)
    // Logs of builds that worked are not kept.
    expect(readdirSync(cache).filter((f) => f.endsWith('.log'))).toEqual([])
  })

  it('runs the self-test on each build, and builds again without the CPU feature when it crashes', () => {
    // The first level below "all this CPU has" (without AMX on a Xeon, generic elsewhere).
    const fallback = cpuLevels(nativeCpuFeatures())[1]!
    const { status, stdout, stderr, cache } = buildWith({ CRASH_UNLESS: fallback.flags.at(-1)! })
    expect(status, stderr).toBe(0)
    expect(stdout).toMatch(/llama: self-test failed: F16, BF16, Q4_0, .*IQ4_NL, MXFP4 of 15 weight types \(killed by SIGILL\)/)
    expect(stdout).toContain('llama:   Q4_K at 2 threads: killed by SIGILL')
    expect(stdout).toContain(`llama: building again ${fallback.description}`)
    expect(stdout).toMatch(/llama: self-test passed: 15 weight types ran at 1 and 2 threads/)
    expect(stdout).toMatch(/whisper: self-test failed: F16, Q4_0, .*Q6_K of 11 weight types \(killed by SIGILL\)/)
    // What install says last, where a person reads first.
    const summary = stdout.trim().split('\n').slice(-4).join('\n')
    expect(summary).toContain(`built without ${fallback.withheld.join(', ')}: the self-test crashed with`)
    const built = readdirSync(cache).find((f) => /^llama-\w+$/.test(f))!
    const manifest = JSON.parse(readFileSync(join(cache, built, 'build.json'), 'utf8'))
    expect(manifest.withheld).toEqual(fallback.withheld)
    expect(manifest.cmakeFlags).toEqual(expect.arrayContaining(fallback.flags))
    expect(manifest.selfTest).toMatchObject({ engine: 'llama', passed: true })
    // Every type at 1 and 2 threads, and Q8_0 over a local rpc-server (the pool's path).
    expect(manifest.selfTest.runs).toHaveLength(31)
  })

  it("runs a GPU's build on the CPU alone and on the GPU, and blames no CPU feature for a crash on the GPU", () => {
    const argsLog = join(mkdtempSync(join(tmpdir(), 'hearth-runner-args-')), 'args')
    const { status, stdout, stderr } = buildWith({ HEARTH_ENGINE_GPU: 'cuda', ARGS_LOG: argsLog })
    expect(status, stderr).toBe(0)
    expect(stdout).toMatch(/llama: self-test passed: 15 weight types ran at 1 and 2 threads, and on the GPU \(CUDA\)/)
    expect(stdout).toMatch(/whisper: self-test passed: 11 weight types ran at 1 and 2 threads, and on the GPU \(CUDA\)/)
    const calls = readFileSync(argsLog, 'utf8').trim().split('\n')
    const bench = calls.filter((c) => c.startsWith('llama-bench '))
    // Each type three times: on the CPU alone at 1 and 2 threads, then on the GPU, every layer
    // offloaded; and once more over a local rpc-server.
    expect(bench).toHaveLength(46)
    expect(bench.filter((c) => / -rpc 127\.0\.0\.1:\d+ /.test(c))).toHaveLength(1)
    expect(bench.filter((c) => / -t 1 .*-dev none /.test(c))).toHaveLength(15)
    expect(bench.filter((c) => / -t 2 .*-dev none /.test(c))).toHaveLength(15)
    expect(bench.filter((c) => / -ngl 99 /.test(c) && !c.includes('-dev none') && !c.includes('-rpc'))).toHaveLength(15)
    const whisper = calls.filter((c) => c.startsWith('hearth-whisper-self-test '))
    expect(whisper.filter((c) => c.endsWith(' cpu'))).toHaveLength(22)
    expect(whisper.filter((c) => c.endsWith(' gpu'))).toHaveLength(11)

    const crashing = buildWith({ HEARTH_ENGINE_GPU: 'cuda', CRASH_ON_GPU: '1' })
    expect(crashing.status, crashing.stderr).toBe(0)
    expect(crashing.stdout).toContain('llama:   Q4_K on the GPU: killed by SIGILL')
    expect(crashing.stdout).toMatch(/llama: self-test failed: F16, .* of 15 weight types \(on the GPU: killed by SIGILL\)/)
    // Building without AMX or AVX-512 would not mend the GPU's kernels: the build is kept, and said to have failed.
    expect(crashing.stdout).not.toContain('building again')
  })

  it("leaves out a portable build's CPU backend that crashes, and ggml takes the next best", () => {
    const { status, stdout, stderr, cache } = buildWith({ CRASH_VARIANT: 'sapphirerapids' }, ['--portable'])
    expect(status, stderr).toBe(0)
    expect(stdout).toMatch(/llama-portable: self-test failed: .* \(killed by SIGILL\)/)
    expect(stdout).toContain('llama-portable: left out the sapphirerapids CPU backend')
    expect(stdout).toMatch(/llama-portable: self-test passed: 15 weight types ran at 1 and 2 threads on its icelake CPU backend/)
    const built = readdirSync(cache).find((f) => /^llama-portable-\w+$/.test(f))!
    expect(
      readdirSync(join(cache, built))
        .filter((f) => f.startsWith('libggml-cpu-'))
        .sort(),
    ).toEqual(['libggml-cpu-haswell.so', 'libggml-cpu-icelake.so'])
    expect(JSON.parse(readFileSync(join(cache, built, 'build.json'), 'utf8')).withheld).toEqual(['sapphirerapids'])
  })

  it('clears what earlier versions left in the cache once the engines are ready, and says so in one line', () => {
    const daysAgo = (days: number) => new Date(Date.now() - days * 24 * 3600 * 1000)
    const aged = (path: string, days: number) => utimesSync(path, daysAgo(days), daysAgo(days))
    const { status, stdout, stderr, cache } = buildWith({}, [], (cache) => {
      // An earlier version's patched source and tarball, made yesterday: no build here needs them.
      mkdirSync(join(cache, 'src-0123456789ab-patched-000000000000'))
      writeFileSync(join(cache, 'src-0123456789ab-patched-000000000000/ggml.c'), 'x'.repeat(3 * 1024 * 1024))
      writeFileSync(join(cache, 'node-llama-cpp-3.0.0.tgz'), 'old')
      // A build last found 40 days ago; one built 40 days ago but found by a server last week
      // (another clone's); one made two days ago for another CPU sharing this home folder.
      for (const [name, built, used] of [
        ['llama-0000000000000040', 40, 40],
        ['llama-0000000000000007', 40, 7],
        ['whisper-0000000000000002', 2, 2],
      ] as const) {
        mkdirSync(join(cache, name))
        writeFileSync(join(cache, name, 'build.json'), '{}')
        aged(join(cache, name, 'build.json'), built)
        writeFileSync(join(cache, name, '.last-used'), '')
        aged(join(cache, name, '.last-used'), used)
      }
      // An interrupted build's CMake folder from ten days ago, and one that may be running now.
      mkdirSync(join(cache, 'build-llama-00000000000000aa'))
      aged(join(cache, 'build-llama-00000000000000aa'), 10)
      mkdirSync(join(cache, 'build-whisper-00000000000000bb'))
      // Not the cache's own: left alone.
      mkdirSync(join(cache, 'bench-models'))
    })
    expect(status, stderr).toBe(0)
    expect(stdout).toMatch(
      /hearth engines: cache: removed 2 sources no build here needs, 1 build unused for 30 days, 1 leftover of an interrupted build \(3\.15 MB freed\)\n/,
    )
    const left = readdirSync(cache)
    expect(left).not.toContain('src-0123456789ab-patched-000000000000')
    expect(left).not.toContain('node-llama-cpp-3.0.0.tgz')
    expect(left).not.toContain('llama-0000000000000040')
    expect(left).not.toContain('build-llama-00000000000000aa')
    expect(left).toEqual(expect.arrayContaining(['llama-0000000000000007', 'whisper-0000000000000002', 'build-whisper-00000000000000bb', 'bench-models']))
    // Today's sources (links to the real cache here) and builds stay, and the real trees were not touched.
    const todays = left.filter(
      (n) => /^(llama|whisper)-[0-9a-f]{16}$/.test(n) && (existsSync(join(cache, n, 'llama-server')) || existsSync(join(cache, n, 'whisper-server'))),
    )
    expect(todays).toHaveLength(2)
    expect(left).toEqual(expect.arrayContaining(sources))
    for (const name of sources) expect(existsSync(join(realCache, name)), name).toBe(true)

    // Run again: nothing more to clear, nothing said.
    const again = spawnSync(process.execPath, ['--import', 'tsx', join(PROJECT_ROOT, 'main/cli/build-engines.ts')], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, HEARTH_ENGINE_CACHE: cache, HEARTH_ENGINE_RECORD: join(cache, 'record.json'), HEARTH_ENGINE_GPU: 'none' },
      encoding: 'utf8',
    })
    expect(again.status, again.stderr).toBe(0)
    expect(again.stdout).not.toContain('cache: removed')
  })

  it('names the log when a step fails, and the log holds what the tool said', () => {
    const { status, stdout, stderr } = buildWith({ FAIL_CONFIGURE: '1' })
    expect(status).toBe(1)
    expect(stdout + stderr).not.toContain('CMake Error')
    const log = stderr.match(/its output is in (\S+\.log)/)?.[1]
    expect(log, stderr).toBeDefined()
    expect(readFileSync(log!, 'utf8')).toContain('CMake Error at CMakeLists.txt:1: boom')
  })
})

describeIf(llamaBuild, 'needs llama.cpp built here (npm run build:engines)')('engines found however the server is started', () => {
  it('under another HOME, through the record install left in the project', async () => {
    expect(existsSync(join(PROJECT_ROOT, '.hearth-engines.json')), 'no .hearth-engines.json: run npm run build:engines once').toBe(true)
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-other-home-models-'))
    writeTinyLlama(join(modelsDir, 'chat.gguf'))
    const home = mkdtempSync(join(tmpdir(), 'hearth-other-home-'))
    const server = await startTestServer({
      modelsDir,
      env: { HOME: home, XDG_CACHE_HOME: undefined, HEARTH_ENGINE_CACHE: undefined, HEARTH_LLAMA_BUILD_DIR: undefined },
    })
    try {
      const chat = await postJson(server, '/v1/chat/completions', { model: 'chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 })
      expect(chat.status, JSON.stringify(chat.json)).toBe(200)
    } finally {
      await server.stop()
    }
  })
})
