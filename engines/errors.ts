/**
 * Errors that cross module boundaries. Each carries a stable `code` (and `{ code, message, param }`
 * as JSON), so the HTTP layer maps it to a status with one switch (main/server/http/http-errors.ts).
 */
export type ModelErrorCode =
  | 'model_not_found'
  | 'model_unavailable'
  | 'model_not_compatible'
  | 'context_length_exceeded'
  | 'invalid_image'
  | 'too_many_images'
  | 'unsupported_audio_format'
  | 'invalid_language'
  | 'invalid_value'
  | 'overloaded'
  | 'request_timeout'
  | 'cancelled'
  | 'engine_crashed'
  | 'engine_load_failed'
  /** The engine a model needs (llama.cpp, whisper.cpp) has not been built on this machine. */
  | 'engine_not_built'
  | 'insufficient_memory'
  | 'internal_error'
  /** A remote model's server could not be reached or failed. */
  | 'remote_unavailable'

export class ModelError extends Error {
  override name = 'ModelError'
  constructor(
    readonly code: ModelErrorCode,
    message: string,
    /** The request field at fault, as a dotted path (`messages[0].content`), when there is one. */
    readonly param: string | null = null,
    /** `context_length_exceeded`: the numbers, so each API can word them its own way. */
    readonly context?: { promptTokens: number; contextLength: number },
  ) {
    super(message)
  }

  toJSON(): SerializedModelError {
    return { code: this.code, message: this.message, param: this.param }
  }
}

/**
 * An engine process that died: the signal that killed it (null where it exited), and whether it
 * died before it finished any job (while loading, or on its first batch).
 */
export class EngineDiedError extends ModelError {
  override name = 'EngineDiedError'
  constructor(
    code: 'engine_crashed' | 'engine_load_failed',
    message: string,
    readonly signal: string | null,
    readonly beforeFirstJob: boolean,
  ) {
    super(code, message)
  }
}

export interface SerializedModelError {
  code: ModelErrorCode
  message: string
  param: string | null
}

export function isModelError(e: unknown): e is ModelError {
  return e instanceof ModelError
}
