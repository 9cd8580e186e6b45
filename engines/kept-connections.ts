/**
 * POSTs over kept-alive connections, to engines and to remote servers: a request goes out on an
 * open connection instead of waiting for a new one (and, to an https server, a new handshake). A
 * request sent on a kept connection that the other side closed just as it was reused (its idle
 * time ran out, or it closes after each stream, as llama-server does without patch llama-17)
 * never reached it, so it is sent again; a fresh connection that fails is never tried again (over
 * node:http, which says whether a connection was kept; fetch does not).
 */
import type { ClientRequest, IncomingMessage, RequestOptions } from 'node:http'

const MAX_SEND_ATTEMPTS = 3
/** What a request sent on a kept connection met when the other side had just closed it. */
const CLOSED_ON_REUSE = Symbol('closed on reuse')

/** `request` from node:http or node:https. */
type Send = (options: RequestOptions, onResponse: (res: IncomingMessage) => void) => ClientRequest

/** POSTs `payload` (JSON); the answer as node:http gives it (status, headers, a byte stream). */
export async function postOnKeptConnection(send: Send, options: RequestOptions, payload: Buffer): Promise<IncomingMessage> {
  for (let attempt = 1; ; attempt++) {
    const answer = await postOnce(send, options, payload, attempt < MAX_SEND_ATTEMPTS)
    if (answer !== CLOSED_ON_REUSE) return answer
  }
}

function postOnce(send: Send, options: RequestOptions, payload: Buffer, mayRetry: boolean): Promise<IncomingMessage | typeof CLOSED_ON_REUSE> {
  return new Promise((resolve, reject) => {
    const req = send(
      { ...options, method: 'POST', headers: { ...options.headers, 'content-type': 'application/json', 'content-length': payload.length } },
      resolve,
    )
    req.setNoDelay(true)
    req.once('error', (e) => (mayRetry && req.reusedSocket && isClosedConnection(e) ? resolve(CLOSED_ON_REUSE) : reject(e)))
    req.end(payload)
  })
}

/**
 * fetch over its own kept connections: a request that met a connection the server had closed is
 * sent again while `worthAnother()` says so (fetch does not tell a kept connection from a fresh
 * one, so a fresh one that fails is tried again too, within the same few attempts).
 */
export async function fetchOnKeptConnection(url: string, init: RequestInit, worthAnother: () => boolean = () => true): Promise<Response> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fetch(url, init)
    } catch (e) {
      if (attempt >= MAX_SEND_ATTEMPTS || init.signal?.aborted || !isClosedConnection(e) || !worthAnother()) throw e
    }
  }
}

/** A kept-alive connection the other side had closed (fetch's error, or node:http's): the request never reached it. */
function isClosedConnection(e: unknown): boolean {
  const code = (e as { cause?: { code?: string } }).cause?.code ?? (e as { code?: string }).code
  return code === 'UND_ERR_SOCKET' || code === 'ECONNRESET' || code === 'EPIPE'
}
