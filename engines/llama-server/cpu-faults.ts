/**
 * An engine killed by SIGILL, SIGSEGV or SIGBUS while loading a model or on its first batch has
 * met a kernel this build or this CPU gets wrong (ggml's AMX tiles crashed so on Xeons until
 * patched). Install's self-test catches that for the weight types it knows; what it could not
 * foresee is handled here: the model is loaded again without the kernels made for this CPU's
 * special units (llama-server --no-repack: no AMX tiles, no repacked AVX2/AVX-512 weights), which
 * costs prompt speed, not answers; what happened is said in words and kept for /api/system.
 */
import { ggufFileTypeName } from '../../models/catalog/gguf-file-types.ts'
import { readGgufMetadata } from '../../models/catalog/gguf-metadata.ts'
import type { ModelRecord } from '../../models/catalog/model-record.ts'
import { EngineDiedError, ModelError } from '../errors.ts'

/** The signals of code the CPU cannot run (SIGILL) or of memory a kernel got wrong. */
const CPU_FAULT_SIGNALS = new Set(['SIGILL', 'SIGSEGV', 'SIGBUS'])

/** What llama-server leaves out in the fallback: the extra buffer types (AMX, CPU_REPACK). */
export const WITHOUT_CPU_SPECIFIC_KERNELS = ['--no-repack'] as const

export interface CpuFallback {
  model: string
  /** The file's weight type as llama.cpp names it (Q4_K_M, Q8_0, …). */
  weightType: string
  signal: string
  phase: 'loading' | 'first batch'
  /** What the model now runs without, in words. */
  without: string
  /** The model answered without them; false: it crashed even so, and its requests get the explanation. */
  recovered: boolean
  at: string
}

/** What the build does for this CPU, as the fallback's words name it. */
export interface BuildFeatures {
  cpuFeatures: readonly string[]
}

export function isCpuFault(e: unknown): e is EngineDiedError {
  return e instanceof EngineDiedError && e.beforeFirstJob && e.signal !== null && CPU_FAULT_SIGNALS.has(e.signal)
}

export class CpuFallbacks {
  private readonly byModel = new Map<string, CpuFallback>()

  constructor(
    private readonly build: BuildFeatures,
    private readonly log: (line: string) => void,
  ) {}

  /** The llama-server options this model loads with: none, or those that leave out what crashed. */
  argsFor(model: ModelRecord): string[] {
    return this.byModel.has(fileKey(model)) ? [...WITHOUT_CPU_SPECIFIC_KERNELS] : []
  }

  list(): CpuFallback[] {
    return [...this.byModel.values()]
  }

  /**
   * What to do about `error` (a failure of `model`): 'retry' where it is a CPU fault, the first time
   * (the model then loads without the special kernels); once it has crashed without them too, the
   * explanation to answer with; undefined for any other failure.
   */
  async after(model: ModelRecord, error: unknown): Promise<'retry' | Error | undefined> {
    if (!isCpuFault(error)) return undefined
    const key = fileKey(model)
    const earlier = this.byModel.get(key)
    const weightType = earlier?.weightType ?? (await weightTypeOf(model))
    const phase = error.code === 'engine_load_failed' ? 'loading' : 'first batch'
    const without = this.specialKernels()
    if (!earlier) {
      this.byModel.set(key, { model: model.id, weightType, signal: error.signal!, phase, without, recovered: true, at: new Date().toISOString() })
      this.log(
        `warning: model "${model.id}" (${weightType} weights) crashed llama.cpp with ${error.signal} ${phase === 'loading' ? 'while loading' : 'on its first batch'}, ` +
          `in the kernels for ${without}; Hearth runs it without them (--no-repack): it answers, with slower prompts`,
      )
      return 'retry'
    }
    earlier.recovered = false
    const features = this.build.cpuFeatures.filter((f) => f !== 'AMX_INT8').join(' ') || 'baseline'
    return new ModelError(
      error.code,
      `model "${model.id}" (${weightType} weights) crashes llama.cpp on this CPU with ${error.signal}, even without ${without}. ` +
        `What remains is the build's own code for ${features}: build the engine without AVX-512 with \`npm run build:engines -- --without avx512\` ` +
        `(or for any x86-64 CPU: --without native) and restart Hearth.`,
    )
  }

  private specialKernels(): string {
    const features = this.build.cpuFeatures
    if (features.includes('AMX_INT8')) return "AMX (the CPU's matrix units) and repacked AVX-512 weights"
    if (features.includes('AVX512')) return 'repacked AVX-512 weights'
    return 'repacked weights (AVX2, NEON)'
  }
}

/** One model file as it is now: a replaced file gets its own chance. */
function fileKey(model: ModelRecord): string {
  return [model.id, model.path, model.sizeBytes, model.created].join('|')
}

async function weightTypeOf(model: ModelRecord): Promise<string> {
  try {
    const fileType = (await readGgufMetadata(model.path))['general.file_type']
    return typeof fileType === 'number' ? (ggufFileTypeName(fileType) ?? `file type ${fileType}`) : 'unknown'
  } catch {
    return 'unknown'
  }
}
