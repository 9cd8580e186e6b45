/** Transfer rate over a sliding window, so a stall shows quickly and one burst does not linger. */
export class RateMeter {
  private samples: Array<{ at: number; bytes: number }> = []

  constructor(
    private readonly windowMs = 5000,
    private readonly now: () => number = Date.now,
  ) {}

  record(bytes: number): void {
    const at = this.now()
    const n = this.samples.length
    // One sample per tenth of a second is plenty; a sample per network chunk would pile up.
    if (n >= 2 && at - this.samples[n - 2]!.at < 100) this.samples[n - 1] = { at, bytes }
    else this.samples.push({ at, bytes })
    while (this.samples.length > 2 && at - this.samples[1]!.at >= this.windowMs) this.samples.shift()
  }

  /** Bytes per second; 0 until there is half a second of history. */
  bytesPerSecond(): number {
    const first = this.samples[0]
    const last = this.samples[this.samples.length - 1]
    if (!first || !last) return 0
    // A quiet moment since the last byte counts as time too.
    const span = this.now() - first.at
    if (span < 500) return 0
    return Math.max(0, Math.round(((last.bytes - first.bytes) * 1000) / span))
  }

  reset(): void {
    this.samples = []
  }
}

export function etaSeconds(bytes: number, total: number | null, rateBps: number): number | null {
  if (total === null || rateBps <= 0) return null
  return Math.max(0, Math.ceil((total - bytes) / rateBps))
}
