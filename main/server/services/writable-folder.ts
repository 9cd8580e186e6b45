/**
 * A folder the server must write to, checked at start: a read-only disk or a folder of another
 * user is said in one sentence naming the folder and the flag that moves it, instead of failing
 * later, half way through the first write, with a stack trace.
 */
import { randomBytes } from 'node:crypto'
import { mkdir, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { StartupError } from './startup-error.ts'

const WHY: Record<string, string> = {
  EROFS: 'it is on a read-only file system',
  EACCES: 'this user may not write there',
  EPERM: 'this user may not write there',
  ENOSPC: 'its disk is full',
  ENOTDIR: 'a file stands where a folder should be',
}

export async function requireWritableFolder(dir: string, what: string, flag: string): Promise<void> {
  const probe = join(dir, `.hearth-write-check-${randomBytes(4).toString('hex')}`)
  try {
    await mkdir(dir, { recursive: true })
    await writeFile(probe, '')
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? ''
    throw new StartupError(
      `cannot write to the ${what} ${dir}: ${WHY[code] ?? (e as Error).message}${code && WHY[code] ? ` (${code})` : ''}. ` +
        `Hearth keeps its keys, documents and prompt cache there; make it writable, or start with ${flag} <a folder it can write>.`,
    )
  }
  await rm(probe, { force: true })
}
