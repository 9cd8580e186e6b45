import type { JobProgress, TokenLogprob } from './engine-protocol.ts'

/**
 * Text pieces held until `flush()`, then sent as one message. Other progress (thinking, tool
 * calls, segments) is never merged, and goes out after any text that came before it. The
 * llama-server engine flushes once per read of its stream: the tokens one write of the engine
 * carried leave in one message, and each message costs a write to the client.
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
    this.held()
  }

  flush(): void {
    if (!this.pendingText) return
    const text = this.pendingText
    const logprobs = this.pendingLogprobs
    this.pendingText = ''
    this.pendingLogprobs = undefined
    this.send(logprobs ? { type: 'text', text, logprobs } : { type: 'text', text })
  }

  protected get holding(): boolean {
    return this.pendingText !== ''
  }

  /** Called with text held; a subclass decides when it leaves. */
  protected held(): void {}
}

/** Text pieces arriving this soon after the last message wait and leave together. */
const MIN_INTERVAL_MS = 2

/**
 * Merges text pieces into fewer messages when they come fast, by time, for a source that gives
 * them one by one (the engine process's IPC). A piece after a quiet spell goes out at once (so the
 * first token is never held back); pieces that follow within a couple of milliseconds are merged,
 * which keeps IPC and HTTP writes from falling behind a model that makes thousands of tokens a second.
 */
export class ProgressCoalescer extends ProgressBatch {
  private timer: NodeJS.Timeout | undefined
  private lastSent = -Infinity

  protected override held(): void {
    if (this.timer) return
    const wait = this.lastSent + MIN_INTERVAL_MS - performance.now()
    if (wait <= 0) this.flush()
    else this.timer = setTimeout(() => this.flush(), wait)
  }

  override flush(): void {
    clearTimeout(this.timer)
    this.timer = undefined
    if (this.holding) this.lastSent = performance.now()
    super.flush()
  }
}
