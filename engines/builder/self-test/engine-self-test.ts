/**
 * A build is ready only once it has run: every weight type people download, quantized here from
 * a small random model and run at one and two threads (a prompt long enough for the batched
 * matrix kernels, then a few decode steps). A kernel the compiler or the CPU gets wrong (ggml's AMX
 * tiles, say) dies here, at install, instead of on a user's first question. A build for a GPU runs
 * each type twice over: on the CPU alone (the path of a model too big for the GPU, or of
 * `--backend cpu`), then once on the GPU.
 */
import { spawn, spawnSync } from 'node:child_process'
import { mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { writeSelfTestLlama, writeSelfTestWhisper } from './self-test-models.ts'

export interface SelfTestRun {
  /** ggml's name for the weights' type (Q4_K, IQ4_XS, …). */
  weightType: string
  threads: number
  /** Run on the build's GPU, every layer offloaded; absent for a run on the CPU alone. */
  gpu?: true
  /** ran: the prompt and the decode steps finished; crashed: a signal killed it; failed: it exited with an error. */
  outcome: 'ran' | 'crashed' | 'failed'
  signal?: string
  /** What a failed run said last. */
  detail?: string
  /** The weights sat in AMX's buffer, so the batched products ran on the matrix units. */
  amx?: boolean
  /** Every layer on a local ggml-rpc-server: the path of a model pooled over machines (docs/pool.md). */
  rpc?: true
}

export interface SelfTestReport {
  engine: 'llama' | 'whisper'
  passed: boolean
  runs: SelfTestRun[]
  /** Portable builds: the CPU backend variant ggml chose here (`sapphirerapids`, `haswell`, …). */
  cpuVariant?: string
  /** The GPU toolkit whose kernels ran too (cuda, vulkan, metal); absent for a build for the CPU. */
  gpu?: string
  seconds: number
  at: string
}

interface WeightType {
  name: string
  /** The quantizer's name for it, where that differs. */
  quantizeAs?: string
}

/** What llama-quantize makes, one ggml type per file (`--pure`): each kernel family on its own. */
export const LLAMA_WEIGHT_TYPES: readonly WeightType[] = [
  { name: 'F16' },
  { name: 'BF16' },
  { name: 'Q4_0' },
  { name: 'Q4_1' },
  { name: 'Q5_0' },
  { name: 'Q5_1' },
  { name: 'Q8_0' },
  { name: 'Q2_K' },
  { name: 'Q3_K', quantizeAs: 'Q3_K_S' },
  { name: 'Q4_K', quantizeAs: 'Q4_K_S' },
  { name: 'Q5_K', quantizeAs: 'Q5_K_S' },
  { name: 'Q6_K' },
  { name: 'IQ4_XS' },
  { name: 'IQ4_NL' },
  { name: 'MXFP4', quantizeAs: 'MXFP4_MOE' },
]

/** What whisper.cpp's quantizer makes (the F16 file is written as it is). */
export const WHISPER_WEIGHT_TYPES: readonly WeightType[] = [
  { name: 'F16' },
  ...['Q4_0', 'Q4_1', 'Q5_0', 'Q5_1', 'Q8_0', 'Q2_K', 'Q3_K', 'Q4_K', 'Q5_K', 'Q6_K'].map((name) => ({ name, quantizeAs: name.toLowerCase() })),
]

export const SELF_TEST_THREADS = [1, 2] as const

/** The weight types ggml multiplies on AMX's tiles (amx/common.h, qtype_has_amx_kernels); F16 in AMX's buffer runs on AVX-512. */
const AMX_KERNEL_TYPES = new Set(['Q4_0', 'Q4_1', 'Q8_0', 'Q4_K', 'Q5_K', 'Q6_K', 'IQ4_XS'])

/** A run that takes longer than this has hung: a tiny model answers in about a second. */
const RUN_LIMIT_MS = 120_000

export type Programs = (name: string) => string

/** A build's GPU toolkit, where it has one: its kernels are run as well as the CPU's. */
export interface SelfTestOptions {
  gpu?: string
}

/** Runs llama.cpp's self-test with the build's own llama-quantize and llama-bench; `scratch` is removed after. */
export function selfTestLlama(
  program: Programs,
  scratch: string,
  onRun: (run: SelfTestRun) => void = () => undefined,
  options: SelfTestOptions = {},
): SelfTestReport {
  return selfTest('llama', scratch, LLAMA_WEIGHT_TYPES, onRun, options, {
    writeSource: (dir) => {
      const path = join(dir, 'self-test-f32.gguf')
      writeSelfTestLlama(path)
      return path
    },
    quantize: (source, type, dir) => {
      const out = join(dir, `self-test-${type.name}.gguf`)
      return { out, result: run(program('llama-quantize'), ['--pure', source, out, type.quantizeAs ?? type.name, '1']) }
    },
    // 64 prompt tokens take the batched (tiled) products, the 4 decode steps the one-row ones;
    // `-dev none` keeps every weight on the CPU, where llama-bench would offload them all.
    bench: (model, threads, onGpu) =>
      run(program('llama-bench'), [
        '-m',
        model,
        '-p',
        '64',
        '-n',
        '4',
        '-r',
        '1',
        '-t',
        String(threads),
        ...(onGpu ? ['-ngl', '99'] : ['-dev', 'none']),
        '-o',
        'json',
        '-v',
      ]),
    usedAmx: (log) => /AMX model buffer size/.test(log),
    // The pool's path: the same model's layers on a local rpc-server, as a lender would hold them.
    afterTypes: (source, dir, record) => {
      const out = join(dir, 'self-test-rpc-Q8_0.gguf')
      const quantized = run(program('llama-quantize'), ['--pure', source, out, 'Q8_0', '1'])
      if (!ranCleanly(quantized)) return record({ weightType: 'Q8_0', threads: 1, rpc: true, ...outcomeOf(quantized) })
      record({
        weightType: 'Q8_0',
        threads: 1,
        rpc: true,
        ...outcomeOf(
          withRpcServer(program('ggml-rpc-server'), (endpoint) =>
            run(program('llama-bench'), ['-m', out, '-p', '64', '-n', '4', '-r', '1', '-t', '1', '-rpc', endpoint, '-ngl', '99', '-o', 'json', '-v']),
          ),
        ),
      })
    },
  })
}

/** Runs `use` with a ggml-rpc-server on a loopback port, then stops it. */
function withRpcServer(program: string, use: (endpoint: string) => Ran): Ran {
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 40_000)
    const server = spawn(program, ['--host', '127.0.0.1', '--port', String(port), '--threads', '1'], { stdio: 'ignore' })
    try {
      // Listening within a second or two; a port someone else holds makes it exit at once.
      const knock = `const n=require('node:net');let t=0;(function k(){const s=n.connect(${port},'127.0.0.1');s.on('connect',()=>{s.destroy();process.exit(0)});s.on('error',()=>{if(++t>100)process.exit(1);setTimeout(k,50)})})()`
      if (spawnSync(process.execPath, ['-e', knock], { timeout: 10_000 }).status !== 0) continue
      return use(`127.0.0.1:${port}`)
    } finally {
      server.kill('SIGKILL')
    }
  }
  return { status: 1, signal: null, log: 'ggml-rpc-server did not start', timedOut: false }
}

/** Runs whisper.cpp's self-test with the build's own whisper-quantize and Hearth's whisper/whisper-self-test.cpp (the encoder's 1,500 frames, the decoder's batch and single tokens). */
export function selfTestWhisper(
  program: Programs,
  scratch: string,
  onRun: (run: SelfTestRun) => void = () => undefined,
  options: SelfTestOptions = {},
): SelfTestReport {
  return selfTest('whisper', scratch, WHISPER_WEIGHT_TYPES, onRun, options, {
    writeSource: (dir) => {
      const path = join(dir, 'ggml-self-test-f16.bin')
      writeSelfTestWhisper(path)
      return path
    },
    quantize: (source, type, dir) => {
      if (!type.quantizeAs) return { out: source }
      const out = join(dir, `ggml-self-test-${type.name}.bin`)
      return { out, result: run(program('whisper-quantize'), [source, out, type.quantizeAs]) }
    },
    bench: (model, threads, onGpu) => run(program('hearth-whisper-self-test'), [model, String(threads), onGpu ? 'gpu' : 'cpu']),
    usedAmx: (log) => /\bAMX\b.*(buffer|size)/.test(log),
  })
}

interface Harness {
  writeSource: (dir: string) => string
  quantize: (source: string, type: WeightType, dir: string) => { out: string; result?: Ran }
  bench: (model: string, threads: number, onGpu: boolean) => Ran
  usedAmx: (log: string) => boolean
  /** More runs on the weights' source, before the scratch folder goes. */
  afterTypes?: (source: string, dir: string, record: (run: SelfTestRun) => void) => void
}

function selfTest(
  engine: SelfTestReport['engine'],
  scratch: string,
  types: readonly WeightType[],
  onRun: (run: SelfTestRun) => void,
  options: SelfTestOptions,
  harness: Harness,
): SelfTestReport {
  const started = performance.now()
  rmSync(scratch, { recursive: true, force: true })
  mkdirSync(scratch, { recursive: true })
  const runs: SelfTestRun[] = []
  let cpuVariant: string | undefined
  const record = (r: SelfTestRun) => {
    runs.push(r)
    onRun(r)
  }
  try {
    const source = harness.writeSource(scratch)
    for (const type of types) {
      const { out, result } = harness.quantize(source, type, scratch)
      if (result && !ranCleanly(result)) {
        // The quantizer is built from the same ggml: a crash there is a crash of this build.
        for (const threads of SELF_TEST_THREADS) record({ weightType: type.name, threads, ...outcomeOf(result), detail: `quantizing: ${lastLine(result)}` })
        continue
      }
      for (const threads of SELF_TEST_THREADS) {
        const ran = harness.bench(out, threads, false)
        cpuVariant ??= /libggml-cpu-([\w-]+)\.(?:so|dylib|dll)/.exec(ran.log)?.[1]
        const amx = AMX_KERNEL_TYPES.has(type.name) && harness.usedAmx(ran.log)
        record({ weightType: type.name, threads, ...outcomeOf(ran), ...(amx ? { amx } : {}) })
      }
      if (options.gpu) record({ weightType: type.name, threads: 1, gpu: true, ...outcomeOf(harness.bench(out, 1, true)) })
      if (out !== source) rmSync(out, { force: true })
    }
    harness.afterTypes?.(source, scratch, record)
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
  return {
    engine,
    passed: runs.every((r) => r.outcome === 'ran'),
    runs,
    ...(cpuVariant ? { cpuVariant } : {}),
    ...(options.gpu ? { gpu: options.gpu } : {}),
    seconds: Math.round((performance.now() - started) / 100) / 10,
    at: new Date().toISOString(),
  }
}

interface Ran {
  status: number | null
  signal: string | null
  log: string
  timedOut: boolean
}

function run(program: string, args: string[]): Ran {
  const result = spawnSync(program, args, { encoding: 'utf8', timeout: RUN_LIMIT_MS, maxBuffer: 64 * 1024 * 1024 })
  const timedOut = (result.error as NodeJS.ErrnoException | undefined)?.code === 'ETIMEDOUT'
  const log = `${result.stdout ?? ''}\n${result.stderr ?? ''}${result.error && !timedOut ? `\n${result.error.message}` : ''}`
  return { status: result.status, signal: timedOut ? null : result.signal, log, timedOut }
}

function ranCleanly(ran: Ran): boolean {
  return ran.status === 0 && ran.signal === null && !ran.timedOut
}

function outcomeOf(ran: Ran): Pick<SelfTestRun, 'outcome' | 'signal' | 'detail'> {
  if (ranCleanly(ran)) return { outcome: 'ran' }
  if (ran.signal) return { outcome: 'crashed', signal: ran.signal }
  return { outcome: 'failed', detail: ran.timedOut ? `no answer in ${RUN_LIMIT_MS / 1000} s` : lastLine(ran) }
}

function lastLine(ran: Ran): string {
  const lines = ran.log.trim().split('\n').filter(Boolean)
  return (lines.findLast((l) => /error|failed|abort|assert/i.test(l)) ?? lines.at(-1) ?? `exit ${ran.status}`).trim().slice(0, 200)
}

/** One line for install and the Server page: what ran, what used AMX, or what broke and how. */
export function selfTestVerdict(report: SelfTestReport): string {
  const types = [...new Set(report.runs.map((r) => r.weightType))]
  const threads = [...new Set(report.runs.filter((r) => !r.gpu).map((r) => r.threads))].join(' and ')
  if (report.passed) {
    const amx = [...new Set(report.runs.filter((r) => r.amx).map((r) => r.weightType))]
    const units = amx.length > 0 ? `; AMX ran ${amx.join(' ')}` : '; no AMX here'
    const variant = report.cpuVariant ? ` on its ${report.cpuVariant} CPU backend` : ''
    const gpu = report.gpu ? `, and on the GPU (${report.gpu.toUpperCase()})` : ''
    const rpc = report.runs.some((r) => r.rpc) ? ', and over a local rpc-server' : ''
    return `self-test passed: ${types.length} weight types ran at ${threads} threads${variant}${gpu}${rpc}${units} (${report.seconds} s)`
  }
  const broken = report.runs.filter((r) => r.outcome !== 'ran')
  const how = [...new Set(broken.map((r) => `${r.gpu ? 'on the GPU: ' : ''}${r.outcome === 'crashed' ? `killed by ${r.signal}` : r.detail}`))].join('; ')
  const brokenTypes = [...new Set(broken.map((r) => r.weightType))]
  return `self-test failed: ${brokenTypes.join(', ')} of ${types.length} weight types (${how})`
}
