/**
 * Writing a file so that a crash (the process killed, the power cut) leaves either the old file or
 * the new one, never a part of either: the bytes go to a temporary file beside it, are flushed to
 * the disk, and the temporary file is renamed over the old one; the folder is flushed too, so the
 * rename itself survives. A write that fails (a full disk) leaves nothing behind.
 */
import { randomBytes } from 'node:crypto'
import { open, readdir, rename, rm, stat } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'

/** The temporary files of writes in progress: `.<name>.<random>.tmp`, removable on sight after a crash. */
export const TEMPORARY_FILE = /^\..+\.[0-9a-f]{8}\.tmp$/

export async function writeFileAtomically(path: string, data: string | Uint8Array, options: { mode?: number } = {}): Promise<void> {
  const temporary = join(dirname(path), `.${basename(path)}.${randomBytes(4).toString('hex')}.tmp`)
  try {
    const handle = await open(temporary, 'wx', options.mode ?? 0o644)
    try {
      await handle.writeFile(data)
      await handle.sync()
    } finally {
      await handle.close()
    }
    await rename(temporary, path)
  } catch (e) {
    await rm(temporary, { force: true })
    throw e
  }
  await syncFolder(dirname(path))
}

/** Flushes a folder's entries (a rename, a new file) to the disk; where a folder cannot be opened for that (Windows), nothing. */
export async function syncFolder(dir: string): Promise<void> {
  let handle
  try {
    handle = await open(dir, 'r')
    await handle.sync()
  } catch {
    // not supported here: the rename is still atomic, only its durability across a power cut is not promised
  } finally {
    await handle?.close()
  }
}

/**
 * Removes the temporary files of writes a crash cut off, in `dir` itself. Only those older than a
 * minute: another server on the same folder may be writing one now.
 */
export async function removeLeftoverTemporaryFiles(dir: string, olderThanMs = 60_000): Promise<void> {
  const now = Date.now()
  for (const name of await readdir(dir).catch(() => [])) {
    if (!TEMPORARY_FILE.test(name)) continue
    const path = join(dir, name)
    const modified = (await stat(path).catch(() => undefined))?.mtimeMs
    if (modified !== undefined && now - modified > olderThanMs) await rm(path, { force: true })
  }
}
