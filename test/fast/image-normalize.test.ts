/** Image checking and normalisation, without a model: data URLs, formats, limits, broken files. */
import sharp from 'sharp'
import { describe, expect, it } from 'vitest'
import { decodeBmp } from '../../media/images/bmp-decoder.ts'
import { MAX_IMAGE_BYTES, parseImageDataUrl } from '../../media/images/image-data-url.ts'
import { sniffImageFormat } from '../../media/images/image-format.ts'
import { InvalidImageError, type InvalidImageReason } from '../../media/images/invalid-image-error.ts'
import { normalizeImage, normalizeImageDataUrl } from '../../media/images/normalize-image.ts'
import { projectorInputOf } from '../../media/images/projector-input.ts'
import {
  dataUrl,
  encodeBmp,
  makeAnimatedGif,
  makeBmp,
  makeHugeJpeg,
  makeJpeg,
  makePixelBombPng,
  makePng,
  makeTruncatedPng,
  makeWebp,
  testPixels,
} from '../support/test-images.ts'

async function refused(work: Promise<unknown> | (() => unknown), reason: InvalidImageReason): Promise<InvalidImageError> {
  const error = await (typeof work === 'function' ? Promise.resolve().then(work) : work).then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(error).toBeInstanceOf(InvalidImageError)
  expect((error as InvalidImageError).reason).toBe(reason)
  return error as InvalidImageError
}

const pngOf = (url: string) => Buffer.from(url.slice('data:image/png;base64,'.length), 'base64')

describe('image data URLs', () => {
  it('decodes strict base64 behind data:image/<fmt>;base64,', () => {
    const bytes = Buffer.from([1, 2, 3, 4, 250])
    expect(parseImageDataUrl(dataUrl(bytes, 'png'))).toEqual({ declaredType: 'png', bytes })
    expect(parseImageDataUrl(`data:image/JPEG;name=a.jpg;base64,${bytes.toString('base64')}`).declaredType).toBe('jpeg')
  })

  it('refuses URLs that would have to be fetched or read', async () => {
    for (const url of [
      'http://example.com/a.png',
      'https://example.com/a.png',
      'file:///etc/passwd',
      '',
      'data:text/plain;base64,AAAA',
      'data:image/png,rawbytes',
    ]) {
      const e = await refused(() => parseImageDataUrl(url), 'not_data_url')
      expect(e.message).toContain('data:image/')
    }
    expect((await refused(() => parseImageDataUrl('https://x/y.png'), 'not_data_url')).message).toMatch(/not fetched/)
  })

  it('refuses base64 that is not strict', async () => {
    for (const data of ['AAA', 'AA AA', 'AAAA\n', 'AA-_', 'A===', '====', 'AAAA!!!!', '']) {
      await refused(() => parseImageDataUrl(`data:image/png;base64,${data}`), 'bad_base64')
    }
  })

  it('refuses more than 20 MB before decoding it', async () => {
    const overLimit = 'A'.repeat(Math.ceil(((MAX_IMAGE_BYTES + 3) / 3) * 4))
    const e = await refused(() => parseImageDataUrl(`data:image/png;base64,${overLimit}`), 'too_large')
    expect(e.message).toMatch(/20 MB/)
    const largest = MAX_IMAGE_BYTES - (MAX_IMAGE_BYTES % 3)
    expect(parseImageDataUrl(`data:image/png;base64,${'A'.repeat((largest / 3) * 4)}`).bytes.length).toBe(largest)
  })
})

describe('image formats', () => {
  it('knows the accepted formats by their signatures', async () => {
    expect(sniffImageFormat(await makePng())).toBe('png')
    expect(sniffImageFormat(await makeJpeg())).toBe('jpeg')
    expect(sniffImageFormat(await makeWebp())).toBe('webp')
    expect(sniffImageFormat(await makeAnimatedGif())).toBe('gif')
    expect(sniffImageFormat(makeBmp())).toBe('bmp')
    expect(
      sniffImageFormat(
        await sharp(await makePng())
          .tiff()
          .toBuffer(),
      ),
    ).toBeUndefined()
    expect(sniffImageFormat(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"/>'))).toBeUndefined()
    expect(sniffImageFormat(Buffer.alloc(0))).toBeUndefined()
  })
})

describe('normalizeImage', () => {
  it.each([
    ['png', makePng],
    ['jpeg', makeJpeg],
    ['webp', makeWebp],
    ['gif', makeAnimatedGif],
    ['bmp', async () => makeBmp()],
    ['bmp', async () => makeBmp(48, 40, 32)],
  ] as const)('turns %s into an sRGB PNG, shrunk to fit', async (format, make) => {
    const image = await normalizeImage(await make(), { maxSide: 24 })
    expect(image.source).toMatchObject({ format, width: 48, height: 40 })
    expect([image.width, image.height]).toEqual([24, 20])
    expect(image.dataUrl.startsWith('data:image/png;base64,')).toBe(true)
    const meta = await sharp(pngOf(image.dataUrl)).metadata()
    expect(meta).toMatchObject({ format: 'png', width: 24, height: 20, channels: 3, space: 'srgb', depth: 'uchar' })
  })

  it('never enlarges a small image', async () => {
    const image = await normalizeImage(await makePng(10, 6), { maxSide: 64 })
    expect([image.width, image.height]).toEqual([10, 6])
  })

  it('keeps the pixels (lossless formats round-trip exactly when not resized)', async () => {
    for (const bytes of [await makePng(20, 12), await makeWebp(20, 12), makeBmp(20, 12), makeBmp(20, 12, 32)]) {
      const image = await normalizeImage(bytes, { maxSide: 64 })
      const { data } = await sharp(pngOf(image.dataUrl)).raw().toBuffer({ resolveWithObject: true })
      expect(data.equals(testPixels(20, 12))).toBe(true)
    }
  })

  it('takes the first frame of an animated GIF', async () => {
    const image = await normalizeImage(await makeAnimatedGif(), { maxSide: 64 })
    const { data } = await sharp(pngOf(image.dataUrl)).raw().toBuffer({ resolveWithObject: true })
    // The second frame is solid red; the first has a dark blue square at the top left.
    expect(data[2]).toBeLessThan(100)
    expect(data[0]).toBeLessThan(100)
    expect(image.height).toBe(40)
  })

  it('applies the EXIF orientation', async () => {
    const sideways = await sharp(testPixels(48, 40), { raw: { width: 48, height: 40, channels: 3 } })
      .jpeg()
      .withMetadata({ orientation: 6 })
      .toBuffer()
    const image = await normalizeImage(sideways, { maxSide: 64 })
    expect([image.width, image.height]).toEqual([40, 48])
    expect(image.source).toMatchObject({ width: 40, height: 48 })
  })

  it('puts transparent pixels on white', async () => {
    const clear = await sharp({ create: { width: 8, height: 8, channels: 4, background: { r: 0, g: 0, b: 0, alpha: 0 } } })
      .png()
      .toBuffer()
    const image = await normalizeImage(clear, { maxSide: 64 })
    const { data, info } = await sharp(pngOf(image.dataUrl)).raw().toBuffer({ resolveWithObject: true })
    expect(info.channels).toBe(3)
    expect([...data.subarray(0, 3)]).toEqual([255, 255, 255])
  })

  it('makes a 6000×4000 photo as cheap as a small image', async () => {
    const huge = await makeHugeJpeg()
    const image = await normalizeImage(huge, { maxSide: 64 })
    expect([image.width, image.height]).toEqual([64, 43])
    expect(image.dataUrl.length).toBeLessThan(30_000)
    console.log(`6000×4000 JPEG (${(huge.length / 1e6).toFixed(1)} MB) normalised in ${image.ms.toFixed(0)} ms`)
    expect(image.ms).toBeLessThan(5_000)
  })

  it('refuses bytes that are not an accepted image', async () => {
    await refused(normalizeImage(Buffer.from('hello, I am text'), { maxSide: 64 }), 'unsupported_format')
    await refused(
      normalizeImage(
        await sharp(await makePng())
          .tiff()
          .toBuffer(),
        { maxSide: 64 },
      ),
      'unsupported_format',
    )
    await refused(normalizeImage(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>'), { maxSide: 64 }), 'unsupported_format')
  })

  it('refuses truncated and corrupt files', async () => {
    await refused(normalizeImage(await makeTruncatedPng(), { maxSide: 64 }), 'corrupt')
    const jpeg = await makeJpeg(200, 200)
    await refused(normalizeImage(jpeg.subarray(0, jpeg.length >> 1), { maxSide: 64 }), 'corrupt')
    const png = await makePng()
    await refused(normalizeImage(png.subarray(0, 30), { maxSide: 64 }), 'corrupt') // the header alone, cut
    const bmp = makeBmp()
    await refused(normalizeImage(bmp.subarray(0, bmp.length - 10), { maxSide: 64 }), 'corrupt')
    const garbage = Buffer.concat([png.subarray(0, 8), Buffer.alloc(200, 7)])
    await refused(normalizeImage(garbage, { maxSide: 64 }), 'corrupt')
  })

  it('refuses absurd dimensions before decoding the pixels', async () => {
    const started = performance.now()
    const e = await refused(normalizeImage(makePixelBombPng(), { maxSide: 64 }), 'bad_dimensions')
    expect(e.message).toContain('100000×100000')
    expect(performance.now() - started).toBeLessThan(1_000)
    await refused(normalizeImage(await makePng(3000, 20), { maxSide: 64 }), 'bad_dimensions')
    const bmpBomb = makeBmp(2, 2)
    bmpBomb.writeInt32LE(60_000, 18)
    bmpBomb.writeInt32LE(60_000, 22)
    await refused(normalizeImage(bmpBomb, { maxSide: 64 }), 'bad_dimensions')
  })

  it('refuses RLE-compressed BMPs clearly', async () => {
    const rle = makeBmp()
    rle.writeUInt32LE(1, 30)
    const e = await refused(normalizeImage(rle, { maxSide: 64 }), 'unsupported_format')
    expect(e.message).toMatch(/RLE8/)
  })

  it('goes from data URL to normalised data URL', async () => {
    const image = await normalizeImageDataUrl(dataUrl(await makeJpeg(), 'jpeg'), { maxSide: 32 })
    expect([image.width, image.height]).toEqual([32, 27])
  })
})

describe('decodeBmp', () => {
  it('reads palette images', () => {
    // 4×2, 8-bit palette of 2 colours, bottom-up: bottom row red, top row blue.
    const bmp = Buffer.alloc(14 + 40 + 8 + 4 * 2)
    bmp.write('BM', 0, 'latin1')
    bmp.writeUInt32LE(bmp.length, 2)
    bmp.writeUInt32LE(14 + 40 + 8, 10)
    bmp.writeUInt32LE(40, 14)
    bmp.writeInt32LE(4, 18)
    bmp.writeInt32LE(2, 22)
    bmp.writeUInt16LE(1, 26)
    bmp.writeUInt16LE(8, 28)
    bmp.writeUInt32LE(2, 46)
    bmp.set([0, 0, 255, 0, 255, 0, 0, 0], 54) // palette BGRA: red, blue
    bmp.set([0, 0, 0, 0, 1, 1, 1, 1], 62) // rows bottom first
    const image = decodeBmp(bmp, () => undefined)
    expect(image).toMatchObject({ width: 4, height: 2, channels: 3 })
    expect([...image.pixels.subarray(0, 3)]).toEqual([0, 0, 255])
    expect([...image.pixels.subarray(12, 15)]).toEqual([255, 0, 0])
  })

  it('keeps alpha when the file has it', () => {
    const alpha = Buffer.from([0, 128, 255, 255])
    const image = decodeBmp(encodeBmp(2, 2, testPixels(2, 2), { bits: 32, alpha }), () => undefined)
    expect(image.channels).toBe(4)
    expect([image.pixels[3], image.pixels[7], image.pixels[11]]).toEqual([0, 128, 255])
  })
})

describe('projectorInputOf', () => {
  it('leaves a fixed-size projector twice its input size', () => {
    expect(projectorInputOf({ 'clip.projector_type': 'mlp', 'clip.vision.image_size': 32 })).toEqual({ imageSize: 32, maxSide: 64 })
    expect(projectorInputOf({ 'clip.projector_type': 'mlp', 'clip.vision.image_size': 336 }).maxSide).toBe(672)
  })

  it('follows grid pinpoints and gives dynamic-resolution projectors room', () => {
    const pinpoints = [336, 672, 672, 336, 672, 672]
    expect(projectorInputOf({ 'clip.projector_type': 'mlp', 'clip.vision.image_size': 336, 'clip.vision.image_grid_pinpoints': pinpoints }).maxSide).toBe(1344)
    expect(projectorInputOf({ 'clip.projector_type': 'qwen2vl_merger', 'clip.vision.image_size': 560 }).maxSide).toBe(2048)
    expect(projectorInputOf({}).maxSide).toBe(2048)
  })
})
