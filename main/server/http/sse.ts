/** Server-sent events on an Express response, started lazily so early errors can still be plain 4xx. */
import type { Response } from 'express'
import type { EventSink } from '../services/pipeline/answer-pipeline.ts'

/**
 * Makes a response an event stream. Small writes must leave at once (no Nagle delay): every event
 * is something a client is waiting for.
 */
function setEventStreamHeaders(res: Response): void {
  res.status(200).set({
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-cache',
    Connection: 'keep-alive',
    'X-Accel-Buffering': 'no',
  })
  res.socket?.setNoDelay(true)
}

export class SseStream {
  private opened = false
  private keepAliveTimer: NodeJS.Timeout | undefined

  constructor(private readonly res: Response) {}

  /**
   * Opens the stream now, with a first comment line so clients see it open before any event, and
   * pings it every `pingMs` while it lasts: proxies and clients time out a stream that is quiet
   * for long (a download's progress or the request log can be).
   */
  openNow(pingMs: number): void {
    this.open()
    this.res.flushHeaders()
    this.res.write(': connected\n\n')
    this.keepAliveTimer = setInterval(() => this.ping(), pingMs)
    this.keepAliveTimer.unref()
    this.res.once('close', () => clearInterval(this.keepAliveTimer))
  }

  get started(): boolean {
    return this.opened
  }

  /** One event; `name` writes an `event:` line too (Anthropic's streams name every event). */
  send(event: unknown, name?: string): void {
    this.open()
    if (this.res.writableEnded) return
    // Node corks the socket for the rest of the event loop's turn at a response's first write in it,
    // so events written in one turn (the role and the first token, say) leave in one packet. Never
    // `res.cork()` on top: a corked response keeps its chunks aside and, uncorked, writes each
    // chunk's length, data and line ends as four packets.
    this.res.write(`${name ? `event: ${name}\n` : ''}data: ${JSON.stringify(event)}\n\n`)
  }

  /** A comment line: keeps proxies and clients from timing out an idle stream. */
  ping(): void {
    if (this.opened && !this.res.writableEnded) this.res.write(': ping\n\n')
  }

  /** Ends the stream with OpenAI's `[DONE]` line. */
  done(): void {
    clearInterval(this.keepAliveTimer)
    this.open()
    if (!this.res.writableEnded) this.res.end('data: [DONE]\n\n')
  }

  /** Ends the stream as it is (Anthropic's streams end with their message_stop event). */
  end(): void {
    clearInterval(this.keepAliveTimer)
    this.open()
    if (!this.res.writableEnded) this.res.end()
  }

  private open(): void {
    if (this.opened) return
    this.opened = true
    // The headers go out with the first event.
    setEventStreamHeaders(this.res)
  }
}

/**
 * An answer's events as SSE: OpenAI's streams end with `[DONE]` (`done`), Anthropic's and the
 * Responses API's with their own last event, and name each event.
 */
export function sseEvents(res: Response, ending: 'done' | 'last-event'): EventSink {
  const sse = new SseStream(res)
  return {
    send: ({ data, name }) => sse.send(data, name),
    end: () => (ending === 'done' ? sse.done() : sse.end()),
  }
}
