/**
 * The one server-sent-events reader: an async generator over a fetch body that yields each event's
 * data, ends at `data: [DONE]` or the end of the body, and always releases the body's reader.
 * Follows the EventSource parsing rules: CR, LF or CRLF line ends, `data:` lines joined by LF, an
 * event dispatched on a blank line, comment lines (`: ping`) ignored.
 */

export interface SseEvent {
  /** The `event:` field, `message` when absent. */
  event: string
  data: string
}

export async function* readSse(body: ReadableStream<Uint8Array>, signal?: AbortSignal): AsyncGenerator<SseEvent> {
  const reader = body.getReader()
  const decoder = new TextDecoder()
  let buffer = ''
  let data: string[] = []
  let event = ''
  // A CR at the end of a chunk may be the first half of a CRLF split across chunks.
  let pendingCr = false
  try {
    while (true) {
      if (signal?.aborted) return
      const { value, done } = await reader.read()
      if (done) break
      let text = decoder.decode(value, { stream: true })
      if (pendingCr && text.startsWith('\n')) text = text.slice(1)
      buffer += text
      pendingCr = buffer.endsWith('\r')
      const lines = buffer.split(/\r\n|\r|\n/)
      buffer = lines.pop() ?? ''
      for (const line of lines) {
        if (line === '') {
          if (data.length > 0) {
            const payload = data.join('\n')
            if (payload === '[DONE]') return
            yield { event: event || 'message', data: payload }
          }
          data = []
          event = ''
          continue
        }
        if (line.startsWith(':')) continue
        const colon = line.indexOf(':')
        const field = colon < 0 ? line : line.slice(0, colon)
        let value = colon < 0 ? '' : line.slice(colon + 1)
        if (value.startsWith(' ')) value = value.slice(1)
        if (field === 'data') data.push(value)
        else if (field === 'event') event = value
      }
    }
    // A stream cut off without its blank line still delivers what it finished saying.
    if (buffer !== '' && buffer.startsWith('data:')) data.push(buffer.slice(5).replace(/^ /, ''))
    const payload = data.join('\n')
    if (data.length > 0 && payload !== '[DONE]') yield { event: event || 'message', data: payload }
  } finally {
    // Cancelling closes the connection when the consumer stopped early; a finished body ignores it.
    await reader.cancel().catch(() => undefined)
    reader.releaseLock()
  }
}

/** The events' data parsed as JSON, in order. */
export async function* readSseJson<T>(body: ReadableStream<Uint8Array>, signal?: AbortSignal): AsyncGenerator<T> {
  for await (const { data } of readSse(body, signal)) yield JSON.parse(data) as T
}
