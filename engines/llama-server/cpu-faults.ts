/**
 * An engine killed by SIGILL, SIGSEGV or SIGBUS while loading a model or on its first batch has
 * met a kernel this build or this CPU gets wrong (ggml's AMX tiles crashed so on Xeons until
 * patched). Install's self-test catches that for the weight types it knows; what it could not
 * foresee is handled here: the model is loaded again without the kernels made for this CPU's
 * special units (llama-server --no-repack: no AMX tiles, no repacked AVX2/AVX-512 weights), which
 * costs prompt speed, not answers; what happened is said in words and kept for /api/system.
 */
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

/** llama.cpp's names for `general.file_type` (llama.h, enum llama_ftype). */
const FILE_TYPES: Record<number, string> = {
  0: 'F32',
  1: 'F16',
  2: 'Q4_0',
  3: 'Q4_1',
  7: 'Q8_0',
  8: 'Q5_0',
  9: 'Q5_1',
  10: 'Q2_K',
  11: 'Q3_K_S',
  12: 'Q3_K_M',
  13: 'Q3_K_L',
  14: 'Q4_K_S',
  15: 'Q4_K_M',
  16: 'Q5_K_S',
  17: 'Q5_K_M',
  18: 'Q6_K',
  19: 'IQ2_XXS',
  20: 'IQ2_XS',
  21: 'Q2_K_S',
  22: 'IQ3_XS',
  23: 'IQ3_XXS',
  24: 'IQ1_S',
  25: 'IQ4_NL',
  26: 'IQ3_S',
  27: 'IQ3_M',
  28: 'IQ2_S',
  29: 'IQ2_M',
  30: 'IQ4_XS',
  31: 'IQ1_M',
  32: 'BF16',
  36: 'TQ1_0',
  37: 'TQ2_0',
  38: 'MXFP4_MOE',
  39: 'NVFP4',
  40: 'Q1_0',
  41: 'Q2_0',
}

async function weightTypeOf(model: ModelRecord): Promise<string> {
  try {
    const fileType = (await readGgufMetadata(model.path))['general.file_type']
    return typeof fileType === 'number' ? (FILE_TYPES[fileType] ?? `file type ${fileType}`) : 'unknown'
  } catch {
    return 'unknown'
  }
}
