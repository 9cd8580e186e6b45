import { randomUUID } from 'node:crypto'
import type { RequestHandler } from 'express'
import { usageOf } from '../services/keys/key-quotas.ts'
import { RequestHistory } from './request-history.ts'
import { outcomeText, responseOutcome } from './response-outcome.ts'

/** Gives every response an `x-request-id` and logs one line per request when it ends. */
export function requestLog(log: (line: string) => void, history?: RequestHistory): RequestHandler {
  return (req, res, next) => {
    const id = randomUUID()
    const started = performance.now()
    res.setHeader('x-request-id', id)
    res.on('close', () => {
      const ms = Math.round(performance.now() - started)
      const model = res.locals.model ? ` model=${res.locals.model}` : ''
      const outcome = responseOutcome(res)
      const status = outcomeText(res, outcome)
      const code = res.locals.errorCode ? ` code=${res.locals.errorCode}` : ''
      const path = req.originalUrl.split('?')[0] ?? ''
      const usage = res.locals.usage ? usageOf(res) : undefined
      const drafted = usage?.draftTokens !== undefined ? ` drafted=${usage.draftTokens} accepted=${usage.draftAccepted ?? 0}` : ''
      const tokens = usage?.promptTokens ? ` prompt=${usage.promptTokens} cached=${usage.cachedTokens}${drafted}` : ''
      const notices = Array.isArray(res.locals.notices) ? (res.locals.notices as string[]) : []
      const set = notices.length ? ` set-aside=${JSON.stringify(notices)}` : ''
      // MCP tool runs (POST /api/mcp/call, Responses' mcp tool): "server/tool", comma-separated.
      const tool = typeof res.locals.tool === 'string' && res.locals.tool ? res.locals.tool : undefined
      log(`${req.method} ${path} ${status} ${ms}ms${model}${tool ? ` tool=${tool}` : ''}${code}${tokens} id=${id}${set}`)
      if (history && RequestHistory.records(req.method, path)) {
        history.add({
          id,
          time: new Date(Date.now() - ms).toISOString(),
          method: req.method,
          path,
          model: typeof res.locals.model === 'string' ? res.locals.model : null,
          status: outcome.status,
          ...(outcome.cut ? { cut: true } : {}),
          duration_ms: ms,
          code: typeof res.locals.errorCode === 'string' ? res.locals.errorCode : null,
          ...(usage?.promptTokens ? { prompt_tokens: usage.promptTokens, cached_tokens: usage.cachedTokens } : {}),
          ...(notices.length ? { notices } : {}),
          ...(tool ? { tool } : {}),
        })
      }
    })
    next()
  }
}
