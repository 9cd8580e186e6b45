/**
 * Brings a model file that is already on this computer into the models folder, as a copy or a hard
 * link, and names it in the catalog. Only existing regular files that are real model files are taken.
 */
import { constants } from 'node:fs'
import { copyFile, link, mkdir, realpath, rm, stat } from 'node:fs/promises'
import { basename, isAbsolute, join, sep } from 'node:path'
import { randomBytes } from 'node:crypto'
import { addCatalogEntry, CatalogWriteError, readCatalogEntries } from '../catalog/catalog-writer.ts'
import { readModelFileHeader } from '../catalog/model-file-header.ts'
import type { ModelFolder } from '../catalog/model-folder.ts'
import { DownloadError } from './download-error.ts'
import { PARTIAL_DIR } from './download-job.ts'
import { freeDiskBytes } from './disk-space.ts'
import { sanitiseFileName } from './hf-reference.ts'
import { formatBytes } from '../format-bytes.ts'
import { fileStem, validateModelId } from './model-names.ts'
import { moveIntoPlace } from './place-file.ts'

export interface ImportRequest {
  path: string
  mode: 'copy' | 'link'
  id?: string
  /** A projector to bring along (same mode). */
  mmproj?: string
  /** More of the catalog entry (a Modelfile's parts, a context length). */
  entry?: Record<string, unknown>
}

export interface ImportOptions {
  freeBytes?: (dir: string) => Promise<number>
}

export interface ImportResult {
  id: string
  file: string
  mmproj: string | undefined
}

interface SourceFile {
  param: 'path' | 'mmproj'
  path: string
  fileName: string
  size: number
  /** The projector is already in the folder (same name and size): nothing to bring. */
  reused: boolean
}

export async function importModel(folder: ModelFolder, request: ImportRequest, options: ImportOptions = {}): Promise<ImportResult> {
  const dir = folder.dir
  const model = await checkSource(dir, request.path, 'path')
  const mmproj = request.mmproj === undefined ? undefined : await checkSource(dir, request.mmproj, 'mmproj')
  const idParam = request.id === undefined ? 'path' : 'id'
  const id = request.id === undefined ? fileStem(model.fileName) : validateModelId(request.id)
  if (mmproj && mmproj.fileName === model.fileName) {
    throw new DownloadError('invalid_value', `Invalid value for 'mmproj': it has the same file name as the model`, 'mmproj')
  }

  const { models, broken } = await folder.scan()
  if (models.some((m) => m.id === id) || broken.some((b) => b.id === id)) {
    throw new DownloadError(
      'invalid_value',
      `A model with the id "${id}" already exists${idParam === 'path' ? '; pass "id" to add this one under another id' : ''}`,
      idParam,
    )
  }
  for (const file of [model, mmproj]) {
    if (!file) continue
    const existing = await stat(join(dir, file.fileName)).catch(() => undefined)
    if (!existing) continue
    if (file.param === 'mmproj' && existing.size === file.size) file.reused = true
    else throw new DownloadError('invalid_value', `The models folder already has a file named "${file.fileName}"`, file.param)
  }
  try {
    await readCatalogEntries(dir)
  } catch (e) {
    if (e instanceof CatalogWriteError) throw new DownloadError('invalid_value', e.message, null)
    throw e
  }

  const toBring = [model, mmproj].filter((f): f is SourceFile => f !== undefined && !f.reused)
  if (request.mode === 'copy') {
    const needed = toBring.reduce((sum, f) => sum + f.size, 0)
    const free = await (options.freeBytes ?? freeDiskBytes)(dir)
    if (needed > free) {
      throw new DownloadError(
        'insufficient_storage',
        `Not enough disk space: the copy needs ${formatBytes(needed)} (${needed} bytes) but only ${formatBytes(free)} (${free} bytes) are free in ${dir}`,
        'path',
      )
    }
  }

  const placed: string[] = []
  try {
    for (const file of toBring) {
      const target = join(dir, file.fileName)
      if (request.mode === 'link') await linkInto(file, target)
      else await copyInto(dir, file, target)
      placed.push(target)
    }
    await addCatalogEntry(dir, { id, file: model.fileName, ...(mmproj ? { mmproj: mmproj.fileName } : {}), ...request.entry })
  } catch (e) {
    for (const path of placed) await rm(path, { force: true })
    throw e
  }
  return { id, file: model.fileName, mmproj: mmproj?.fileName }
}

async function checkSource(dir: string, path: unknown, param: 'path' | 'mmproj'): Promise<SourceFile> {
  const bad = (why: string) => new DownloadError('invalid_value', `Invalid value for '${param}': ${why}`, param)
  if (typeof path !== 'string' || !isAbsolute(path)) throw bad('expected an absolute path to a .gguf or .bin file')
  const info = await stat(path).catch(() => undefined)
  if (!info) throw bad(`there is no file at ${path}`)
  if (!info.isFile()) throw bad(`${path} is not a regular file`)
  const real = await realpath(path)
  const realDir = await realpath(dir).catch(() => dir)
  if (real.startsWith(realDir + sep)) throw bad(`${path} is already in the models folder`)
  const fileName = sanitiseFileName(basename(path), bad)
  let header
  try {
    header = await readModelFileHeader(path)
  } catch (e) {
    throw bad(`${path} is not a model file: ${(e as Error).message}`)
  }
  if (header.format === 'other-ggml') throw bad(`${path} is a ggml file but not a whisper model`)
  if (header.format === 'vad-ggml')
    throw bad(`${path} is a voice-activity model, not a model to serve: copy it into the models folder and the speech models use it`)
  // A symlink is followed: a hard link to the link itself would break when it is relative.
  return { param, path: real, fileName, size: info.size, reused: false }
}

async function linkInto(file: SourceFile, target: string): Promise<void> {
  try {
    await link(file.path, target)
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code === 'EEXIST') throw new DownloadError('invalid_value', `The models folder already has a file named "${file.fileName}"`, file.param)
    if (code === 'EXDEV') {
      throw new DownloadError(
        'invalid_value',
        `${file.path} is on another disk than the models folder, so it cannot be hard-linked; import it with mode "copy"`,
        file.param,
      )
    }
    if (code === 'EPERM' || code === 'EACCES' || code === 'ENOTSUP' || code === 'EOPNOTSUPP') {
      throw new DownloadError('invalid_value', `${file.path} cannot be hard-linked here (${code}); import it with mode "copy"`, file.param)
    }
    throw e
  }
}

/** Copies beside the folder first (a clone where the file system can), then moves in under its name. */
async function copyInto(dir: string, file: SourceFile, target: string): Promise<void> {
  const partialDir = join(dir, PARTIAL_DIR)
  await mkdir(partialDir, { recursive: true })
  const tmp = join(partialDir, `${file.fileName}.import-${randomBytes(4).toString('hex')}`)
  try {
    await copyFile(file.path, tmp, constants.COPYFILE_FICLONE)
    await moveIntoPlace(tmp, target, file.fileName, file.param)
  } catch (e) {
    await rm(tmp, { force: true })
    if ((e as NodeJS.ErrnoException).code === 'ENOSPC') throw new DownloadError('insufficient_storage', 'The disk filled up while copying', file.param)
    throw e
  }
}
