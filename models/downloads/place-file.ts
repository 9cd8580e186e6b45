import { link, rename, stat, unlink } from 'node:fs/promises'
import { DownloadError } from './download-error.ts'

/**
 * Puts a finished file in the models folder in one step, never over an existing file: a hard link
 * fails if the name is taken; where links are not supported, a rename after a check.
 */
export async function moveIntoPlace(from: string, to: string, fileName: string, param: string): Promise<void> {
  try {
    await link(from, to)
    await unlink(from)
    return
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code === 'EEXIST') throw new DownloadError('invalid_value', `The models folder already has a file named "${fileName}"`, param)
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'EXDEV' && code !== 'ENOSYS') throw e
  }
  if (await stat(to).catch(() => undefined)) throw new DownloadError('invalid_value', `The models folder already has a file named "${fileName}"`, param)
  await rename(from, to)
}
