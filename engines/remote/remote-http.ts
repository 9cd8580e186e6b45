/**
 * POSTs to a remote server, answered as a stream of bytes. JSON bodies go through node:http(s)
 * (fetch adds about a millisecond to the first token) over kept connections, so a request does not
 * wait for a new connection, nor an https server's handshake; one idle for 4 s is let go (undici's
 * default: a connection idle for long may have died with the network or the machine), and one the
 * server closed after a stream is sent on again. Forms (audio) go through fetch.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http'
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https'
import { urlToHttpOptions } from 'node:url'
import { fetchOnKeptConnection, postOnKeptConnection } from '../kept-connections.ts'

const IDLE_CONNECTION_MS = 4_000
const kept = { http: new HttpAgent({ keepAlive: true, timeout: IDLE_CONNECTION_MS }), https: new HttpsAgent({ keepAlive: true, timeout: IDLE_CONNECTION_MS }) }

export interface RemoteAnswer {
  status: number
  body: AsyncIterable<Uint8Array>
  text(): Promise<string>
  json<T>(): Promise<T>
  /** Lets go of the answer unread. */
  discard(): void
}

/** A connection the remote refused or reset before answering: the request never reached it. */
export class RemoteUnreachableError extends Error {
  override name = 'RemoteUnreachableError'
}

export async function postRemote(
  url: string,
  headers: Record<string, string>,
  body: string | FormData,
  signal: AbortSignal | undefined,
): Promise<RemoteAnswer> {
  if (body instanceof FormData) return fromFetch(await fetchOnKeptConnection(url, { method: 'POST', headers, body, signal }))
  const target = new URL(url)
  const https = target.protocol === 'https:'
  const options = { ...urlToHttpOptions(target), agent: https ? kept.https : kept.http, headers, signal }
  try {
    return fromIncoming(await postOnKeptConnection(https ? httpsRequest : httpRequest, options, Buffer.from(body)))
  } catch (e) {
    if (signal?.aborted) throw e
    throw new RemoteUnreachableError((e as NodeJS.ErrnoException).code ?? (e as Error).message, { cause: e })
  }
}

function fromIncoming(res: IncomingMessage): RemoteAnswer {
  const text = async () => {
    const chunks: Buffer[] = []
    for await (const chunk of res) chunks.push(chunk as Buffer)
    return Buffer.concat(chunks).toString('utf8')
  }
  return {
    status: res.statusCode ?? 0,
    body: res,
    text,
    json: async <T>() => JSON.parse(await text()) as T,
    discard: () => res.destroy(),
  }
}

function fromFetch(res: Response): RemoteAnswer {
  return {
    status: res.status,
    body: (res.body ?? (async function* () {})()) as unknown as AsyncIterable<Uint8Array>,
    text: () => res.text(),
    json: <T>() => res.json() as Promise<T>,
    discard: () => void res.body?.cancel().catch(() => undefined),
  }
}
