/**
 * Thrown for any image we will not hand to an engine: not a data URL, bad base64, too large, not
 * one of the accepted formats, truncated or corrupt bytes, absurd dimensions. The HTTP layer turns
 * it into a 400 `invalid_image` naming the request field the image came from.
 */

export type InvalidImageReason =
  | 'not_data_url' // http(s), file: or anything else that is not `data:image/…;base64,…`
  | 'bad_base64'
  | 'too_large' // over the byte limit
  | 'unsupported_format' // bytes of a kind we do not accept (or not an image at all)
  | 'corrupt' // a known format whose bytes do not decode (truncated, damaged)
  | 'bad_dimensions'

export class InvalidImageError extends Error {
  readonly code = 'invalid_image'
  readonly reason: InvalidImageReason
  /** The request field the image came from, named by the code that read the request. */
  param: string | null = null

  constructor(reason: InvalidImageReason, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'InvalidImageError'
    this.reason = reason
  }
}

/** `e` with the request field it concerns, when it is an InvalidImageError; otherwise as it is. */
export function imageErrorAt(e: unknown, param: string): unknown {
  if (e instanceof InvalidImageError) e.param = param
  return e
}

export function isInvalidImageError(error: unknown): error is InvalidImageError {
  return error instanceof InvalidImageError
}
