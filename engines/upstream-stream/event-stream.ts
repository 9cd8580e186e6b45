/**
 * The `data:` payloads of a server-sent event stream. llama-server (and the OpenAI-style servers
 * remote models run on) send `data:` lines and little else of SSE, so this reads just that,
 * without a parser's overhead per token.
 */

/**
 * The payloads in order, a batch per read: what one read of the connection carried (a fast
 * model's engine writes several tokens at once), so a reader can act once per batch.
 */
export async function* readEventBatches(body: AsyncIterable<Uint8Array>): AsyncGenerator<string[]> {
  const decoder = new TextDecoder()
  let buffered = ''
  const iterator = body[Symbol.asyncIterator]()
  try {
    for (;;) {
      const { value, done } = await iterator.next()
      if (done) break
      buffered += decoder.decode(value, { stream: true }).replaceAll('\r\n', '\n')
      const batch: string[] = []
      let end: number
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const data = dataOf(buffered.slice(0, end))
        buffered = buffered.slice(end + 2)
        if (data !== undefined) batch.push(data)
      }
      if (batch.length > 0) yield batch
    }
    const last = dataOf(buffered + decoder.decode())
    if (last !== undefined) yield [last]
  } finally {
    // A reader that stops early lets go of the connection.
    await iterator.return?.()
  }
}

/** The event's data lines joined, or undefined for a comment or an empty event. */
function dataOf(event: string): string | undefined {
  // The common case, one `data: ` line, without splitting.
  if (event.startsWith('data: ') && !event.includes('\n')) return event.slice(6)
  const lines = event
    .split('\n')
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5))
  return lines.length > 0 ? lines.join('\n') : undefined
}
