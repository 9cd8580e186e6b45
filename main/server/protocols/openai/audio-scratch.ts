/**
 * Decoded audio on its way to an engine: raw float32 files in the data folder, deleted when the
 * request ends. Files a crashed server left behind are cleared the first time the folder is used.
 */
import { randomBytes } from 'node:crypto'
import { mkdir, readdir, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'

export class AudioScratch {
  private ready: Promise<void> | undefined

  constructor(private readonly dir: string) {}

  /** A fresh file name in the folder, for the decoder to write. */
  async newPath(): Promise<string> {
    this.ready ??= this.prepare()
    await this.ready
    return join(this.dir, `audio-${randomBytes(8).toString('hex')}.f32`)
  }

  async remove(path: string): Promise<void> {
    await rm(path, { force: true }).catch(() => undefined)
  }

  private async prepare(): Promise<void> {
    await mkdir(this.dir, { recursive: true })
    const stale = Date.now() - 60 * 60 * 1000
    for (const name of await readdir(this.dir).catch(() => [])) {
      if (!/^audio-[0-9a-f]+\.f32$/.test(name)) continue
      const path = join(this.dir, name)
      const info = await stat(path).catch(() => undefined)
      if (info && info.mtimeMs < stale) await this.remove(path)
    }
  }
}
