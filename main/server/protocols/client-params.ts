/**
 * Where each part of a converted chat request came from in the request the client sent: Responses'
 * `input[2].content[0].image_url` for chat's `messages[3].content[0].image_url.url`. A 400 found
 * while checking or planning the chat then names the field the client wrote, not one it never saw.
 */
import { toApiError } from '../http/http-errors.ts'
import { ApiError } from '../services/api-error.ts'

export class ClientParams {
  private readonly paths = new Map<string, string>()

  /** `chatPath` and everything under it came from `clientPath` (the rest of a longer path is kept). */
  set(chatPath: string, clientPath: string): void {
    this.paths.set(chatPath, clientPath)
  }

  /** The client's name for a chat field: its longest known prefix, translated, and the rest as it was. */
  of(param: string): string {
    for (let end = param.length; end > 0; end = lastBoundary(param, end)) {
      const known = this.paths.get(param.slice(0, end))
      if (known !== undefined) return known + param.slice(end)
    }
    return param
  }

  /** The same error, naming the client's field (any error that names a field, as its 4xx would). */
  renamed(e: unknown): unknown {
    const param = (e as { param?: unknown } | null)?.param
    if (typeof param !== 'string' || this.of(param) === param) return e
    const api = e instanceof ApiError ? e : toApiError(e)
    return new ApiError(api.status, api.type, api.code, api.message, this.of(param), api.headers)
  }
}

/** Where the path before `end` last splits into fields: before a `.name` or an `[index]`. */
function lastBoundary(path: string, end: number): number {
  return Math.max(path.lastIndexOf('.', end - 1), path.lastIndexOf('[', end - 1))
}
