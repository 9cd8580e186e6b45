import type { JobProgress, TokenLogprob } from '../engine-jobs.ts'

/**
 * Text pieces held until `flush()`, then sent as one message. Other progress (thinking, tool
 * calls, segments) is never merged, and goes out after any text that came before it. The
 * llama-server and remote engines flush once per read of their stream: the tokens one write
 * upstream carried leave in one message, and each message costs a write to the client.
 */
export class ProgressBatch {
  private pendingText = ''
  private pendingLogprobs: TokenLogprob[] | undefined

  constructor(private readonly send: (progress: JobProgress) => void) {}

  emit(progress: JobProgress): void {
    if (progress.type !== 'text') {
      this.flush()
      this.send(progress)
      return
    }
    this.pendingText += progress.text
    if (progress.logprobs) (this.pendingLogprobs ??= []).push(...progress.logprobs)
  }

  flush(): void {
    if (!this.pendingText) return
    const text = this.pendingText
    const logprobs = this.pendingLogprobs
    this.pendingText = ''
    this.pendingLogprobs = undefined
    this.send(logprobs ? { type: 'text', text, logprobs } : { type: 'text', text })
  }
}
