/**
 * `data:image/<fmt>;base64,<data>` → bytes. The base64 must be strict (the standard alphabet, padded,
 * no whitespace): Buffer.from() skips characters it does not know, and an image that decodes "mostly"
 * is worse than a clear 400.
 */
import { InvalidImageError } from './invalid-image-error.ts'

/** The largest image the contract accepts, in decoded bytes. */
export const MAX_IMAGE_BYTES = 20 * 1024 * 1024

const DATA_URL = /^data:image\/([a-z0-9.+-]+)((?:;[a-z0-9.+-]+=[^;,]*)*);base64,/i
const STRICT_BASE64 = /^[A-Za-z0-9+/]*={0,2}$/

export interface ImageDataUrl {
  /** The media subtype the client declared (`png`, `jpeg`, …); the bytes decide the real format. */
  declaredType: string
  bytes: Buffer
}

export function parseImageDataUrl(url: string, maxBytes = MAX_IMAGE_BYTES): ImageDataUrl {
  const head = DATA_URL.exec(url)
  if (!head) throw new InvalidImageError('not_data_url', notDataUrlMessage(url))
  const data = url.slice(head[0].length)
  if (data.length === 0) throw new InvalidImageError('bad_base64', 'The image data is empty')
  // Checked before decoding, so an oversized image costs no allocation.
  const decodedLength = (data.length / 4) * 3 - (data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0)
  if (decodedLength > maxBytes) {
    throw new InvalidImageError('too_large', `The image is larger than the limit of ${maxBytes / (1024 * 1024)} MB`)
  }
  if (data.length % 4 !== 0 || !STRICT_BASE64.test(data)) {
    throw new InvalidImageError('bad_base64', 'The image data is not valid base64')
  }
  return { declaredType: head[1]!.toLowerCase(), bytes: Buffer.from(data, 'base64') }
}

function notDataUrlMessage(url: string): string {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase()
  const expected = "Send the image inline as 'data:image/<png|jpeg|webp|gif|bmp>;base64,<data>'"
  if (scheme === 'http' || scheme === 'https') return `Image URLs are not fetched. ${expected}`
  if (scheme === 'file') return `file: URLs are not read. ${expected}`
  if (scheme === 'data') return `The data URL is not a base64 image. ${expected}`
  return `The image URL is not a data URL. ${expected}`
}
