/**
 * A link with a LAN's latency and rate, where the kernel has no netem: a TCP proxy that holds
 * each chunk for the one-way delay and lets bytes through no faster than the rate, each direction
 * on its own. Loopback in, the target out; used by the pool suite and `npm run bench -- --only pool`.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net'

export interface LinkShape {
  /** One-way delay, ms (a round trip costs twice this). */
  delayMs: number
  /** Bits per second each way; undefined: no limit. */
  bitsPerSecond?: number
}

export interface DelayingProxy {
  /** `127.0.0.1:PORT` */
  address: string
  port: number
  close(): Promise<void>
}

export async function startDelayingProxy(target: { host: string; port: number }, shape: LinkShape): Promise<DelayingProxy> {
  const sockets = new Set<Socket>()
  const server: Server = createServer((client) => {
    const upstream = createConnection(target)
    for (const s of [client, upstream]) {
      s.setNoDelay(true)
      sockets.add(s)
      s.on('error', () => undefined)
      s.on('close', () => sockets.delete(s))
    }
    shaped(client, upstream, shape)
    shaped(upstream, client, shape)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  return {
    address: `127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
  }
}

/**
 * `from` → `to`, each chunk sent at max(arrival + delay, when the link is free again), in order:
 * one queue and one timer per direction (timers of their own could fire out of order).
 */
function shaped(from: Socket, to: Socket, { delayMs, bitsPerSecond }: LinkShape): void {
  const queue: Array<{ chunk: Buffer; at: number }> = []
  let linkFreeAt = 0
  let timer: NodeJS.Timeout | undefined
  let ended = false
  const drain = () => {
    timer = undefined
    const now = performance.now()
    while (queue.length > 0 && queue[0]!.at <= now) {
      const { chunk } = queue.shift()!
      if (!to.destroyed) to.write(chunk)
    }
    if (queue.length > 0) timer = setTimeout(drain, Math.max(0, queue[0]!.at - now))
    else if (ended) to.end()
  }
  from.on('data', (chunk: Buffer) => {
    const now = performance.now()
    const sendTime = bitsPerSecond ? (chunk.length * 8 * 1000) / bitsPerSecond : 0
    linkFreeAt = Math.max(linkFreeAt, now) + sendTime
    queue.push({ chunk, at: linkFreeAt + delayMs })
    timer ??= setTimeout(drain, Math.max(0, linkFreeAt + delayMs - now))
  })
  from.on('end', () => {
    ended = true
    if (queue.length === 0 && timer === undefined) to.end()
  })
  // A connection that breaks breaks on the far side too, once what it sent has arrived.
  from.on('close', () => {
    const finish = () => (queue.length === 0 ? to.destroy() : setTimeout(finish, 5))
    setTimeout(finish, delayMs + 1)
  })
}
