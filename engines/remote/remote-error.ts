/**
 * A remote's refusal, carried to the client as our error body: the remote's status where it is
 * the client's doing (4xx: too long, bad value, rate limited), 502 where the remote failed or
 * refused Hearth itself (its key), 503 when no copy of the model can be reached.
 */
import { ModelError } from '../errors.ts'

export class RemoteModelError extends ModelError {
  override name = 'RemoteModelError'
  constructor(
    /** The HTTP status the client gets. */
    readonly status: number,
    /** The error code the client gets: the remote's own where it gave one. */
    readonly clientCode: string,
    message: string,
    param: string | null = null,
  ) {
    super(status >= 500 ? 'remote_unavailable' : 'invalid_value', message, param)
  }
}

interface RemoteErrorBody {
  error?: { message?: unknown; code?: unknown; type?: unknown; param?: unknown } | string
  message?: unknown
  detail?: unknown
}

/** The error for a remote's non-2xx answer, from its body (OpenAI's error shape, vLLM's, or text). */
export function remoteErrorOf(status: number, body: string, where: string, keyVariable: string | undefined): RemoteModelError {
  let parsed: RemoteErrorBody | undefined
  try {
    parsed = JSON.parse(body) as RemoteErrorBody
  } catch {
    parsed = undefined
  }
  const error = typeof parsed?.error === 'object' ? parsed.error : undefined
  const said = String(
    error?.message ?? (typeof parsed?.error === 'string' ? parsed.error : undefined) ?? parsed?.message ?? parsed?.detail ?? body.slice(0, 300),
  ).trim()
  if (status === 401 || status === 403) {
    const key = keyVariable ? `the key in ${keyVariable}` : 'no key (set api_key_env in the catalog entry)'
    return new RemoteModelError(502, 'remote_unauthorized', `${where} refused Hearth's request (${status}), which carried ${key}: ${said}`)
  }
  if (status >= 500) return new RemoteModelError(502, 'remote_error', `${where} failed (${status}): ${said}`)
  const code = typeof error?.code === 'string' && error.code ? error.code : status === 429 ? 'rate_limit_exceeded' : 'invalid_value'
  const param = typeof error?.param === 'string' ? error.param : null
  return new RemoteModelError(status === 404 ? 502 : status, status === 404 ? 'remote_error' : code, said, param)
}
