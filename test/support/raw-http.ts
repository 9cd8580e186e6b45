/**
 * HTTP by hand over a socket, for what fetch refuses to send: invalid UTF-8, wrong lengths, broken
 * framing, bytes trickled slowly. Always bounded by a deadline; the socket is destroyed at the end.
 */
import { connect } from 'node:net'

export interface RawResponse {
  /** Undefined when the server closed the connection without an answer. */
  status: number | undefined
  headers: Record<string, string>
  body: string
  /** Milliseconds until the server closed (or the deadline). */
  elapsedMs: number
  timedOut: boolean
}

export interface RawOptions {
  /** Give up (and report timedOut) after this long. */
  timeoutMs?: number
  /** Send the bytes in pieces this large with a pause between them (slow loris). */
  trickle?: { chunkBytes: number; delayMs: number }
  /** Half-close the socket after sending (a client that stops mid-body). */
  endAfterSend?: boolean
}

export function rawRequest(url: string, request: Buffer | string, options: RawOptions = {}): Promise<RawResponse> {
  const { hostname, port } = new URL(url)
  const bytes = typeof request === 'string' ? Buffer.from(request, 'latin1') : request
  const started = performance.now()
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port) })
    const received: Buffer[] = []
    let settled = false
    let trickleTimer: NodeJS.Timeout | undefined
    const finish = (timedOut: boolean) => {
      if (settled) return
      settled = true
      clearTimeout(deadline)
      clearTimeout(trickleTimer)
      socket.destroy()
      resolve({ ...parseResponse(Buffer.concat(received)), elapsedMs: performance.now() - started, timedOut })
    }
    const deadline = setTimeout(() => finish(true), options.timeoutMs ?? 10_000)
    socket.on('data', (d: Buffer) => {
      received.push(d)
      if (complete(Buffer.concat(received))) finish(false)
    })
    socket.on('close', () => finish(false))
    socket.on('error', () => finish(false))
    socket.on('connect', () => {
      if (!options.trickle) {
        socket.write(bytes)
        if (options.endAfterSend) socket.end()
        return
      }
      let offset = 0
      const { chunkBytes, delayMs } = options.trickle
      const next = () => {
        if (settled || socket.destroyed) return
        socket.write(bytes.subarray(offset, offset + chunkBytes))
        offset += chunkBytes
        if (offset < bytes.length) trickleTimer = setTimeout(next, delayMs)
        else if (options.endAfterSend) socket.end()
      }
      next()
    })
  })
}

/** The final answer's head and body; interim 1xx answers (100 Continue) before it are skipped. */
function splitHead(buffer: Buffer): { head: string; body: Buffer } | undefined {
  let rest = buffer
  for (;;) {
    const end = rest.indexOf('\r\n\r\n')
    if (end === -1) return undefined
    const head = rest.subarray(0, end).toString('latin1')
    if (!/^HTTP\/1\.[01] 1\d\d/.test(head)) return { head, body: rest.subarray(end + 4) }
    rest = rest.subarray(end + 4)
  }
}

function headersOf(head: string): Record<string, string> {
  const headers: Record<string, string> = {}
  for (const line of head.split('\r\n').slice(1)) {
    const colon = line.indexOf(':')
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
  }
  return headers
}

/** True once a whole answer with a Content-Length is in (chunked answers end when the server closes). */
function complete(buffer: Buffer): boolean {
  const parts = splitHead(buffer)
  if (!parts) return false
  const length = headersOf(parts.head)['content-length']
  return length !== undefined && parts.body.length >= Number(length)
}

function parseResponse(buffer: Buffer): Omit<RawResponse, 'elapsedMs' | 'timedOut'> {
  const parts = splitHead(buffer)
  if (!parts) return { status: undefined, headers: {}, body: '' }
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(parts.head)?.[1])
  const headers = headersOf(parts.head)
  let body = parts.body
  if (headers['transfer-encoding'] === 'chunked') body = dechunk(body)
  return { status: Number.isFinite(status) ? status : undefined, headers, body: body.toString('utf8') }
}

function dechunk(body: Buffer): Buffer {
  const out: Buffer[] = []
  let offset = 0
  while (offset < body.length) {
    const lineEnd = body.indexOf('\r\n', offset)
    if (lineEnd === -1) break
    const size = parseInt(body.subarray(offset, lineEnd).toString('latin1'), 16)
    if (!Number.isFinite(size) || size === 0) break
    out.push(body.subarray(lineEnd + 2, lineEnd + 2 + size))
    offset = lineEnd + 2 + size + 2
  }
  return Buffer.concat(out)
}

/** A request with the right Content-Length for its body (unless one is given in `headers`). */
export function httpRequest(method: string, path: string, host: string, headers: Record<string, string>, body: Buffer | string = ''): Buffer {
  const bodyBytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body
  const all: Record<string, string> = { host, connection: 'close', ...headers }
  if (!Object.keys(all).some((k) => k.toLowerCase() === 'content-length') && !all['transfer-encoding']) {
    all['content-length'] = String(bodyBytes.length)
  }
  const head = `${method} ${path} HTTP/1.1\r\n${Object.entries(all)
    .map(([k, v]) => `${k}: ${v}`)
    .join('\r\n')}\r\n\r\n`
  return Buffer.concat([Buffer.from(head, 'latin1'), bodyBytes])
}
