/**
 * What a request asked for that Hearth set aside (a hosted tool it cannot run, a hint with no local
 * equivalent), told to the client where it can see it without being stopped by it: a `Warning`
 * header (RFC 9111's code 299, "miscellaneous persistent warning"), and the request log.
 */
import type { Response } from 'express'

export class Notices {
  private readonly items: string[] = []

  add(text: string): void {
    if (!this.items.includes(text)) this.items.push(text)
  }

  list(): readonly string[] {
    return this.items
  }
}

/** Puts the notices on the response; call before the first byte of the answer is written. */
export function sendNotices(res: Response, notices: Notices): void {
  const list = notices.list()
  if (list.length === 0) return
  res.locals.notices = list
  res.setHeader('Warning', list.map((text) => `299 hearth "${text.replace(/["\\]/g, '\\$&')}"`).join(', '))
}
