/**
 * The part of @fugood/whisper.node that Hearth uses, typed once. Like llama.node, the package ships
 * TypeScript sources as CommonJS that a strict ESM project cannot type-check, so it is required here.
 *
 * Known traps:
 * - the `stop()` a transcription hands back may never settle, and it does not interrupt whisper.cpp
 *   (the call runs to the end of its audio; only its callbacks go quiet). Never await it alone;
 * - `transcribeData` takes signed 16-bit PCM, not float32, whatever the name of its argument;
 * - a running transcription does not keep Node's event loop alive: keep something else open.
 */
import { createRequire } from 'node:module'

export interface WhisperContextOptions {
  filePath: string
  useGpu?: boolean
  useFlashAttn?: boolean
}

export interface WhisperSegment {
  text: string
  /** Milliseconds. */
  t0: number
  t1: number
}

export interface TranscribeOptions {
  language?: string
  translate?: boolean
  maxThreads?: number
  maxContext?: number
  maxLen?: number
  tokenTimestamps?: boolean
  offset?: number
  duration?: number
  temperature?: number
  temperatureInc?: number
  beamSize?: number
  bestOf?: number
  prompt?: string
  onProgress?: (progress: number) => void
  onNewSegments?: (result: { nNew: number; totalNNew: number; result: string; segments: WhisperSegment[] }) => void
}

export interface TranscribeResult {
  language?: string
  result: string
  segments: WhisperSegment[]
  isAborted: boolean
}

export interface Transcription {
  stop: () => Promise<void>
  promise: Promise<TranscribeResult>
}

export interface WhisperContext {
  transcribeFile(filePath: string, options?: TranscribeOptions): Transcription
  /** 16 kHz mono signed 16-bit PCM in native byte order (the binding divides by 32768). */
  transcribeData(audioData: ArrayBuffer, options?: TranscribeOptions): Transcription
  getModelInfo(): object
  release(): Promise<void>
}

export interface WhisperNode {
  initWhisper(options: WhisperContextOptions, variant?: 'default' | 'vulkan' | 'cuda'): Promise<WhisperContext>
  toggleNativeLog(enable: boolean): Promise<void>
}

export const whisperNode = createRequire(import.meta.url)('@fugood/whisper.node') as WhisperNode
