/**
 * The files `ollama create` uploads before it creates a model (`POST /api/blobs/sha256:<hex>`):
 * kept in the data folder under their digest, checked against it as they arrive, and taken into
 * the models folder when a create names them.
 */
import { createHash } from 'node:crypto'
import { createWriteStream } from 'node:fs'
import { mkdir, rename, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import type { Readable } from 'node:stream'
import { OllamaError } from './ollama-errors.ts'

const DIGEST = /^sha256[:-]([0-9a-f]{64})$/

export class OllamaBlobs {
  constructor(private readonly dir: string) {}

  /** The blob's path for a digest as Ollama writes it (`sha256:<hex>`); a 400 for anything else. */
  pathOf(digest: string): string {
    const hex = DIGEST.exec(digest)?.[1]
    if (!hex) throw new OllamaError(400, `invalid digest format: '${digest}' (expected sha256:<64 hex digits>)`)
    return join(this.dir, `sha256-${hex}`)
  }

  async has(digest: string): Promise<boolean> {
    return (await stat(this.pathOf(digest)).catch(() => undefined))?.isFile() === true
  }

  /** Writes the upload; refused (and nothing kept) where its bytes are not the digest's. */
  async put(digest: string, body: Readable): Promise<void> {
    const path = this.pathOf(digest)
    await mkdir(this.dir, { recursive: true })
    const partial = `${path}.partial-${process.pid}-${Date.now()}`
    const hash = createHash('sha256')
    try {
      await pipeline(
        body,
        async function* (chunks: AsyncIterable<Buffer>) {
          for await (const chunk of chunks) {
            hash.update(chunk)
            yield chunk
          }
        },
        createWriteStream(partial),
      )
      const actual = `sha256:${hash.digest('hex')}`
      if (actual !== digest.replace('sha256-', 'sha256:')) throw new OllamaError(400, `digest mismatch, expected "${digest}", got "${actual}"`)
      await rename(partial, path)
    } finally {
      await rm(partial, { force: true })
    }
  }
}
