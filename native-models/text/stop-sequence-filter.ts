/**
 * Cuts generated text at the first stop sequence, while streaming. Text that could still turn into a
 * stop sequence is held back until the next piece decides it, so no part of a stop ever reaches the
 * client, even when a stop spans several tokens.
 */
export class StopSequenceFilter {
  private held = ''
  private done = false
  private readonly longest: number

  constructor(private readonly stops: readonly string[]) {
    this.longest = Math.max(0, ...stops.map((s) => s.length))
  }

  get stopped(): boolean {
    return this.done
  }

  /** Takes the next piece of generated text; returns what is safe to show now. */
  push(piece: string): string {
    if (this.done) return ''
    const text = this.held + piece
    let cut = -1
    for (const stop of this.stops) {
      const at = text.indexOf(stop)
      if (at !== -1 && (cut === -1 || at < cut)) cut = at
    }
    if (cut !== -1) {
      this.done = true
      this.held = ''
      return text.slice(0, cut)
    }
    const keep = this.partialStopSuffixLength(text)
    this.held = text.slice(text.length - keep)
    return text.slice(0, text.length - keep)
  }

  /** Generation ended without a stop: whatever was held back is ordinary text after all. */
  flush(): string {
    const rest = this.done ? '' : this.held
    this.held = ''
    return rest
  }

  /** Length of the longest end of `text` that is the beginning of some stop sequence. */
  private partialStopSuffixLength(text: string): number {
    for (let n = Math.min(this.longest - 1, text.length); n > 0; n--) {
      const tail = text.slice(text.length - n)
      if (this.stops.some((s) => s.startsWith(tail))) return n
    }
    return 0
  }
}
