/**
 * The `data:` payloads of a server-sent event stream, in order. llama-server (and the OpenAI-style
 * servers remote models run on) send `data:` lines and little else of SSE, so this reads just
 * that, without a parser's overhead per token.
 */
export async function* readEventStream(body: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder()
  let buffered = ''
  const iterator = body[Symbol.asyncIterator]()
  try {
    for (;;) {
      const { value, done } = await iterator.next()
      if (done) break
      buffered += decoder.decode(value, { stream: true }).replaceAll('\r\n', '\n')
      let end: number
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const event = buffered.slice(0, end)
        buffered = buffered.slice(end + 2)
        const data = dataOf(event)
        if (data !== undefined) yield data
      }
    }
    const last = dataOf(buffered + decoder.decode())
    if (last !== undefined) yield last
  } finally {
    // A reader that stops early lets go of the connection.
    await iterator.return?.()
  }
}

/** The event's data lines joined, or undefined for a comment or an empty event. */
function dataOf(event: string): string | undefined {
  const lines = event
    .split('\n')
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5))
  return lines.length > 0 ? lines.join('\n') : undefined
}
