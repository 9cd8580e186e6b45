/**
 * Lending this machine's memory (`--lend`): llama.cpp's rpc-server listens on loopback only, and the
 * one way to it from another machine is this server's own port: `GET /api/lend/connect` upgraded
 * to a raw stream (`Upgrade: hearth-rpc`), with a key that may lend (the server's own key, or a key
 * made with `"lend": true`). Any other key, no key, or a plain request gets an HTTP error and never
 * a byte of the RPC protocol. `GET /api/lend` says what is lent, to whom, and which llama.cpp
 * serves it, for a borrower to check before it loads.
 */
import type { IncomingMessage, Server } from 'node:http'
import type { Socket } from 'node:net'
import type { ApiKeys, KeyIdentity } from '../keys/api-keys.ts'
import { LEND_CONNECT_PATH, LEND_PROTOCOL } from '../../../../engines/pool/lender-link.ts'
import type { RpcLender } from '../../../../engines/pool/rpc-lender.ts'

export interface Borrower {
  /** The address the borrower came from. */
  address: string
  /** The key's label or id; `server key` for the server's own. */
  key: string
  since: number
}

export interface Lending {
  lender: RpcLender
  /** The llama.cpp commit the lent rpc-server was built from: a borrower must run the same. */
  commit: string
  borrowers: Set<Borrower>
}

/** Whether this key may borrow: the server's own key always, a key made under /api/keys only with `lend`. */
export function mayBorrow(identity: KeyIdentity | undefined): boolean {
  return identity !== undefined && (identity.managed === undefined || identity.managed.lend)
}

/** Serves the tunnel on `server`'s upgrade requests; every other upgrade is refused. */
export function serveLendTunnel(server: Server, keys: ApiKeys | undefined, lending: Lending | undefined, log: (line: string) => void): void {
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    socket.on('error', () => socket.destroy())
    const refuse = (status: number, code: string, message: string) => refuseSocket(socket, status, code, message)
    const path = (req.url ?? '').split('?')[0]
    if (path !== LEND_CONNECT_PATH || (req.headers.upgrade ?? '').toLowerCase() !== LEND_PROTOCOL) {
      return refuse(404, 'not_found', `Nothing here upgrades ${JSON.stringify(req.url ?? '')}; lending is ${LEND_CONNECT_PATH} with Upgrade: ${LEND_PROTOCOL}`)
    }
    // Keys first: a stranger learns nothing of whether this machine lends.
    const identity = keys?.identify(req.headers.authorization)
    if (!identity) return refuse(401, 'invalid_api_key', req.headers.authorization ? 'Incorrect API key provided' : "You didn't provide an API key")
    if (!mayBorrow(identity))
      return refuse(403, 'insufficient_permissions', 'This key may not borrow memory: make one with "lend": true (POST /api/keys) on the lending machine')
    if (!lending) return refuse(409, 'not_lending', 'This Hearth does not lend memory (start it with --lend)')
    if (lending.lender.state === 'stopped')
      return refuse(503, 'lender_stopped', `This Hearth has stopped lending: ${lending.lender.problem ?? 'its rpc-server stopped'}`)
    const borrower: Borrower = {
      address: req.socket.remoteAddress ?? 'unknown',
      key: identity.managed ? (identity.managed.label ?? identity.managed.id) : 'server key',
      since: Date.now(),
    }
    // A restarting rpc-server is waited for (a few seconds at most); the borrower's request holds meanwhile.
    lending.lender.connect(`${borrower.address} (${borrower.key})`).then(
      (rpc) => (socket.destroyed ? rpc.destroy() : tunnel(rpc, socket, head, borrower, lending, log)),
      (e: Error) => refuse(503, 'lender_stopped', `This Hearth cannot lend now: ${e.message}`),
    )
  })
}

/** Joins the borrower's upgraded connection to the rpc-server once that connection is made. */
function tunnel(rpc: Socket, socket: Socket, head: Buffer, borrower: Borrower, lending: Lending, log: (line: string) => void): void {
  rpc.setNoDelay(true)
  socket.setNoDelay(true)
  const close = () => {
    if (!lending.borrowers.delete(borrower)) return
    log(`lend: ${borrower.address} (${borrower.key}) let go`)
    socket.destroy()
    rpc.destroy()
  }
  rpc.once('connect', () => {
    lending.borrowers.add(borrower)
    log(`lend: ${borrower.address} (${borrower.key}) borrows memory`)
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${LEND_PROTOCOL}\r\nConnection: Upgrade\r\n\r\n`)
    if (head.length > 0) rpc.write(head)
    socket.pipe(rpc)
    rpc.pipe(socket)
  })
  rpc.on('error', () => (lending.borrowers.has(borrower) ? close() : refuseSocket(socket, 503, 'lender_stopped', "This Hearth's rpc-server does not answer")))
  rpc.on('close', close)
  // A borrower gone before the rpc-server answered leaves nothing behind either.
  socket.on('close', () => (lending.borrowers.has(borrower) ? close() : rpc.destroy()))
  // A borrower that closed its side while still waiting its turn (the rpc-server serves one
  // borrower at a time, and had not said a word to it) is let go after a moment, not when its
  // turn comes; one the rpc-server has begun to serve keeps its tunnel (half closed is not done).
  let served = false
  rpc.once('data', () => (served = true))
  socket.once('end', () => setTimeout(() => served || close(), WAITING_HALF_CLOSED_MS).unref())
}

/** How long a borrower that closed its side still waits for its turn at the rpc-server. */
const WAITING_HALF_CLOSED_MS = 2_000

/** An HTTP error on a connection that asked for an upgrade, and the connection closed. */
function refuseSocket(socket: Socket, status: number, code: string, message: string): void {
  const body = JSON.stringify({ error: { message, type: 'invalid_request_error', code } })
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? 'Error'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  )
}

const STATUS_TEXT: Record<number, string> = { 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 409: 'Conflict', 503: 'Service Unavailable' }
