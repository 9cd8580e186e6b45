/**
 * Server-sent events leave as few writes as they can: what one turn of the event loop sends (the
 * headers, the role and the first token) goes out in one write, and each later event in one write
 * of its own, never split into its chunk length, data and line ends (on a no-delay socket each
 * write is a packet the client wakes for). Nothing written is lost when the stream ends or fails.
 * In-process: an Express app streaming through SseStream, its socket's writes counted.
 */
import { once } from 'node:events'
import { get, type Server } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import express, { type Response } from 'express'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { errorHandler, sendError } from '../../main/server/http/http-errors.ts'
import { ApiError } from '../../main/server/services/api-error.ts'
import { SseStream } from '../../main/server/http/sse.ts'

let server: Server
let port: number
/** Writes the last response's socket made (each one a system call, a packet on a no-delay socket). */
let writes = 0

const nextTurn = () => new Promise((resolve) => setTimeout(resolve, 5))

/** Counts the writes `res`'s socket makes from now on. */
function countWrites(res: Response): void {
  writes = 0
  const socket = res.socket as Socket & { _writeGeneric: (...args: unknown[]) => unknown }
  const writeGeneric = socket._writeGeneric
  socket._writeGeneric = function (...args: unknown[]) {
    writes++
    return writeGeneric.apply(this, args)
  }
}

beforeAll(async () => {
  const app = express()
  app.get('/tokens', async (_req, res) => {
    countWrites(res)
    const sse = new SseStream(res)
    sse.send({ delta: { role: 'assistant' } })
    sse.send({ delta: { content: 'Once' } })
    for (const word of [' upon', ' a', ' time']) {
      await nextTurn()
      sse.send({ delta: { content: word } })
    }
    await nextTurn()
    sse.send({ delta: {}, finish_reason: 'stop' })
    sse.done()
  })
  // Three events and the failure in one turn: none of them may be dropped.
  app.get('/fails', (_req, res) => {
    countWrites(res)
    const sse = new SseStream(res)
    sse.send({ delta: { role: 'assistant' } })
    sse.send({ delta: { content: 'Once' } })
    sse.send({ delta: { content: ' upon' } })
    sendError(res, new ApiError(500, 'server_error', 'engine_crashed', 'the engine stopped'))
  })
  app.use(errorHandler)
  server = app.listen(0, '127.0.0.1')
  await once(server, 'listening')
  port = (server.address() as AddressInfo).port
})

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

/** The events of a stream, as the client read them. */
function events(path: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    get({ port, path, host: '127.0.0.1' }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk) => (text += chunk))
      res.on('end', () => resolve(text.split('\n\n').filter(Boolean)))
    }).on('error', reject)
  })
}

describe('event streams', () => {
  it('send one write per turn of the event loop: headers, role and first token together, then one per event', async () => {
    const got = await events('/tokens')
    expect(got).toEqual([
      'data: {"delta":{"role":"assistant"}}',
      'data: {"delta":{"content":"Once"}}',
      'data: {"delta":{"content":" upon"}}',
      'data: {"delta":{"content":" a"}}',
      'data: {"delta":{"content":" time"}}',
      'data: {"delta":{},"finish_reason":"stop"}',
      'data: [DONE]',
    ])
    // Turns: headers + role + "Once"; " upon"; " a"; " time"; the finish and [DONE] (the response's
    // end, and its last empty chunk, may take one more).
    expect(writes).toBeGreaterThanOrEqual(5)
    expect(writes).toBeLessThanOrEqual(6)
  })

  it('keep every event written before a failure, and end with the error', async () => {
    const got = await events('/fails')
    expect(got.slice(0, 3)).toEqual(['data: {"delta":{"role":"assistant"}}', 'data: {"delta":{"content":"Once"}}', 'data: {"delta":{"content":" upon"}}'])
    expect(JSON.parse(got[3]!.slice('data: '.length))).toMatchObject({ error: { code: 'engine_crashed' } })
    expect(got).toHaveLength(4)
    expect(writes).toBeLessThanOrEqual(2)
  })
})
