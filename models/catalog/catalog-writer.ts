/**
 * Edits `models.json` without ever leaving it half written: read, change the `models` array, write a
 * temporary file beside it and rename it over the old one. Other entries, unknown keys and other
 * top-level keys are kept as they were. Edits from this process are applied one at a time.
 */
import { randomBytes } from 'node:crypto'
import { open, readdir, readFile, rename, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'

export const CATALOG_FILE = 'models.json'

/** models.json exists but cannot be edited safely (bad JSON, wrong shape, unreadable). */
export class CatalogWriteError extends Error {
  override name = 'CatalogWriteError'
}

/**
 * One queue of edits per catalog file, for the whole process: the file is the process's, whichever
 * server (the desktop app restarts its own; tests start many) edits it, so no two edits interleave.
 */
const queues = new Map<string, Promise<unknown>>()

/** Runs `edit` on the catalog's entries and saves the result; creates the file when missing. */
export async function editCatalog<T>(dir: string, edit: (models: unknown[]) => T): Promise<T> {
  const path = join(dir, CATALOG_FILE)
  const previous = queues.get(path) ?? Promise.resolve()
  const run = previous
    .catch(() => undefined)
    .then(async () => {
      const document = await readCatalogDocument(path)
      const models = [...document.models]
      const result = edit(models)
      await writeAtomically(path, `${JSON.stringify({ ...document, models }, null, 2)}\n`)
      return result
    })
  queues.set(path, run)
  try {
    return await run
  } finally {
    if (queues.get(path) === run) queues.delete(path)
  }
}

export async function addCatalogEntry(dir: string, entry: Record<string, unknown>): Promise<void> {
  await editCatalog(dir, (models) => {
    models.push(entry)
  })
}

/** Removes every entry `matches` picks; returns the removed ones. */
export async function removeCatalogEntries(dir: string, matches: (entry: unknown) => boolean): Promise<unknown[]> {
  return editCatalog(dir, (models) => {
    const removed: unknown[] = []
    for (let i = models.length - 1; i >= 0; i--) {
      if (matches(models[i])) removed.unshift(...models.splice(i, 1))
    }
    return removed
  })
}

/** The entries as written (not validated); empty when there is no catalog. */
export async function readCatalogEntries(dir: string): Promise<unknown[]> {
  return (await readCatalogDocument(join(dir, CATALOG_FILE))).models
}

async function readCatalogDocument(path: string): Promise<{ models: unknown[] } & Record<string, unknown>> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { models: [] }
    throw new CatalogWriteError(`cannot read ${path}: ${(e as Error).message}`)
  }
  if (text.trim() === '') return { models: [] }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    throw new CatalogWriteError(`${path} is not valid JSON (${(e as Error).message}); fix it before adding or removing models`)
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json) || !Array.isArray((json as { models?: unknown }).models)) {
    throw new CatalogWriteError(`${path} must be {"models": [...]}; fix it before adding or removing models`)
  }
  return json as { models: unknown[] } & Record<string, unknown>
}

async function writeAtomically(path: string, text: string): Promise<void> {
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`
  try {
    const handle = await open(tmp, 'w')
    try {
      await handle.writeFile(text, 'utf8')
      await handle.sync()
    } finally {
      await handle.close()
    }
    await rename(tmp, path)
  } catch (e) {
    await rm(tmp, { force: true })
    throw e
  }
}

/** A write cut off by a crash leaves its temporary file (`models.json.<pid>.<hex>.tmp`); older than a minute, none is in progress. */
const LEFTOVER = new RegExp(`^${CATALOG_FILE.replace('.', '\\.')}\\.\\d+\\.[0-9a-f]{8}\\.tmp$`)

/** Removes what writes cut off by a crash left in the models folder. */
export async function removeLeftoverCatalogWrites(dir: string, olderThanMs = 60_000): Promise<void> {
  const names = await readdir(dir).catch(() => [] as string[])
  for (const name of names.filter((n) => LEFTOVER.test(n))) {
    const info = await stat(join(dir, name)).catch(() => undefined)
    if (info && Date.now() - info.mtimeMs > olderThanMs) await rm(join(dir, name), { force: true })
  }
}
