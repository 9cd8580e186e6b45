/** Server-sent events on an Express response, started lazily so early errors can still be plain 4xx. */
import type { Response } from 'express'

export class SseStream {
  private opened = false

  constructor(private readonly res: Response) {}

  get started(): boolean {
    return this.opened
  }

  send(event: unknown): void {
    this.open()
    if (!this.res.writableEnded) this.res.write(`data: ${JSON.stringify(event)}\n\n`)
  }

  /** A comment line: keeps proxies and clients from timing out an idle stream. */
  ping(): void {
    if (this.opened && !this.res.writableEnded) this.res.write(': ping\n\n')
  }

  done(): void {
    this.open()
    if (!this.res.writableEnded) this.res.end('data: [DONE]\n\n')
  }

  private open(): void {
    if (this.opened) return
    this.opened = true
    this.res.status(200).set({
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache',
      Connection: 'keep-alive',
      'X-Accel-Buffering': 'no',
    })
    this.res.flushHeaders()
    // Small writes must leave at once: every token is an event the client is waiting for.
    this.res.socket?.setNoDelay(true)
  }
}
