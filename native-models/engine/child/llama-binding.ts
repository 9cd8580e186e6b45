/**
 * The part of @fugood/llama.node that Hearth uses, typed once. The package ships its TypeScript
 * sources as CommonJS that a strict ESM project cannot type-check (and Node cannot see its named
 * exports), and some result fields differ from its declarations (checked against 1.7.15:
 * `stopped_limited`, `stopped_words`). So it is required here and given these types.
 */
import { createRequire } from 'node:module'

export type ChatMessage = {
  role: string
  content?: string | Array<{ type: string; text?: string; image_url?: { url?: string } }>
}

export interface LlamaModelOptions {
  model: string
  n_ctx?: number
  n_batch?: number
  n_ubatch?: number
  n_threads?: number
  n_gpu_layers?: number
  n_parallel?: number
  embedding?: boolean
  embd_normalize?: number
  pooling_type?: 'none' | 'mean' | 'cls' | 'last' | 'rank'
  use_mmap?: boolean
  use_mlock?: boolean
  flash_attn_type?: 'auto' | 'on' | 'off'
  ctx_shift?: boolean
  kv_unified?: boolean
  devices?: string[]
  lib_variant?: 'default' | 'vulkan' | 'cuda' | 'snapdragon'
}

export interface CompletionOptions {
  prompt?: string
  messages?: ChatMessage[]
  jinja?: boolean
  n_predict?: number
  temperature?: number
  top_k?: number
  top_p?: number
  min_p?: number
  xtc_probability?: number
  xtc_threshold?: number
  dry_multiplier?: number
  penalty_last_n?: number
  penalty_repeat?: number
  seed?: number
  stop?: string[]
  ignore_eos?: boolean
  media_paths?: string | string[]
}

export interface CompletionToken {
  token: string
  content?: string
}

export interface CompletionTimings {
  prompt_n: number
  prompt_ms: number
  prompt_per_second: number
  predicted_n: number
  predicted_ms: number
  predicted_per_second: number
}

export interface CompletionResult {
  text: string
  tokens_predicted: number
  tokens_evaluated: number
  truncated: boolean
  context_full: boolean
  interrupted: boolean
  stopped_eos: boolean
  stopped_words: boolean
  stopped_limited: boolean
  stopping_word: string
  timings: CompletionTimings
}

export interface ModelInfo {
  desc: string
  nEmbd: number
  nParams: number
  size: number
  metadata: Record<string, string>
  chatTemplates: { llamaChat: boolean; jinja: { default: boolean; toolUse: boolean } }
}

export type FormattedChat =
  | { type: 'llama-chat'; prompt: string; has_media: boolean; media_paths?: string[] }
  | { type: 'jinja'; prompt: string; has_media: boolean; media_paths?: string[]; additional_stops: string[] }

export interface TokenizeResult {
  tokens: Int32Array
  has_media: boolean
}

/** The addon's own context, under the package's JS wrapper. */
export interface NativeLlamaContext {
  /** A jinja result, or the bare prompt when `jinja` is false. */
  getFormattedChat(
    messages: ChatMessage[],
    template: string | undefined,
    params: { jinja: boolean; add_generation_prompt?: boolean },
  ): { prompt: string; additional_stops: string[] } | string
}

/** The binding's slot-based API (`enableParallelMode` underneath). */
export interface ParallelCompletionResult {
  text: string
  tokens_predicted: number
  tokens_evaluated: number
  stopped_eos: boolean
  stopped_word: boolean
  stopped_limit: boolean
  context_full: boolean
  timings: CompletionTimings & { cache_n: number }
}

export interface LlamaParallel {
  enable(config?: { n_parallel?: number; n_batch?: number }): Promise<boolean>
  disable(): void
  /** Queues a completion on a free slot; `stop()` cancels it and rejects `promise` ("Request cancelled"). */
  completion(
    options: CompletionOptions,
    onToken?: (requestId: number, token: CompletionToken) => void,
  ): Promise<{ requestId: number; promise: Promise<ParallelCompletionResult>; stop: () => void }>
  embedding(
    text: string,
    params?: { embd_normalize?: number },
  ): Promise<{ requestId: number; promise: Promise<{ embedding: number[] | Float32Array }> }>
}

export interface LlamaContext {
  readonly parallel: LlamaParallel
  isJinjaSupported(): boolean
  getMultimodalSupport(): { vision: boolean; audio: boolean }
  /** The wrapper's getFormattedChat reads the whole model info twice per call (milliseconds); this does not. */
  readonly ctx: NativeLlamaContext
  getModelInfo(): ModelInfo
  getUsedDevices(): string[]
  getSystemInfo(): string
  getFormattedChat(
    messages: ChatMessage[],
    template?: string,
    params?: { jinja?: boolean; add_generation_prompt?: boolean },
  ): FormattedChat
  completion(options: CompletionOptions, onToken?: (token: CompletionToken) => void): Promise<CompletionResult>
  stopCompletion(): void
  tokenize(text: string, options?: { media_paths?: string[] }): Promise<TokenizeResult>
  detokenize(tokens: number[]): Promise<string>
  embedding(text: string, params?: { embd_normalize?: number }): Promise<{ embedding: Float32Array }>
  initMultimodal(options: { path: string; use_gpu?: boolean; image_min_tokens?: number; image_max_tokens?: number }): boolean
  isMultimodalEnabled(): boolean
  releaseMultimodal(): void
  clearCache(clearData?: boolean): void
  release(): Promise<void>
}

export interface BackendDeviceInfo {
  backend: string
  type: string
  deviceName: string
  maxMemorySize: number
}

export interface LlamaNode {
  loadModel(options: LlamaModelOptions, onProgress?: (progress: number) => void): Promise<LlamaContext>
  /** Loads that build of the addon to ask; a build whose driver is missing throws (or kills the process). */
  getBackendDevicesInfo(variant?: 'default' | 'vulkan' | 'cuda'): Promise<BackendDeviceInfo[]>
  toggleNativeLog(enable: boolean): Promise<void>
}

export const llamaNode = createRequire(import.meta.url)('@fugood/llama.node') as LlamaNode
