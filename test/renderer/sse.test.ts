/** The UI's one SSE reader: EventSource parsing rules, [DONE], and the reader always released. */
import { describe, expect, it } from 'vitest'
import { readSse, readSseJson } from '../../renderer/src/lib/services/sse.ts'

function streamOf(chunks: string[], onCancel?: () => void): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder()
  let i = 0
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (i < chunks.length) controller.enqueue(encoder.encode(chunks[i++]!))
      else controller.close()
    },
    cancel() {
      onCancel?.()
    },
  })
}

async function collect(chunks: string[]): Promise<string[]> {
  const out: string[] = []
  for await (const e of readSse(streamOf(chunks))) out.push(e.data)
  return out
}

describe('readSse', () => {
  it('yields each event in order and stops at [DONE]', async () => {
    expect(await collect(['data: {"a":1}\n\n', 'data: {"a":2}\n\n', 'data: [DONE]\n\n', 'data: after\n\n'])).toEqual(['{"a":1}', '{"a":2}'])
  })

  it('joins events split anywhere across chunks, including inside a CRLF', async () => {
    const text = 'data: {"text":"héllo"}\r\n\r\ndata: two\r\n\r\n'
    const bytes = new TextEncoder().encode(text)
    // One byte at a time: splits the é's two bytes and every CR from its LF.
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const b of bytes) controller.enqueue(new Uint8Array([b]))
        controller.close()
      },
    })
    const out: string[] = []
    for await (const e of readSse(stream)) out.push(e.data)
    expect(out).toEqual(['{"text":"héllo"}', 'two'])
  })

  it('accepts CR-only line ends, joins multi-line data with LF and ignores comments and other fields', async () => {
    expect(await collect([': ping\r\rid: 7\rretry: 10\rdata: line one\rdata:line two\r\r'])).toEqual(['line one\nline two'])
  })

  it('reports the event name, message by default', async () => {
    const events = []
    for await (const e of readSse(streamOf(['event: progress\ndata: 1\n\ndata: 2\n\n']))) events.push(e)
    expect(events).toEqual([
      { event: 'progress', data: '1' },
      { event: 'message', data: '2' },
    ])
  })

  it('delivers a last event cut off before its blank line', async () => {
    expect(await collect(['data: a\n\n', 'data: b'])).toEqual(['a', 'b'])
  })

  it('skips blank events and keep-alive comments', async () => {
    expect(await collect(['\n\n: keep-alive\n\n', 'data: x\n\n'])).toEqual(['x'])
  })

  it('releases the body when the consumer stops early, so the connection closes', async () => {
    let cancelled = false
    const stream = streamOf(['data: 1\n\n', 'data: 2\n\n', 'data: 3\n\n'], () => (cancelled = true))
    for await (const e of readSse(stream)) {
      expect(e.data).toBe('1')
      break
    }
    expect(cancelled).toBe(true)
    expect(stream.locked).toBe(false)
  })

  it('releases the body at [DONE] even with more bytes pending', async () => {
    let cancelled = false
    const stream = streamOf(['data: 1\n\ndata: [DONE]\n\n', 'data: late\n\n'], () => (cancelled = true))
    const out = []
    for await (const e of readSse(stream)) out.push(e.data)
    expect(out).toEqual(['1'])
    expect(cancelled).toBe(true)
    expect(stream.locked).toBe(false)
  })

  it('parses JSON payloads with readSseJson', async () => {
    const out = []
    for await (const e of readSseJson<{ n: number }>(streamOf(['data: {"n":1}\n\ndata: {"n":2}\n\ndata: [DONE]\n\n']))) out.push(e.n)
    expect(out).toEqual([1, 2])
  })
})
