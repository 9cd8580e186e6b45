/**
 * A small BMP decoder: libvips (and so sharp) reads no BMP. Handles what writers produce in practice:
 * uncompressed 1/4/8-bit palette, 16-bit (5-5-5 or bit fields), 24-bit and 32-bit (alpha when a mask
 * says so), bottom-up or top-down, every header version from OS/2 core (12 bytes) to V5 (124 bytes).
 * RLE-compressed and embedded JPEG/PNG bitmaps are refused.
 */
import { InvalidImageError } from './invalid-image-error.ts'

export interface DecodedBitmap {
  width: number
  height: number
  channels: 3 | 4
  /** Rows top to bottom, RGB or RGBA, 8 bits a channel. */
  pixels: Buffer
}

const BI_RGB = 0
const BI_BITFIELDS = 3
const BI_ALPHABITFIELDS = 6
const COMPRESSION_NAMES: Record<number, string> = { 1: 'RLE8', 2: 'RLE4', 4: 'JPEG', 5: 'PNG' }

/** `checkSize` sees the dimensions before any pixel memory is allocated, and throws to refuse them. */
export function decodeBmp(bytes: Buffer, checkSize: (width: number, height: number) => void): DecodedBitmap {
  const corrupt = (why: string) => new InvalidImageError('corrupt', `The BMP image is invalid: ${why}`)
  if (bytes.length < 26 || bytes.toString('latin1', 0, 2) !== 'BM') throw corrupt('no BMP signature')
  const pixelOffset = bytes.readUInt32LE(10)
  const headerSize = bytes.readUInt32LE(14)
  if (headerSize !== 12 && headerSize < 40) throw corrupt(`unknown header size ${headerSize}`)
  if (bytes.length < 14 + headerSize) throw corrupt('the header is truncated')

  const core = headerSize === 12
  const width = core ? bytes.readUInt16LE(18) : bytes.readInt32LE(18)
  const rawHeight = core ? bytes.readInt16LE(20) : bytes.readInt32LE(22)
  const bitCount = core ? bytes.readUInt16LE(24) : bytes.readUInt16LE(28)
  const compression = core ? BI_RGB : bytes.readUInt32LE(30)
  const colorsUsed = core ? 0 : bytes.readUInt32LE(46)
  const topDown = rawHeight < 0
  const height = Math.abs(rawHeight)
  if (width <= 0 || height <= 0) throw new InvalidImageError('bad_dimensions', `The BMP image has no pixels (${width}×${rawHeight})`)
  checkSize(width, height)

  if (compression !== BI_RGB && compression !== BI_BITFIELDS && compression !== BI_ALPHABITFIELDS) {
    const name = COMPRESSION_NAMES[compression] ?? `type ${compression}`
    throw new InvalidImageError('unsupported_format', `${name}-compressed BMP images are not supported; send PNG or uncompressed BMP`)
  }
  if (![1, 4, 8, 16, 24, 32].includes(bitCount)) throw corrupt(`unsupported bit depth ${bitCount}`)

  // Channel masks: inside V2+ headers, or right after a 40-byte header.
  let masks: [number, number, number, number] | undefined
  if (compression === BI_BITFIELDS || compression === BI_ALPHABITFIELDS) {
    if (bitCount !== 16 && bitCount !== 32) throw corrupt(`bit fields with ${bitCount}-bit pixels`)
    const at = 14 + 40
    const count = headerSize >= 56 || compression === BI_ALPHABITFIELDS ? 4 : 3
    if (bytes.length < at + count * 4) throw corrupt('the colour masks are truncated')
    masks = [bytes.readUInt32LE(at), bytes.readUInt32LE(at + 4), bytes.readUInt32LE(at + 8), count === 4 ? bytes.readUInt32LE(at + 12) : 0]
  } else if (bitCount === 16) {
    masks = [0x7c00, 0x03e0, 0x001f, 0]
  } else if (bitCount === 32) {
    // BI_RGB 32-bit: the fourth byte is unused, except where a V3+ header carries an alpha mask.
    const alpha = headerSize >= 56 ? bytes.readUInt32LE(14 + 52) : 0
    masks = [0x00ff0000, 0x0000ff00, 0x000000ff, alpha]
  }

  let palette: Buffer | undefined
  if (bitCount <= 8) {
    const entrySize = core ? 3 : 4
    const entries = colorsUsed > 0 ? Math.min(colorsUsed, 1 << bitCount) : 1 << bitCount
    const at = 14 + headerSize + (headerSize === 40 && compression === BI_BITFIELDS ? 12 : 0)
    if (bytes.length < at + entries * entrySize) throw corrupt('the palette is truncated')
    palette = Buffer.alloc((1 << bitCount) * 3) // indexes past the palette read black
    for (let i = 0; i < entries; i++) {
      const e = at + i * entrySize
      palette[i * 3] = bytes[e + 2]!
      palette[i * 3 + 1] = bytes[e + 1]!
      palette[i * 3 + 2] = bytes[e]!
    }
  }

  const stride = Math.ceil((width * bitCount) / 32) * 4
  if (pixelOffset < 14 + headerSize || pixelOffset + stride * height > bytes.length) {
    throw corrupt(`the pixel data is truncated (${bytes.length} bytes, ${pixelOffset + stride * height} needed)`)
  }

  const hasAlpha = masks !== undefined && masks[3] !== 0
  const channels = hasAlpha ? 4 : 3
  const out = Buffer.alloc(width * height * channels)
  const fields = masks?.map(maskField)
  let anyAlpha = false
  for (let y = 0; y < height; y++) {
    const row = pixelOffset + (topDown ? y : height - 1 - y) * stride
    let o = y * width * channels
    for (let x = 0; x < width; x++, o += channels) {
      if (palette) {
        const bit = x * bitCount
        const index = (bytes[row + (bit >> 3)]! >> (8 - bitCount - (bit & 7))) & ((1 << bitCount) - 1)
        palette.copy(out, o, index * 3, index * 3 + 3)
        continue
      }
      if (bitCount === 24) {
        const p = row + x * 3
        out[o] = bytes[p + 2]!
        out[o + 1] = bytes[p + 1]!
        out[o + 2] = bytes[p]!
        continue
      }
      const value = bitCount === 16 ? bytes.readUInt16LE(row + x * 2) : bytes.readUInt32LE(row + x * 4)
      for (let c = 0; c < channels; c++) out[o + c] = fields![c]!(value)
      if (hasAlpha && out[o + 3] !== 0) anyAlpha = true
    }
  }
  // Many writers declare an alpha mask and leave it zero: that image is opaque, not invisible.
  if (hasAlpha && !anyAlpha) for (let i = 3; i < out.length; i += 4) out[i] = 255
  return { width, height, channels, pixels: out }
}

/** Reads one channel out of a packed pixel and scales it to 8 bits. */
function maskField(mask: number): (value: number) => number {
  if (mask === 0) return () => 0
  const shift = Math.log2(mask & -mask)
  const max = mask / 2 ** shift // the mask shifted down: 2^bits - 1
  return (value) => Math.round((((value & mask) >>> 0) / 2 ** shift) * (255 / max))
}
