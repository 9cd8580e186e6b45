/**
 * Test images made at test time with sharp (and a small BMP writer, as sharp writes no BMP): every
 * accepted format, the awkward cases (animated, huge, transparent) and the broken ones.
 */
import { crc32 } from 'node:zlib'
import sharp from 'sharp'
import { encodePng } from './tiny-models.ts'

/** A deterministic RGB picture: gradients and a checkerboard, so resizing and decoding show. */
export function testPixels(width: number, height: number): Buffer {
  const rgb = Buffer.alloc(width * height * 3)
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 3
      rgb[i] = Math.round((255 * x) / Math.max(1, width - 1))
      rgb[i + 1] = Math.round((255 * y) / Math.max(1, height - 1))
      rgb[i + 2] = ((x >> 3) + (y >> 3)) % 2 ? 220 : 30
    }
  }
  return rgb
}

const raw = (width: number, height: number) => sharp(testPixels(width, height), { raw: { width, height, channels: 3 } })

export const makePng = (width = 48, height = 40) => raw(width, height).png().toBuffer()
export const makeJpeg = (width = 48, height = 40, quality = 90) => raw(width, height).jpeg({ quality }).toBuffer()
export const makeWebp = (width = 48, height = 40) => raw(width, height).webp({ lossless: true }).toBuffer()

/** Two frames: the test picture, then solid red. Only the first may reach a model. */
export async function makeAnimatedGif(width = 48, height = 40): Promise<Buffer> {
  const red = await sharp({ create: { width, height, channels: 3, background: '#ff0000' } })
    .png()
    .toBuffer()
  return sharp([await makePng(width, height), red], { join: { animated: true } })
    .gif()
    .toBuffer()
}

/** A noisy photo-sized JPEG (noise keeps it from compressing to nothing, as real photos do). */
export async function makeHugeJpeg(width = 6000, height = 4000): Promise<Buffer> {
  const rgb = testPixels(width, height)
  let seed = 12345
  for (let i = 0; i < rgb.length; i += 7) {
    seed = (seed * 1103515245 + 12345) >>> 0
    rgb[i] = seed >>> 24
  }
  return sharp(rgb, { raw: { width, height, channels: 3 } })
    .jpeg({ quality: 85 })
    .toBuffer()
}

/** An uncompressed BMP: 24-bit bottom-up, or 32-bit (BGRA, BITFIELDS with an alpha mask) top-down. */
export function encodeBmp(width: number, height: number, rgb: Buffer, opts: { bits?: 24 | 32; alpha?: Buffer } = {}): Buffer {
  const bits = opts.bits ?? 24
  const headerSize = bits === 32 ? 108 : 40
  const stride = Math.ceil((width * bits) / 32) * 4
  const offset = 14 + headerSize
  const out = Buffer.alloc(offset + stride * height)
  out.write('BM', 0, 'latin1')
  out.writeUInt32LE(out.length, 2)
  out.writeUInt32LE(offset, 10)
  out.writeUInt32LE(headerSize, 14)
  out.writeInt32LE(width, 18)
  out.writeInt32LE(bits === 32 ? -height : height, 22)
  out.writeUInt16LE(1, 26)
  out.writeUInt16LE(bits, 28)
  out.writeUInt32LE(bits === 32 ? 3 : 0, 30) // BI_BITFIELDS : BI_RGB
  out.writeUInt32LE(stride * height, 34)
  if (bits === 32) {
    out.writeUInt32LE(0x00ff0000, 54)
    out.writeUInt32LE(0x0000ff00, 58)
    out.writeUInt32LE(0x000000ff, 62)
    out.writeUInt32LE(0xff000000, 66)
    out.write('BGRs', 70, 'latin1') // LCS_sRGB, stored little-endian
  }
  for (let y = 0; y < height; y++) {
    const row = offset + (bits === 32 ? y : height - 1 - y) * stride
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 3
      const o = row + x * (bits / 8)
      out[o] = rgb[i + 2]!
      out[o + 1] = rgb[i + 1]!
      out[o + 2] = rgb[i]!
      if (bits === 32) out[o + 3] = opts.alpha ? opts.alpha[y * width + x]! : 255
    }
  }
  return out
}

export const makeBmp = (width = 48, height = 40, bits: 24 | 32 = 24) => encodeBmp(width, height, testPixels(width, height), { bits })

/** A PNG cut off in the middle of its pixel data. */
export async function makeTruncatedPng(): Promise<Buffer> {
  const png = await raw(200, 200).png({ compressionLevel: 0 }).toBuffer()
  return png.subarray(0, Math.floor(png.length * 0.6))
}

/** A valid little PNG whose header claims a picture far too large to decode (a "pixel bomb"). */
export function makePixelBombPng(width = 100_000, height = 100_000): Buffer {
  const png = encodePng(1, 1, new Uint8Array([1, 2, 3]))
  png.writeUInt32BE(width, 16)
  png.writeUInt32BE(height, 20)
  png.writeUInt32BE(crc32(png.subarray(12, 29)), 29) // a well-formed header: only the size is absurd
  return png
}

export const dataUrl = (bytes: Buffer, type: string) => `data:image/${type};base64,${bytes.toString('base64')}`
