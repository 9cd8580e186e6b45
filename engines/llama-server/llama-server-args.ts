/** The llama-server command line for one catalog model (its context, slots, threads, layers and kind), and its environment. */
import type { EngineLoadSpec } from '../engine-jobs.ts'
import { speculationArgs } from './speculation-args.ts'

/**
 * The RAM llama-server may keep prompts in once they leave their slot (MiB), where the memory plan
 * did not size it (server.ts does, from the memory budget): llama-server's own default.
 */
export const DEFAULT_PROMPT_CACHE_MIB = 8192

/** llama.cpp's log levels: 2 keeps warnings and errors (what explains a crash), 3 adds a few lines per request. */
const QUIET = 2
const VERBOSE = 3

export interface LlamaServerArgOptions {
  slotCacheDir?: string
  verbose?: boolean
  /** Only this machine's CPU runs the model (no GPU layers, no lenders). */
  cpuOnly?: boolean
  /**
   * The program paces each slot's drafts (patch llama-22): speculation is on by default. A build
   * from before it drafts only where models.json asks, without pacing, as it did.
   */
  pacedDrafts?: boolean
}

export function llamaServerArgs(spec: EngineLoadSpec, options: LlamaServerArgOptions = {}): string[] {
  const slots = Math.max(1, spec.parallel)
  const args = [
    '--model',
    spec.path,
    '--alias',
    spec.modelId,
    // Every slot gets the model's whole context, as each request is promised it.
    '--ctx-size',
    String(spec.contextLength * slots),
    '--parallel',
    String(slots),
    '--threads',
    String(spec.threads),
    '--threads-batch',
    String(spec.threads),
    '--n-gpu-layers',
    spec.gpuLayers < 0 ? 'auto' : String(spec.gpuLayers),
    '--flash-attn',
    'auto',
    '--no-webui',
    '--log-colors',
    'off',
    // Lines per request through a pipe cost an embedding model a tenth of its throughput.
    '--log-verbosity',
    String(options.verbose ? VERBOSE : QUIET),
  ]
  if (spec.kind === 'embedding' || spec.kind === 'rerank') {
    // An encoder sees a whole input in one batch; the batch must hold the longest one allowed.
    args.push(spec.kind === 'rerank' ? '--reranking' : '--embedding', '--batch-size', String(spec.contextLength), '--ubatch-size', String(spec.contextLength))
  } else {
    // Thinking comes apart from the answer (`reasoning_content`), as OpenAI-style clients expect.
    args.push('--jinja', '--reasoning-format', 'deepseek', '--cache-ram', String(spec.promptCacheMiB ?? DEFAULT_PROMPT_CACHE_MIB))
    if (spec.chatTemplate) args.push('--chat-template', spec.chatTemplate)
    if (options.slotCacheDir) args.push('--slot-save-path', options.slotCacheDir)
  }
  // On a CPU the weights are read into the engine's own memory, not mapped from the file, as
  // Ollama does: tensors left in the page cache (a Q4_K_M file's Q6_K ones, which are not
  // repacked) sit on 4 KiB pages, and decode read 3–10 % slower from there. A GPU's weights live in
  // its memory either way, and a unified-memory GPU maps the file in place.
  if (options.cpuOnly) args.push('--load-mode', 'none')
  if (spec.projectorPath) args.push('--mmproj', spec.projectorPath)
  for (const adapter of spec.adapterPaths ?? []) args.push('--lora', adapter)
  if (spec.rpc) {
    // llama.cpp's own placement: layers go where memory is free (the lenders report their caps).
    args.push('--rpc', spec.rpc.endpoints.map((e) => e.endpoint).join(','), '--fit', 'on', '--fit-target', String(spec.rpc.fitMarginMiB))
  }
  if (spec.speculative) args.push(...speculationArgs(spec.speculative, spec.gpuLayers, options.pacedDrafts ?? true))
  return args
}

/**
 * llama-server's memory on transparent huge pages: glibc's malloc asks for them (MADV_HUGEPAGE) when
 * its `hugetlb` tunable is 1, which is what most Linux systems' THP setting (`madvise`) waits for. A
 * CPU decode reads every weight once a token (measured on a 1.1B Q4_K_M: decode 1–8 % faster, and
 * 11–12 % with the weights read in, above). whisper-server read slower with it. A setting of the
 * person's own is left as it is; glibc before 2.35 and other C libraries ignore it.
 */
export function hugePagesEnvironment(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): Record<string, string> {
  const tunables = env.GLIBC_TUNABLES
  if (platform !== 'linux' || tunables?.includes('glibc.malloc.hugetlb=')) return {}
  return { GLIBC_TUNABLES: tunables ? `${tunables}:glibc.malloc.hugetlb=1` : 'glibc.malloc.hugetlb=1' }
}
