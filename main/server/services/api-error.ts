/**
 * The errors every part of the server throws when a request cannot be answered: a status, the
 * API's error type and code, and the field at fault. They become HTTP answers in one place,
 * http/http-errors.ts, in the shape of the API that was asked.
 */
export type ErrorType = 'invalid_request_error' | 'invalid_authentication' | 'permission_error' | 'request_timeout' | 'insufficient_quota' | 'server_error'

export class ApiError extends Error {
  override name = 'ApiError'
  constructor(
    readonly status: number,
    readonly type: ErrorType,
    readonly code: string | null,
    message: string,
    readonly param: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message)
  }

  body(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } }
  }
}

export function invalidRequest(message: string, param: string | null, code = 'invalid_value'): ApiError {
  return new ApiError(400, 'invalid_request_error', code, message, param)
}

/** A field of OpenAI's API that Hearth does not implement and will not silently ignore. */
export function unsupportedParameter(param: string, why: string): ApiError {
  return new ApiError(400, 'invalid_request_error', 'unsupported_parameter', `Unsupported parameter: '${param}': ${why}`, param)
}

export function modelNotFound(id: string, why?: string): ApiError {
  return new ApiError(404, 'invalid_request_error', 'model_not_found', why ?? `The model '${id}' does not exist`, 'model')
}

export function modelNotCompatible(id: string, needs: string): ApiError {
  return new ApiError(400, 'invalid_request_error', 'model_not_compatible', `The model '${id}' does not support ${needs}`, 'model')
}
