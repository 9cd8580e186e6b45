import type { JobProgress } from './engine-protocol.ts'

/**
 * Merges text pieces that arrive within one turn of the event loop into one message. When tokens
 * come faster than the server can forward them, this keeps IPC and HTTP writes from falling
 * behind; when they come slowly, each still goes out on its own at once.
 */
export class ProgressCoalescer {
  private pendingText = ''
  private scheduled = false

  constructor(private readonly send: (progress: JobProgress) => void) {}

  emit(progress: JobProgress): void {
    if (progress.type !== 'text') {
      this.flush()
      this.send(progress)
      return
    }
    this.pendingText += progress.text
    if (!this.scheduled) {
      this.scheduled = true
      setImmediate(() => this.flush())
    }
  }

  flush(): void {
    this.scheduled = false
    if (!this.pendingText) return
    const text = this.pendingText
    this.pendingText = ''
    this.send({ type: 'text', text })
  }
}
