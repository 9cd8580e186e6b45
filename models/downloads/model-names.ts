/** Model ids and file names that requests may choose, checked before anything touches the disk. */
import { DownloadError } from './download-error.ts'

const MODEL_ID = /^[A-Za-z0-9][A-Za-z0-9._:@+/-]*$/

/** An id as models.json and /v1/models use it: `org/name:q4_k_m` is fine, `../x` or `a//b` is not. */
export function validateModelId(id: unknown, param = 'id'): string {
  if (typeof id !== 'string' || id.length === 0 || id.length > 256 || !MODEL_ID.test(id)) {
    throw new DownloadError(
      'invalid_value',
      `Invalid value for '${param}': a model id is 1-256 characters: letters, digits and . _ : @ + - /, starting with a letter or digit`,
      param,
    )
  }
  if (id.split('/').some((part) => part === '' || part === '.' || part === '..')) {
    throw new DownloadError('invalid_value', `Invalid value for '${param}': "${id}" has an empty or dot path segment`, param)
  }
  return id
}

/** The id the folder scan would give a file with this name. */
export function fileStem(fileName: string): string {
  return fileName.replace(/\.(gguf|bin)$/i, '')
}
