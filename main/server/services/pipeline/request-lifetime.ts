/**
 * One signal for everything that ends a request early: the client going away or the request
 * running past its time limit. Engines and queues listen to it; the route asks it why it fired.
 */
import type { Response } from 'express'
import { ModelError } from '../../../../engines/errors.ts'

export interface RequestLifetime {
  signal: AbortSignal
  /** The error to answer with when the signal fired; otherwise `e` itself. */
  explain(e: unknown): unknown
  dispose(): void
}

export function requestLifetime(res: Response, timeoutMs: number): RequestLifetime {
  const controller = new AbortController()
  let reason: 'client_gone' | 'timeout' | undefined
  const onClose = () => {
    if (res.writableFinished) return
    reason ??= 'client_gone'
    controller.abort()
  }
  res.on('close', onClose)
  const timer = setTimeout(() => {
    reason ??= 'timeout'
    controller.abort()
  }, timeoutMs)
  timer.unref()
  return {
    signal: controller.signal,
    explain(e) {
      if (reason === 'timeout') {
        return new ModelError('request_timeout', `The request took longer than the limit of ${Math.round(timeoutMs / 1000)} s and was cancelled`)
      }
      if (reason === 'client_gone') return new ModelError('cancelled', 'the client closed the connection')
      return e
    },
    dispose() {
      clearTimeout(timer)
      res.off('close', onClose)
    },
  }
}
