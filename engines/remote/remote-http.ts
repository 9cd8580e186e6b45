/**
 * POSTs to a remote server, answered as a stream of bytes. JSON bodies go through node:http(s) on a
 * connection of their own: it is the shortest way to the first token (fetch adds about a
 * millisecond), and servers such as llama-server close a connection after each streamed answer,
 * so a kept one would only fail on its next use. Forms (audio) go through fetch.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'

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

export async function postRemote(url: string, headers: Record<string, string>, body: string | FormData, signal: AbortSignal | undefined): Promise<RemoteAnswer> {
  if (body instanceof FormData) return fromFetch(await fetch(url, { method: 'POST', headers, body, signal }))
  return new Promise((resolve, reject) => {
    const target = new URL(url)
    const request = target.protocol === 'https:' ? httpsRequest : httpRequest
    const payload = Buffer.from(body)
    const req = request(
      target,
      { method: 'POST', agent: false, headers: { ...headers, 'content-type': 'application/json', 'content-length': payload.byteLength }, signal },
      (res) => resolve(fromIncoming(res)),
    )
    req.once('error', (e) => reject(signal?.aborted ? e : new RemoteUnreachableError((e as NodeJS.ErrnoException).code ?? e.message, { cause: e })))
    req.end(payload)
  })
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
