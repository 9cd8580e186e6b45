import type { JobProgress, TokenLogprob } from './engine-protocol.ts'

/** Text pieces arriving this soon after the last message wait and leave together. */
const MIN_INTERVAL_MS = 2

/**
 * Merges text pieces into fewer messages when they come fast. A piece after a quiet spell goes out
 * at once (so the first token is never held back); pieces that follow within a couple of
 * milliseconds are merged, which keeps IPC and HTTP writes from falling behind a model that makes
 * thousands of tokens a second. Other progress (thinking, tool calls, segments) is never merged,
 * and goes out after any text that came before it.
 */
export class ProgressCoalescer {
  private pendingText = ''
  private pendingLogprobs: TokenLogprob[] | undefined
  private timer: NodeJS.Timeout | undefined
  private lastSent = -Infinity

  constructor(private readonly send: (progress: JobProgress) => void) {}

  emit(progress: JobProgress): void {
    if (progress.type !== 'text') {
      this.flush()
      this.send(progress)
      return
    }
    this.pendingText += progress.text
    if (progress.logprobs) (this.pendingLogprobs ??= []).push(...progress.logprobs)
    if (this.timer) return
    const wait = this.lastSent + MIN_INTERVAL_MS - performance.now()
    if (wait <= 0) this.flush()
    else this.timer = setTimeout(() => this.flush(), wait)
  }

  flush(): void {
    clearTimeout(this.timer)
    this.timer = undefined
    if (!this.pendingText) return
    const text = this.pendingText
    const logprobs = this.pendingLogprobs
    this.pendingText = ''
    this.pendingLogprobs = undefined
    this.lastSent = performance.now()
    this.send(logprobs ? { type: 'text', text, logprobs } : { type: 'text', text })
  }
}
