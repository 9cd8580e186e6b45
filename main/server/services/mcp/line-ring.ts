/** The last lines a server wrote (its stderr, or its connection's errors), to explain a failure. */
export class LineRing {
  private readonly lines: string[] = []
  private partial = ''

  constructor(private readonly capacity = 50) {}

  /** Takes output as it comes: split on line ends, the unfinished last line held until it ends. */
  write(chunk: string): void {
    const parts = (this.partial + chunk).split(/\r?\n/)
    this.partial = parts.pop() ?? ''
    // A program that never ends its line must not grow this without bound.
    if (this.partial.length > 4096) {
      parts.push(this.partial)
      this.partial = ''
    }
    for (const line of parts) this.push(line)
  }

  push(line: string): void {
    const trimmed = line.trimEnd()
    if (trimmed === '') return
    this.lines.push(trimmed.length > 1000 ? `${trimmed.slice(0, 1000)}…` : trimmed)
    if (this.lines.length > this.capacity) this.lines.splice(0, this.lines.length - this.capacity)
  }

  list(): string[] {
    return this.partial.trim() ? [...this.lines, this.partial.trimEnd()].slice(-this.capacity) : [...this.lines]
  }

  last(): string | undefined {
    return this.list().at(-1)
  }
}
