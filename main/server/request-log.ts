import { randomUUID } from 'node:crypto'
import type { RequestHandler } from 'express'

/** Gives every response an `x-request-id` and logs one line per request when it ends. */
export function requestLog(log: (line: string) => void): RequestHandler {
  return (req, res, next) => {
    const id = randomUUID()
    const started = performance.now()
    res.setHeader('x-request-id', id)
    res.on('close', () => {
      const ms = Math.round(performance.now() - started)
      const model = res.locals.model ? ` model=${res.locals.model}` : ''
      const status = res.writableFinished ? res.statusCode : `${res.statusCode} (client closed)`
      const code = res.locals.errorCode ? ` code=${res.locals.errorCode}` : ''
      log(`${req.method} ${req.originalUrl.split('?')[0]} ${status} ${ms}ms${model}${code} id=${id}`)
    })
    next()
  }
}
