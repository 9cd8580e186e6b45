/** Which of the accepted image formats some bytes are, judged by their signature alone. */

export type ImageFormat = 'png' | 'jpeg' | 'webp' | 'gif' | 'bmp'

export const ACCEPTED_IMAGE_FORMATS: readonly ImageFormat[] = ['png', 'jpeg', 'webp', 'gif', 'bmp']

export function sniffImageFormat(bytes: Uint8Array): ImageFormat | undefined {
  const ascii = (start: number, text: string) => bytes.length >= start + text.length && [...text].every((c, i) => bytes[start + i] === c.charCodeAt(0))
  if (ascii(0, '\x89PNG\r\n\x1a\n')) return 'png'
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'jpeg'
  if (ascii(0, 'RIFF') && ascii(8, 'WEBP')) return 'webp'
  if (ascii(0, 'GIF87a') || ascii(0, 'GIF89a')) return 'gif'
  if (ascii(0, 'BM') && bytes.length >= 26) return 'bmp'
  return undefined
}
