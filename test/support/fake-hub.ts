/**
 * A local stand-in for the Hugging Face hub (and for any download server), so download tests need no
 * internet. Like the hub, `/<owner>/<repo>/resolve/<rev>/<path>` answers with a redirect carrying
 * `X-Linked-ETag` (the sha256) and `X-Linked-Size`, and the bytes come from a second URL (`/cdn/…`)
 * that honours `Range`. `/files/<name>` serves a file directly, with no checksum headers. Each file
 * can misbehave on purpose: ignore ranges, break the connection, publish a wrong sha, be slow, 404.
 */
import { createHash } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface FakeFileBehaviour {
  /** Honour `Range` (default true). */
  ranges?: boolean
  /** Break the connection after this many body bytes, for the next `cuts` GETs (default 1). */
  cutAfter?: number
  cuts?: number
  /** Stop sending (but keep the connection open) after this many body bytes, for the next GET. */
  stallAfter?: number
  /** Answer the next GETs of the bytes with this status (e.g. 503), this many times. */
  failWith?: { status: number; times: number }
  /** Publish this sha256 instead of the real one. */
  publishedSha256?: string
  /** Announce this size in X-Linked-Size instead of the real one (a huge file we never serve). */
  announcedSize?: number
  /** Leave out X-Linked-ETag / X-Linked-Size (a hub file outside LFS). */
  noLinkedHeaders?: boolean
  /** Answer HEAD with 405, as some servers do. */
  noHead?: boolean
  /** Send the body in chunks of this size with a pause between them. */
  chunkSize?: number
  chunkDelayMs?: number
}

interface FakeFile {
  body: Buffer
  sha256: string
  /** The git blob id the hub sends as ETag of a hub path (any stable hex will do). */
  sha1: string
  behaviour: FakeFileBehaviour
  cutsLeft: number
}

export interface LoggedRequest {
  method: string
  path: string
  range: string | undefined
}

export class FakeHub {
  readonly requests: LoggedRequest[] = []
  private readonly files = new Map<string, FakeFile>()
  private readonly sockets = new Set<import('node:net').Socket>()

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<FakeHub> {
    const server = createServer((req, res) => hub.handle(req, res))
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const hub = new FakeHub(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`)
    server.on('connection', (s) => {
      hub!.sockets.add(s)
      s.on('close', () => hub!.sockets.delete(s))
    })
    return hub
  }

  /** Serves `body` at `/<owner>/<repo>/resolve/main/<path>` (key `owner/repo/path`) or `/files/<name>` (key `files/name`). */
  put(key: string, body: Buffer, behaviour: FakeFileBehaviour = {}): { sha256: string } {
    const sha256 = createHash('sha256').update(body).digest('hex')
    const sha1 = createHash('sha1').update(body).digest('hex')
    this.files.set(key, { body, sha256, sha1, behaviour, cutsLeft: behaviour.cutAfter === undefined ? 0 : (behaviour.cuts ?? 1) })
    return { sha256 }
  }

  behave(key: string, behaviour: FakeFileBehaviour): void {
    const file = this.files.get(key)
    if (!file) throw new Error(`no file ${key}`)
    file.behaviour = { ...file.behaviour, ...behaviour }
    if (behaviour.cutAfter !== undefined) file.cutsLeft = behaviour.cuts ?? 1
  }

  gets(keyPart: string): LoggedRequest[] {
    return this.requests.filter((r) => r.method === 'GET' && r.path.includes(keyPart))
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy()
    await new Promise<void>((r) => this.server.close(() => r()))
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const path = decodeURIComponent(new URL(req.url!, 'http://x').pathname)
    this.requests.push({ method: req.method!, path, range: req.headers.range })
    // The hub's listing of a repository's files, as `/api/pull` of an hf.co name reads it.
    const listing = /^\/api\/models\/([^/]+)\/([^/]+)$/.exec(path)
    if (listing) {
      const prefix = `${listing[1]}/${listing[2]}/`
      const siblings = [...this.files.keys()].filter((k) => k.startsWith(prefix)).map((k) => ({ rfilename: k.slice(prefix.length) }))
      if (siblings.length === 0) return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"Repository not found"}')
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: `${listing[1]}/${listing[2]}`, siblings }))
    }
    const hubMatch = /^\/([^/]+)\/([^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(path)
    if (hubMatch) {
      const key = `${hubMatch[1]}/${hubMatch[2]}/${hubMatch[4]}`
      const file = this.files.get(key)
      if (!file) return void res.writeHead(404, { 'x-error-code': 'EntryNotFound' }).end('Entry not found')
      const headers: Record<string, string> = {
        location: `/cdn/${encodeURIComponent(key)}`,
        etag: `"${file.sha1}"`,
      }
      if (!file.behaviour.noLinkedHeaders) {
        headers['x-linked-etag'] = `"${file.behaviour.publishedSha256 ?? file.sha256}"`
        headers['x-linked-size'] = String(file.behaviour.announcedSize ?? file.body.length)
      }
      res.writeHead(302, headers).end()
      return
    }
    const key = path.startsWith('/cdn/') ? path.slice(5) : path.startsWith('/files/') ? path.slice(1) : undefined
    const file = key === undefined ? undefined : this.files.get(key)
    if (!file) return void res.writeHead(404).end('not found')
    this.serveBytes(req, res, file)
  }

  private serveBytes(req: IncomingMessage, res: ServerResponse, file: FakeFile): void {
    const { behaviour, body } = file
    if (req.method === 'HEAD' && behaviour.noHead) return void res.writeHead(405).end()
    if (req.method === 'GET' && behaviour.failWith && behaviour.failWith.times > 0) {
      behaviour.failWith.times--
      return void res.writeHead(behaviour.failWith.status).end('try later')
    }
    const headers: Record<string, string | number> = { 'content-type': 'application/octet-stream', etag: `"cdn-${file.sha256.slice(0, 16)}"` }
    if (behaviour.ranges !== false) headers['accept-ranges'] = 'bytes'
    let start = 0
    let status = 200
    const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? '')
    if (range && behaviour.ranges !== false) {
      start = Number(range[1])
      if (start >= body.length) {
        return void res.writeHead(416, { 'content-range': `bytes */${body.length}` }).end()
      }
      status = 206
      headers['content-range'] = `bytes ${start}-${body.length - 1}/${body.length}`
    }
    headers['content-length'] = body.length - start
    res.writeHead(status, headers)
    if (req.method === 'HEAD') return void res.end()

    const cut = req.method === 'GET' && file.cutsLeft > 0 ? behaviour.cutAfter : undefined
    if (cut !== undefined) file.cutsLeft--
    const stall = req.method === 'GET' ? behaviour.stallAfter : undefined
    if (stall !== undefined) behaviour.stallAfter = undefined
    const stop = cut ?? stall
    const end = stop === undefined ? body.length : Math.min(body.length, start + stop)
    const chunk = behaviour.chunkSize ?? 64 * 1024
    let at = start
    const pump = () => {
      if (res.destroyed) return
      while (at < end) {
        const next = Math.min(end, at + chunk)
        const more = res.write(body.subarray(at, next))
        at = next
        if (behaviour.chunkDelayMs) return void setTimeout(pump, behaviour.chunkDelayMs)
        if (!more) return void res.once('drain', pump)
      }
      if (stall !== undefined && end < body.length) return // silence, with the connection open
      if (cut !== undefined && end < body.length) {
        // Let the bytes so far reach the client, then drop the connection mid-body.
        setTimeout(() => res.socket?.destroy(), 20)
        return
      }
      res.end()
    }
    pump()
  }
}
