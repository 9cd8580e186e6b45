/**
 * The JSON body reader: its own fast path (UTF-8 with a stated length) and body-parser's general
 * one (chunked, compressed, other charsets) must read and refuse bodies alike. In-process: an
 * Express app with just the reader and the server's error handler.
 */
import { once } from 'node:events'
import { request, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { gzipSync } from 'node:zlib'
import express from 'express'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { errorHandler } from '../../main/server/http/http-errors.ts'
import { jsonBodyParser } from '../../main/server/http/json-body.ts'

const LIMIT = 1000
let server: Server
let port: number

beforeAll(async () => {
  const app = express()
  app.post('/echo', jsonBodyParser(LIMIT), (req, res) => {
    res.json({ body: req.body ?? null })
  })
  app.use(errorHandler)
  server = app.listen(0, '127.0.0.1')
  await once(server, 'listening')
  port = (server.address() as AddressInfo).port
})

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

interface Sent {
  status: number
  json: { body?: unknown; error?: { code: string; message: string } }
}

/** POSTs raw bytes; `chunked` leaves the length unstated, which takes body-parser's path. */
function post(body: Buffer | string, headers: Record<string, string> = {}, chunked = false, to = port): Promise<Sent> {
  const bytes = Buffer.from(body)
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: to,
        path: '/echo',
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(chunked ? {} : { 'content-length': bytes.byteLength }), ...headers },
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('error', reject)
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString('utf8')) }))
      },
    )
    req.once('error', reject)
    if (chunked) {
      // Two writes: no length is stated, so the body goes chunked.
      req.write(bytes.subarray(0, 1))
      req.end(bytes.subarray(1))
    } else req.end(bytes)
  })
}

/** The same through a reader whose limit fits 200 kB. */
let largePort: number
beforeAll(async () => {
  const app = express()
  app.post('/echo', jsonBodyParser(1_000_000), (req, res) => {
    res.json({ body: req.body ?? null })
  })
  app.use(errorHandler)
  const large = app.listen(0, '127.0.0.1')
  await once(large, 'listening')
  largePort = (large.address() as AddressInfo).port
  return () => new Promise<void>((resolve) => large.close(() => resolve()))
})

const postLarge = (body: string, chunked: boolean) => post(body, {}, chunked, largePort)

describe('JSON bodies, read alike on both paths', () => {
  const bodies: Array<[string, string, number, unknown]> = [
    ['an object', '{"a": [1, "x"]}', 200, { a: [1, 'x'] }],
    ['an array', '[1, 2]', 200, [1, 2]],
    ['leading whitespace', ' \n\t{"a": 1}', 200, { a: 1 }],
    ['a byte order mark', '\ufeff{"a": 1}', 200, { a: 1 }],
    ['a lone surrogate, mended', '{"a": "x\\ud800y"}', 200, { a: 'x\ufffdy' }],
    ['a surrogate pair, kept', '{"a": "\\ud83d\\ude00"}', 200, { a: '\u{1f600}' }],
    ['a number (not an object)', '3', 400, 'invalid_json'],
    ['a string (not an object)', '"x"', 400, 'invalid_json'],
    ['whitespace only', '  ', 400, 'invalid_json'],
    ['malformed', '{"a": ', 400, 'invalid_json'],
  ]
  for (const chunked of [false, true]) {
    it.each(bodies)(`%s (${chunked ? 'chunked' : 'length stated'})`, async (_name, body, status, expected) => {
      const sent = await post(body, {}, chunked)
      expect(sent.status).toBe(status)
      if (status === 200) expect(sent.json.body).toEqual(expected)
      else expect(sent.json.error?.code).toBe(expected)
    })
  }

  it('reads an empty body with a stated length as {}', async () => {
    expect((await post('')).json.body).toEqual({})
  })

  it('takes charset=utf-8 and a +json media type on the fast path', async () => {
    expect((await post('{"a": 1}', { 'content-type': 'application/json; charset=UTF-8' })).json.body).toEqual({ a: 1 })
    expect((await post('{"a": 1}', { 'content-type': 'application/vnd.api+json' })).json.body).toEqual({ a: 1 })
  })

  it('still reads compressed bodies, and refuses other charsets by name', async () => {
    const gzipped = await post(gzipSync('{"a": 1}'), { 'content-encoding': 'gzip' })
    expect(gzipped.json.body).toEqual({ a: 1 })
    const latin1 = await post('{"a": 1}', { 'content-type': 'application/json; charset=latin1' })
    expect(latin1.status).toBe(400)
    expect(latin1.json.error?.message).toMatch(/UTF-8/)
  })

  it('refuses a body over the limit with 413 and the limit, stated or not', async () => {
    const big = JSON.stringify({ a: 'x'.repeat(LIMIT) })
    for (const chunked of [false, true]) {
      const sent = await post(big, {}, chunked)
      expect(sent.status).toBe(413)
      expect(sent.json.error?.message).toContain(String(LIMIT))
    }
  })

  it('takes nesting 128 deep and refuses deeper by name, on both paths, however deep', async () => {
    const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth)
    for (const chunked of [false, true]) {
      expect((await post(nested(128), {}, chunked)).status).toBe(200)
      for (const depth of [129, 5_000, 100_000]) {
        const sent = await postLarge(nested(depth), chunked)
        expect(sent.status).toBe(400)
        expect(sent.json.error?.code).toBe('invalid_json')
      }
    }
    expect((await post(nested(129))).json.error?.message).toMatch(/nested deeper than 128 levels/)
  })

  it('survives a client that leaves halfway through its body', async () => {
    const req = request({ host: '127.0.0.1', port, path: '/echo', method: 'POST', headers: { 'content-type': 'application/json', 'content-length': 100 } })
    req.on('error', () => undefined)
    req.write('{"a": "half')
    await new Promise((r) => setTimeout(r, 50))
    req.destroy()
    await new Promise((r) => setTimeout(r, 50))
    expect((await post('{"still": "here"}')).json.body).toEqual({ still: 'here' })
  })
})
