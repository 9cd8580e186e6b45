/** Ollama's streams: one JSON object per line (`application/x-ndjson`), started with the first line. */
import type { Response } from 'express'
import type { EventSink } from '../services/pipeline/answer-pipeline.ts'

export class NdjsonStream {
  private opened = false

  constructor(private readonly res: Response) {}

  send(line: object): void {
    if (!this.opened) {
      this.opened = true
      this.res.status(200).set({ 'Content-Type': 'application/x-ndjson', 'Cache-Control': 'no-cache', 'X-Accel-Buffering': 'no' })
      // Every line is something a client waits for: no Nagle delay.
      this.res.socket?.setNoDelay(true)
    }
    if (!this.res.writableEnded) this.res.write(`${JSON.stringify(line)}\n`)
  }

  end(): void {
    if (!this.res.writableEnded) this.res.end()
  }
}

/** An answer's events as Ollama's lines. */
export function ndjsonEvents(res: Response): EventSink {
  const stream = new NdjsonStream(res)
  return { send: ({ data }) => stream.send(data as object), end: () => stream.end() }
}
