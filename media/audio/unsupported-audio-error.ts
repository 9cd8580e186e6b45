/**
 * Thrown for any input we cannot turn into audio: empty, truncated, corrupt, not audio at all,
 * or audio in a codec we have no decoder for. The HTTP layer maps it to a 400 with
 * `code = 'unsupported_audio_format'`.
 */

/** Why the input was refused; the HTTP message stays generic, logs and tests can be specific. */
export type UnsupportedAudioReason =
  | 'empty'
  | 'unrecognized' // no known container signature
  | 'unsupported_codec' // known container, but no decoder for what is inside
  | 'no_audio' // a media file without an audio track, or with no audio frames
  | 'truncated' // the container promises more data than the file holds
  | 'corrupt' // the bytes do not decode

export class UnsupportedAudioError extends Error {
  readonly code = 'unsupported_audio_format'
  readonly reason: UnsupportedAudioReason
  /** The specific part of the message, e.g. "the file is empty". */
  readonly detail: string

  constructor(reason: UnsupportedAudioReason, detail: string, options?: { cause?: unknown }) {
    super(`Unsupported or invalid audio file: ${detail}`, options)
    this.name = 'UnsupportedAudioError'
    this.reason = reason
    this.detail = detail
  }
}

export function isUnsupportedAudioError(error: unknown): error is UnsupportedAudioError {
  return error instanceof UnsupportedAudioError
}
