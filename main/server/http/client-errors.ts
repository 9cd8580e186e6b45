/**
 * Requests Node's HTTP parser refuses before Express sees them (a broken request line, headers too
 * large, a bad chunked body, a client too slow to send its request, an unknown `Expect`) still get
 * the API's error body, then the connection closes. Without this Node answers them with a bare
 * status line.
 */
import type { Socket } from 'node:net'
import type { Server } from 'node:http'

interface ParserError extends Error {
  code?: string
}

export function answerClientErrors(server: Server): void {
  // An `Expect` other than 100-continue: Node would answer a bare 417.
  server.on('checkExpectation', (_req, res) => {
    const body = JSON.stringify({
      error: { message: "Only 'Expect: 100-continue' is supported", type: 'invalid_request_error', param: null, code: 'expectation_failed' },
    })
    res.writeHead(417, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body), Connection: 'close' })
    res.end(body)
  })
  server.on('clientError', (error: ParserError, socket: Socket) => {
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage
    if (error.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
      socket.destroy()
      return
    }
    const { status, reason, type, code, message } = describe(error)
    const body = JSON.stringify({ error: { message, type, param: null, code } })
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    )
    // A client that stops reading must not keep the socket: give the answer a moment, then drop it.
    setTimeout(() => socket.destroy(), 1_000).unref()
  })
}

function describe(error: ParserError) {
  switch (error.code) {
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return {
        status: 408,
        reason: 'Request Timeout',
        type: 'request_timeout',
        code: 'request_timeout',
        message: 'The request did not arrive in time; the connection is closed',
      }
    case 'HPE_HEADER_OVERFLOW':
      return {
        status: 431,
        reason: 'Request Header Fields Too Large',
        type: 'invalid_request_error',
        code: 'headers_too_large',
        message: 'The request headers are too large',
      }
    default:
      return {
        status: 400,
        reason: 'Bad Request',
        type: 'invalid_request_error',
        code: 'invalid_request',
        message: 'The request is not valid HTTP',
      }
  }
}
