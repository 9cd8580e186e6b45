/**
 * /api: what the Server page shows. Where the server listens, whether it is reachable from the
 * network, the generated key (regenerate only), and the live log of API requests.
 */
import { networkInterfaces } from 'node:os'
import { Router } from 'express'
import { generatedKeyFile, regenerateApiKey } from '../../services/keys/key-rotation.ts'
import type { RequestHistory } from '../../http/request-history.ts'
import type { ServerContext } from '../../server-context.ts'
import { SseStream } from '../../http/sse.ts'
import type { ServerInfo } from '../../wire-types.ts'

const PING_EVERY_MS = 15_000

export function serverRoute(ctx: ServerContext, history: RequestHistory): Router {
  const router = Router()

  router.get('/server', (req, res) => {
    res.json(serverInfo(ctx, req.socket.localPort ?? ctx.settings.port))
  })

  router.post('/keys/regenerate', async (_req, res) => {
    const key = await regenerateApiKey(ctx.settings, ctx.keys)
    ctx.log('the API key was regenerated; the old key no longer works')
    res.set('Cache-Control', 'no-store').json({ key })
  })

  router.get('/requests', (_req, res) => {
    res.json({ requests: history.list() })
  })

  // The backlog first, then every request as it ends.
  router.get('/requests/events', (_req, res) => {
    const events = new SseStream(res)
    events.openNow(PING_EVERY_MS)
    const send = (record: unknown) => events.send(record)
    for (const record of history.list()) send(record)
    const unsubscribe = history.subscribe(send)
    res.on('close', unsubscribe)
  })

  return router
}

export function serverInfo(ctx: Pick<ServerContext, 'settings' | 'ollamaUrl' | 'ollamaNote' | 'lending'>, port: number): ServerInfo {
  const { host, auth } = ctx.settings
  const wildcard = host === '0.0.0.0' || host === '::'
  const lan = !isLoopback(host)
  const url = (h: string) => `http://${h.includes(':') ? `[${h}]` : h}:${port}`
  return {
    address: url(wildcard ? '127.0.0.1' : host),
    host,
    port,
    lan,
    lan_addresses: wildcard ? externalAddresses().map(url) : lan ? [url(host)] : [],
    auth,
    key_file: generatedKeyFile(ctx.settings) ?? null,
    ollama_url: ctx.ollamaUrl ?? null,
    ollama_note: ctx.ollamaNote ?? null,
    lending: ctx.lending ? { memory_cap_mib: ctx.lending.lender.memoryMiB ?? null, borrowers: ctx.lending.borrowers.size } : null,
  }
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host)
}

function externalAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .filter((a) => a !== undefined && !a.internal && a.family === 'IPv4')
    .map((a) => a!.address)
}
