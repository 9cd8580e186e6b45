/**
 * Stored responses (`store`, the default): each is kept in the data folder with the conversation
 * items that led to it, so `previous_response_id` can continue from it, and `GET`/`DELETE` can find
 * it. Each belongs to the key that made it (another key gets a 404). A stored response is kept
 * until it is deleted, or for 30 days as OpenAI keeps them: never dropped to make room for others.
 */
import { mkdir, readdir, readFile, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { writeFileAtomically } from '../../services/atomic-write.ts'
import type { InputItem } from './responses-request.ts'

/** OpenAI's retention of stored responses: 30 days from when each was made. */
export const RESPONSE_RETENTION_MS = 30 * 24 * 60 * 60 * 1000
const ID_PATTERN = /^resp_[0-9a-f]{24}$/

export interface StoredResponse {
  owner: string
  /** Every item of the conversation up to and including this response's output, in order. */
  items: InputItem[]
  /** How many of `items` were its input (the rest are its output). */
  inputCount: number
  /** The Response object as it was answered. */
  response: Record<string, unknown>
}

export class ResponseStore {
  private writes = 0

  constructor(private readonly dir: string) {}

  async save(id: string, stored: StoredResponse): Promise<void> {
    await mkdir(this.dir, { recursive: true })
    const path = join(this.dir, `${id}.json`)
    // On the disk before the response is answered: one a client was given survives a crash.
    await writeFileAtomically(path, JSON.stringify(stored))
    // Pruning reads the folder; once in a while is enough to drop what is past its 30 days.
    if (++this.writes % 50 === 1) await this.prune()
  }

  /** The stored response, if it exists and belongs to `owner`. */
  async load(id: string, owner: string): Promise<StoredResponse | undefined> {
    if (!ID_PATTERN.test(id)) return undefined
    const path = join(this.dir, `${id}.json`)
    try {
      if (expired((await stat(path)).mtimeMs)) return undefined
      const stored = JSON.parse(await readFile(path, 'utf8')) as StoredResponse
      return stored.owner === owner ? stored : undefined
    } catch {
      return undefined
    }
  }

  async delete(id: string, owner: string): Promise<boolean> {
    if (!(await this.load(id, owner))) return false
    await rm(join(this.dir, `${id}.json`), { force: true })
    return true
  }

  private async prune(): Promise<void> {
    for (const name of (await readdir(this.dir).catch(() => [])).filter((n) => n.endsWith('.json'))) {
      const made = (await stat(join(this.dir, name)).catch(() => undefined))?.mtimeMs
      if (made !== undefined && expired(made)) await rm(join(this.dir, name), { force: true })
    }
  }
}

function expired(madeMs: number): boolean {
  return Date.now() - madeMs > RESPONSE_RETENTION_MS
}
