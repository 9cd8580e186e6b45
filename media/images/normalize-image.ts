/**
 * Checks an image from a request and turns it into what an engine may safely receive: a small sRGB
 * PNG, never larger than the projector can use. Runs in the server process before a job is queued
 * (sharp works on libuv's thread pool, off the event loop), so bytes that are not a sound image never
 * reach llama.cpp: its image loader would try other decoders on them, and a failed image inside a
 * completion leaves the context unusable.
 */
import sharp, { type Metadata, type OutputInfo, type Sharp } from 'sharp'
import { decodeBmp } from './bmp-decoder.ts'
import { parseImageDataUrl } from './image-data-url.ts'
import { sniffImageFormat, type ImageFormat } from './image-format.ts'
import { InvalidImageError } from './invalid-image-error.ts'

// Every image is seen once: caching decoded pixels would only hold memory.
sharp.cache(false)

export const IMAGE_DIMENSION_LIMITS = {
  /** 10000×10000; phone cameras stay well below (50 MP). */
  maxPixels: 100_000_000,
  maxSide: 20_000,
  /** Longer side over shorter side: a 1×5000 strip is no picture a projector can read. */
  maxAspectRatio: 50,
}

export interface NormalizedImage {
  /** The image as PNG, ready for an engine job. */
  png: Buffer
  /** The same as `data:image/png;base64,…`. */
  dataUrl: string
  width: number
  height: number
  source: { format: ImageFormat; width: number; height: number; bytes: number }
  /** Time spent decoding and re-encoding. */
  ms: number
}

export interface NormalizeOptions {
  /** Longest side of the result; larger images are shrunk (keeping their shape), smaller ones kept. */
  maxSide: number
}

export async function normalizeImageDataUrl(url: string, options: NormalizeOptions): Promise<NormalizedImage> {
  return normalizeImage(parseImageDataUrl(url).bytes, options)
}

export async function normalizeImage(bytes: Buffer, { maxSide }: NormalizeOptions): Promise<NormalizedImage> {
  const started = performance.now()
  const format = sniffImageFormat(bytes)
  if (!format) throw new InvalidImageError('unsupported_format', 'The data is not a PNG, JPEG, WebP, GIF or BMP image')

  let image: Sharp
  let width: number
  let height: number
  if (format === 'bmp') {
    const bitmap = decodeBmp(bytes, checkDimensions)
    ;({ width, height } = bitmap)
    image = sharp(bitmap.pixels, { raw: { width, height, channels: bitmap.channels } })
  } else {
    // failOn 'truncated': a cut-off file fails instead of decoding into a grey remainder; the
    // harmless warnings many camera JPEGs carry do not.
    image = sharp(bytes, { failOn: 'truncated', limitInputPixels: IMAGE_DIMENSION_LIMITS.maxPixels, autoOrient: true, pages: 1 })
    let metadata: Metadata
    try {
      // The header alone, read without sharp's pixel limit so an oversized image is named as such.
      metadata = await sharp(bytes, { limitInputPixels: false, autoOrient: true, pages: 1 }).metadata()
    } catch (e) {
      throw new InvalidImageError('corrupt', `The ${format.toUpperCase()} image is invalid: its header cannot be read`, { cause: e })
    }
    if (metadata.format !== format) {
      throw new InvalidImageError('corrupt', `The image looks like ${format.toUpperCase()} but does not decode as one`)
    }
    width = metadata.autoOrient.width
    height = metadata.pageHeight ?? metadata.autoOrient.height
    checkDimensions(width, height)
  }

  let output: { data: Buffer; info: OutputInfo }
  try {
    output = await image
      // llama.cpp reads RGB only; transparent pixels would turn into whatever colour they hide.
      .flatten({ background: '#ffffff' })
      .resize({ width: maxSide, height: maxSide, fit: 'inside', withoutEnlargement: true })
      .toColourspace('srgb')
      .png({ compressionLevel: 2 })
      .toBuffer({ resolveWithObject: true })
  } catch (e) {
    throw new InvalidImageError('corrupt', `The ${format.toUpperCase()} image is truncated or corrupt`, { cause: e })
  }
  return {
    png: output.data,
    dataUrl: pngDataUrl(output.data),
    width: output.info.width,
    height: output.info.height,
    source: { format, width, height, bytes: bytes.length },
    ms: performance.now() - started,
  }
}

function checkDimensions(width: number, height: number): void {
  const { maxPixels, maxSide, maxAspectRatio } = IMAGE_DIMENSION_LIMITS
  const refuse = (why: string) => new InvalidImageError('bad_dimensions', `The image is ${width}×${height} pixels: ${why}`)
  if (!(width > 0 && height > 0)) throw refuse('it has no pixels')
  if (width > maxSide || height > maxSide) throw refuse(`a side is longer than ${maxSide}`)
  if (width * height > maxPixels) throw refuse(`more than ${maxPixels / 1_000_000} megapixels`)
  if (Math.max(width, height) / Math.min(width, height) > maxAspectRatio) throw refuse(`one side is over ${maxAspectRatio} times the other`)
}

/** A PNG as the data URL OpenAI-style servers (llama-server, remotes) read. */
export function pngDataUrl(png: Uint8Array): string {
  return `data:image/png;base64,${Buffer.from(png.buffer, png.byteOffset, png.byteLength).toString('base64')}`
}
