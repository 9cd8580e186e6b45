/**
 * The jobs an engine runs and the results it gives: what the server hands a loaded model (chat,
 * completion, embedding, rerank, speech), the progress it streams back, and how a model is loaded.
 * Plain data only: the routes build jobs from requests, the engines turn them into upstream calls.
 */
import type { ModelKind } from '../models/catalog/model-kinds.ts'

export interface EngineLoadSpec {
  modelId: string
  kind: ModelKind
  path: string
  projectorPath: string | undefined
  contextLength: number
  threads: number
  /** Layers to offload to the GPU; -1 means all of them. */
  gpuLayers: number
  /** Sequences decoded together in one context (continuous batching); 1 = one request at a time. */
  parallel: number
  /** Speculative decoding, as Hearth chose it for the model (load-spec.ts); absent = none. */
  speculative?: SpeculationPlan
  /** Speech models: the voice-activity model (Silero) that `SpeechJob.vad` runs, when there is one. */
  vadModelPath?: string
  /**
   * A pooled model: llama-server borrows these machines' memory through `--rpc` (each the local
   * end of a tunnel to a lender, and the lender's name for messages), and `fitMarginMiB` is what
   * llama.cpp's fit leaves free on each.
   */
  rpc?: { endpoints: Array<{ endpoint: string; name: string }>; fitMarginMiB: number }
  /** Chat models whose file has no template: the Jinja source llama-server gets instead of its ChatML default. */
  chatTemplate?: string
  /** LoRA adapters applied over the weights (llama-server `--lora`). */
  adapterPaths?: string[]
  /** Chat models: MiB of host RAM for prompts pushed out of their slots (llama-server's `--cache-ram`). */
  promptCacheMiB?: number
}

/** What drafts tokens for a chat model's speculative decoding; the target model checks every one. */
export interface SpeculationPlan {
  /** N-gram drafting from the conversation so far (every chat model, unless turned off). */
  ngram: boolean
  /** A smaller model of the same vocabulary (catalog `draft`, or one paired from the folder). */
  draftPath?: string
  /** The model's own multi-token-prediction heads (a GGUF with `nextn` layers). */
  mtp?: boolean
  /** models.json asked for it (`draft`, `"speculative": "ngram"` or `true`), rather than Hearth's default. */
  requested?: boolean
}

export interface EngineModelInfo {
  /** Devices the engine placed the model on, as it names them (CPU, Metal, CUDA0, …), or where a remote one runs. */
  devices: string[]
  /** From the process's start to a model ready to answer (loaded and warmed up). */
  loadMs: number
  /** Chat models with a slot cache: the time taken to load the saved conversations back into the slots. */
  restoreMs?: number
  vision: boolean
  /** The program serving the model, where it is one built here (absent for remote models). */
  engine?: EngineBuildInfo
  /**
   * Tokens of context the engine really gives each request, where it says (llama-server caps a
   * slot at the context the model was trained with, whatever was asked).
   */
  contextLength?: number
  /** Whether the chat template can call tools, as the engine found when it loaded it (chat models). */
  callsTools?: boolean
}

export interface EngineBuildInfo {
  name: 'llama-server' | 'whisper-server'
  /** The llama.cpp commit it was built from. */
  commit: string
  /** Vector extensions it was compiled for (AVX2, AVX512, NEON, …). */
  cpuFeatures: string[]
  /** The GPU toolkit it was built with: cuda, vulkan, metal or none. */
  gpu: string
  /** What install's self-test said of it, in one line; undefined for a build made before there was one. */
  selfTest?: { passed: boolean; verdict: string; at: string }
  /** What it was built without because the self-test crashed with it (AMX, AVX512, …). */
  withheld?: string[]
}

/**
 * An image is handed to the engine as bytes: a PNG the server decoded, checked and shrunk
 * (media/images) before the job was made, as audio is decoded before a speech job is.
 */
export type ChatContentPart = { type: 'text'; text: string } | { type: 'image'; png: Uint8Array }

export type ChatMessage =
  | { role: 'system' | 'user'; content: string | ChatContentPart[] }
  | {
      role: 'assistant'
      content: string | null
      /** Earlier thinking, for templates that show it to the model again. */
      reasoning_content?: string
      tool_calls?: ToolCall[]
    }
  | { role: 'tool'; content: string; tool_call_id: string }

/** A function call as OpenAI writes it: arguments are a JSON text. */
export interface ToolCall {
  id: string
  type: 'function'
  function: { name: string; arguments: string }
}

/** A function the model may call; `parameters` is a JSON Schema the arguments must satisfy. */
export interface ToolDefinition {
  type: 'function'
  function: { name: string; description?: string; parameters?: Record<string, unknown> }
}

/** Whether the model may, must or must not call a tool, or which one it must call. */
export type ToolChoice = 'none' | 'auto' | 'required' | { function: string }

/** How tokens are picked: the same fields for chat and for completions. */
export interface Sampling {
  temperature: number
  topP: number
  topK: number
  presencePenalty: number
  frequencyPenalty: number
  /** Token id → bias added to its logit (-100 bans it, 100 all but forces it). */
  logitBias: Record<number, number> | undefined
  stop: string[]
  seed: number | undefined
  /** llama.cpp's other samplers, where an API names them (Ollama's options); absent = off. */
  extraSamplers?: ExtraSamplers
  /** false: no speculative decoding for this request (Hearth's `speculative` field); absent = the model's own. */
  speculative?: boolean
}

/** Samplers OpenAI's API has no field for, which Ollama's `options` set: llama-server's own. */
export interface ExtraSamplers {
  minP?: number
  typicalP?: number
  repeatPenalty?: number
  /** Tokens the repeat penalty looks back over; -1 = the whole context. */
  repeatLastN?: number
  /** 1 or 2 (Mirostat's two versions), with its target surprise and learning rate. */
  mirostat?: { version: 1 | 2; tau: number; eta: number }
}

export interface ChatJob extends Sampling {
  type: 'chat'
  messages: ChatMessage[]
  /** Explicit cap from the request; without it generation runs to the model's limit. */
  maxTokens: number | undefined
  maxCompletionTokens: number
  tools: ToolDefinition[]
  toolChoice: ToolChoice
  parallelToolCalls: boolean
  /** A JSON Schema the answer must satisfy (`{}`: any JSON object); undefined = free text. */
  jsonSchema: Record<string, unknown> | undefined
  /** `none` switches thinking off where the template has a switch; other levels go to the template. */
  reasoningEffort: string | undefined
  /** Tokens the model may think before the engine closes its thinking, as the client set it; undefined = no cap. */
  thinkingBudgetTokens: number | undefined
  /** Candidates to report per token; undefined = no log probabilities. */
  topLogprobs: number | undefined
  /** The conversation this request continues, as its client named it: kept on one engine slot. */
  conversationKey?: string
}

export type FinishReason = 'stop' | 'length' | 'tool_calls'

/** One generated token's log probability, with the most likely alternatives at that place. */
export interface TokenLogprob {
  token: string
  logprob: number
  bytes: number[]
  top_logprobs: Array<{ token: string; logprob: number; bytes: number[] }>
}

export interface ChatResult {
  type: 'chat'
  text: string
  /** The model's thinking, apart from the answer (thinking templates only). */
  reasoning: string
  toolCalls: ToolCall[]
  logprobs: TokenLogprob[] | undefined
  finishReason: FinishReason
  /** The answer stopped because the context was full, before the request's `max_tokens`. */
  contextFull?: boolean
  promptTokens: number
  completionTokens: number
  /** Of the completion tokens, how many were thinking. */
  reasoningTokens: number
  /** Prompt tokens reused from the engine's cache rather than computed again. */
  cachedTokens?: number
  timings: {
    promptMs: number
    promptPerSecond: number
    predictedMs: number
    predictedPerSecond: number
    /** With speculative decoding: tokens drafted, and how many of them the model accepted. */
    draftTokens?: number
    draftAccepted?: number
    /** Tokens decoded while drafting was paused (its drafts had stopped being accepted). */
    draftPaused?: number
    /** Verification passes that carried a draft. */
    draftSteps?: number
  }
}

/** Text continued as it is, no chat template: `/v1/completions`, with fill-in-the-middle where `suffix` is set. */
export interface CompleteJob extends Sampling {
  type: 'complete'
  /** Text, or the model's own token ids (OpenAI's token-array prompts), continued as they are. */
  prompt: string | number[]
  /** Text after the gap (fill-in-the-middle); needs a model with FIM tokens. */
  suffix: string | undefined
  maxTokens: number
  /** Candidates to report per token (0–5, OpenAI's legacy `logprobs`); undefined = none. */
  logprobs: number | undefined
}

export interface CompleteResult {
  type: 'complete'
  text: string
  finishReason: 'stop' | 'length'
  promptTokens: number
  completionTokens: number
  logprobs: TokenLogprob[] | undefined
}

/** How relevant each document is to the query, by a reranker (an encoder with a classification head). */
export interface RerankJob {
  type: 'rerank'
  query: string
  documents: string[]
}

export interface RerankResult {
  type: 'rerank'
  /** One score per document, in the documents' order (higher is more relevant). */
  scores: number[]
  promptTokens: number
}

/** How many of the model's tokens each text is (no special tokens added): what budgets are counted in. */
export interface CountJob {
  type: 'count'
  texts: string[]
}

export interface CountResult {
  type: 'count'
  /** One count per text, in order. */
  tokens: number[]
}

/** Text, or token ids in the model's own vocabulary. */
export type EmbedInput = string | number[]

export interface EmbedJob {
  type: 'embed'
  inputs: EmbedInput[]
  /** The request sent one input rather than an array, so errors name `input` instead of `input[0]`. */
  single: boolean
  /** Keep this many leading dimensions (then L2-normalise); undefined keeps them all. */
  dimensions: number | undefined
}

export interface EmbedResult {
  type: 'embed'
  /** One L2-normalised vector per input, in input order, back to back. */
  vectors: Float32Array
  dimensions: number
  /** Tokens the model processed, its own special tokens (CLS, SEP, …) included. */
  promptTokens: number
}

/**
 * Speech to text: transcribed in its own language, or translated to English. The audio is a file
 * the server wrote and deletes when the request ends: 16 kHz mono float32 samples, little-endian,
 * nothing else. A file rather than a typed array in the message, so a long upload is never held
 * whole in this process nor serialised through the IPC channel (measured: 192 MB over IPC blocks
 * the server's event loop ~0.5 s).
 */
export interface SpeechJob {
  type: 'speech'
  task: 'transcribe' | 'translate'
  audioPath: string
  /** ISO-639-1 hint (whisper's code); undefined = detect. */
  language: string | undefined
  /** Initial prompt: style, spellings, or the text before this audio. */
  prompt: string | undefined
  /** undefined = greedy decoding without fallback; a number = start there and let whisper raise it. */
  temperature: number | undefined
  /** Each segment's tokens, probabilities and timings are wanted (verbose_json, word timings, logprobs). */
  detailed: boolean
  /** Of those, each token's probability in particular (`include[]=logprobs`). */
  logprobs: boolean
  /** Skip silence with the model's voice-activity detector; undefined = off. */
  vad?: VadOptions
}

/** whisper.cpp's voice-activity options; unset ones keep whisper.cpp's defaults. */
export interface VadOptions {
  /** Speech probability above which a frame counts as speech (0–1). */
  threshold?: number
  /** Silence shorter than this does not end a stretch of speech. */
  minSilenceMs?: number
  /** Audio kept on each side of a stretch of speech. */
  speechPadMs?: number
}

/** One of whisper's tokens (or a few, when one character spans them), timed in the audio. */
export interface SpeechToken {
  text: string
  probability: number
  startMs: number
  endMs: number
}

/** What whisper reports of a segment beyond its text, when the job asked for it. */
export interface SegmentDetail {
  /** The token ids of the text, special tokens left out. */
  tokenIds: number[]
  tokens: SpeechToken[]
  /** The temperature the segment was decoded at. */
  temperature: number
  avgLogprob: number
  noSpeechProb: number
}

/** Times in milliseconds from the start of the audio; `text` as whisper wrote it (leading space and all). */
export interface SpeechSegment {
  startMs: number
  endMs: number
  text: string
  detail?: SegmentDetail
}

export interface SpeechResult {
  type: 'speech'
  segments: SpeechSegment[]
  /** The language whisper detected (or was told), as its code. */
  language: string
  durationSeconds: number
  /** Wall time whisper spent, all chunks together. */
  processMs: number
}

export type EngineJob = ChatJob | CompleteJob | EmbedJob | RerankJob | SpeechJob | CountJob
export type EngineResult = ChatResult | CompleteResult | EmbedResult | RerankResult | SpeechResult | CountResult

/** The result a job of a kind gives: a chat job a ChatResult, and so on. */
export type ResultOf<J extends EngineJob> = Extract<EngineResult, { type: J['type'] }>

/** Streamed while a job runs: generated text, thinking and tool calls (chat), or a finished segment of speech. */
export type JobProgress =
  /** The prompt's size, and how much of it the engine's cache held, before any work on it. */
  | { type: 'prompt'; promptTokens: number; cachedTokens: number }
  | { type: 'text'; text: string; logprobs?: TokenLogprob[] }
  | { type: 'reasoning'; text: string }
  /** A piece of a tool call: its first piece has the id and name, the rest carry arguments. */
  | { type: 'tool_call'; index: number; id?: string; name?: string; arguments: string }
  | { type: 'segment'; segment: SpeechSegment }
