/**
 * Why a download, an import or a removal failed, with a stable code the HTTP layer maps to a status
 * and `param` naming the request field at fault when there is one.
 */
export type DownloadErrorCode =
  /** A request field is wrong: a bad reference, a name already taken, a file that is not a model. */
  | 'invalid_value'
  /** Not enough free space in the models folder for what is about to be written. */
  | 'insufficient_storage'
  /** The server answered with a client error (404, 401 for a gated or missing repo, …). */
  | 'source_unavailable'
  | 'checksum_mismatch'
  | 'size_mismatch'
  /** The connection broke (or never came up) more often than the retries allow; the partial file is kept. */
  | 'network'
  | 'disk_error'
  | 'cancelled'
  | 'not_found'

export class DownloadError extends Error {
  override name = 'DownloadError'
  constructor(
    readonly code: DownloadErrorCode,
    message: string,
    readonly param: string | null = null,
  ) {
    super(message)
  }
}

export function isDownloadError(e: unknown): e is DownloadError {
  return e instanceof DownloadError
}
