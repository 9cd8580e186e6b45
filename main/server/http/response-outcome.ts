/**
 * What a response came to, told alike by the request log, the request history and the metrics: a
 * client that left is 499; a stream that began as a 200 and was then cut by an error (the time
 * limit, a crashed engine) counts as that error's status and says it was cut, and why; any other
 * response, its own status. A stream cut at the time limit is never counted as a success.
 */
import type { Response } from 'express'

export interface ResponseOutcome {
  status: number
  clientClosed: boolean
  /** Set where a stream under way was ended by an error: its code and what it says (the limit named). */
  cut?: { code: string; message: string }
}

/** Called by sendError when the headers had gone out: the stream's end is an error, not its answer. */
export function markCut(res: Response, status: number, code: string, message: string): void {
  res.locals.cut = { status, code, message }
}

export function responseOutcome(res: Response): ResponseOutcome {
  if (!res.writableFinished) return { status: 499, clientClosed: true }
  const cut = res.locals.cut as { status: number; code: string; message: string } | undefined
  if (cut) return { status: cut.status, clientClosed: false, cut: { code: cut.code, message: cut.message } }
  return { status: res.statusCode, clientClosed: false }
}

/** The status as the log line writes it: `200`, `200 (client closed)`, `408 (cut mid-stream: …)`. */
export function outcomeText(res: Response, outcome: ResponseOutcome = responseOutcome(res)): string {
  if (outcome.clientClosed) return `${res.statusCode} (client closed)`
  if (outcome.cut) return `${outcome.status} (cut mid-stream after ${res.statusCode}: ${outcome.cut.message})`
  return String(outcome.status)
}
