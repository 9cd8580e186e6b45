/**
 * A picture picked, dropped or pasted, as the data URL a chat request carries. Large photos are
 * scaled down here: the server shrinks every image to what the model's projector takes in anyway,
 * and a smaller picture uploads faster and fits in the conversation store.
 */

export interface ImageAttachment {
  name: string
  dataUrl: string
}

/** The API refuses bigger images. */
export const MAX_IMAGE_BYTES = 20 * 1024 * 1024
const MAX_SIDE = 1536
const ACCEPTED = ['image/png', 'image/jpeg', 'image/webp', 'image/gif', 'image/bmp']
export const ACCEPT_ATTRIBUTE = ACCEPTED.join(',')

export class AttachmentError extends Error {
  override name = 'AttachmentError'
}

/** The first image among dropped or pasted items, if any. */
export function firstImage(files: Iterable<File> | null | undefined): File | undefined {
  for (const file of files ?? []) if (file.type.startsWith('image/')) return file
  return undefined
}

/** How big to draw a picture so its longer side is at most `maxSide`; undefined when it already fits. */
export function scaledSize(width: number, height: number, maxSide = MAX_SIDE): { width: number; height: number } | undefined {
  const longer = Math.max(width, height)
  if (longer <= maxSide) return undefined
  const scale = maxSide / longer
  return { width: Math.max(1, Math.round(width * scale)), height: Math.max(1, Math.round(height * scale)) }
}

export async function readImage(file: File): Promise<ImageAttachment> {
  if (!ACCEPTED.includes(file.type)) {
    throw new AttachmentError(`"${file.name}" is not a picture the models can read (PNG, JPEG, WebP, GIF or BMP)`)
  }
  if (file.size > MAX_IMAGE_BYTES) throw new AttachmentError(`"${file.name}" is larger than 20 MB`)
  const original = await asDataUrl(file)
  let bitmap: ImageBitmap
  try {
    bitmap = await createImageBitmap(file)
  } catch {
    throw new AttachmentError(`"${file.name}" could not be read as a picture`)
  }
  try {
    const size = scaledSize(bitmap.width, bitmap.height)
    if (!size) return { name: file.name, dataUrl: original }
    const canvas = document.createElement('canvas')
    canvas.width = size.width
    canvas.height = size.height
    canvas.getContext('2d')!.drawImage(bitmap, 0, 0, size.width, size.height)
    // PNG keeps transparency and sharp edges (screenshots); photos stay JPEG.
    const type = file.type === 'image/jpeg' ? 'image/jpeg' : 'image/png'
    return { name: file.name, dataUrl: canvas.toDataURL(type, 0.9) }
  } finally {
    bitmap.close()
  }
}

function asDataUrl(blob: Blob): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader()
    reader.onload = () => resolve(reader.result as string)
    reader.onerror = () => reject(new AttachmentError('The file could not be read'))
    reader.readAsDataURL(blob)
  })
}
