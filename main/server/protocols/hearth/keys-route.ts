/**
 * /api/keys: API keys for programs, each with an optional label and quotas. A key is shown once,
 * in the answer that makes it; afterwards only its id, label, hint and usage are listed. Keys made
 * here cannot manage keys themselves (else a key with a quota could make one without): that takes
 * the server's own key (the generated one, or one given with --api-key).
 */
import { Router, type RequestHandler } from 'express'
import { z } from 'zod'
import { requestKey } from '../../services/keys/request-key.ts'
import { ApiError } from '../../services/api-error.ts'
import { MCP_PERMISSIONS, type KeyStore, type ManagedKey } from '../../services/keys/key-store.ts'
import { parseOrThrow } from '../../services/chat/validation.ts'
import type { ServerContext } from '../../server-context.ts'

const quota = z.int().min(1).max(1_000_000_000_000).nullable()
const createSchema = z.object({
  label: z.string().max(200).nullable().optional(),
  requests_per_minute: quota.optional(),
  tokens_per_day: quota.optional(),
  /** What the key may do with MCP servers (docs/mcp.md). */
  mcp: z.enum(MCP_PERMISSIONS).optional(),
  /** May borrow this machine's memory when it lends (docs/pool.md). */
  lend: z.boolean().optional(),
})

export function keysRoute(ctx: ServerContext): Router {
  const router = Router()
  router.use('/keys', onlyServerKeys)

  router.post('/keys', async (req, res) => {
    const store = requireStore(ctx)
    const body = bodyOf(req.body, req.headers['content-type'])
    const { key, record } = await store.create(
      body.label ?? null,
      {
        requestsPerMinute: body.requests_per_minute ?? null,
        tokensPerDay: body.tokens_per_day ?? null,
      },
      body.mcp,
      body.lend,
    )
    ctx.log(`API key ${record.id}${record.label ? ` ${JSON.stringify(record.label)}` : ''} was created`)
    res
      .status(201)
      .set('Cache-Control', 'no-store')
      .json({ ...keyObject(store, record), key })
  })

  router.get('/keys', (_req, res) => {
    const store = ctx.keys?.store
    res.json({ keys: store ? store.list().map((k) => keyObject(store, k)) : [] })
  })

  router.get('/keys/:id', (req, res) => {
    const store = requireStore(ctx)
    res.json(keyObject(store, requireKey(store, req.params.id)))
  })

  router.patch('/keys/:id', async (req, res) => {
    const store = requireStore(ctx)
    requireKey(store, req.params.id)
    const body = bodyOf(req.body, req.headers['content-type'])
    const record = await store.update(req.params.id, {
      label: body.label,
      requestsPerMinute: body.requests_per_minute,
      tokensPerDay: body.tokens_per_day,
      mcp: body.mcp,
      lend: body.lend,
    })
    res.json(keyObject(store, record!))
  })

  router.delete('/keys/:id', async (req, res) => {
    const store = requireStore(ctx)
    const record = requireKey(store, req.params.id)
    await store.remove(record.id)
    ctx.log(`API key ${record.id} was deleted`)
    res.json({ id: record.id, object: 'api_key', deleted: true })
  })

  return router
}

/** Key management (this router and POST /keys/regenerate after it) is for the server's own keys. */
const onlyServerKeys: RequestHandler = (_req, res, next) => {
  if (requestKey(res)?.managed) {
    throw new ApiError(
      403,
      'invalid_request_error',
      'insufficient_permissions',
      "Keys made under /api/keys cannot manage keys; use the server's own key (the generated one or --api-key)",
    )
  }
  next()
}

function requireStore(ctx: ServerContext): KeyStore {
  const store = ctx.keys?.store
  if (!store) {
    throw new ApiError(409, 'invalid_request_error', 'auth_disabled', 'Authentication is off (--no-auth), so keys would not be checked')
  }
  return store
}

function requireKey(store: KeyStore, id: string): ManagedKey {
  const record = store.get(id)
  if (!record) throw new ApiError(404, 'invalid_request_error', 'key_not_found', `No API key with the id '${id}'`, 'id')
  return record
}

/** The body is optional (`curl -X POST /api/keys` makes a plain key); when there is one, it is JSON. */
function bodyOf(body: unknown, contentType: string | undefined): z.infer<typeof createSchema> {
  if (body === undefined && contentType === undefined) return {}
  return parseOrThrow(createSchema, body)
}

/** A key on the wire: never the key or its digest. */
function keyObject(store: KeyStore, k: ManagedKey) {
  return {
    id: k.id,
    object: 'api_key',
    label: k.label,
    hint: k.hint,
    created: k.created,
    requests_per_minute: k.requestsPerMinute,
    tokens_per_day: k.tokensPerDay,
    tokens_today: store.tokensToday(k.id),
    last_used: k.lastUsed,
    mcp: k.mcp,
    lend: k.lend,
  }
}
