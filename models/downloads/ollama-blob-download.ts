/**
 * One blob of a registry, fetched as Ollama's server/download.go fetches it: split into parts
 * (a sixteenth of the blob each, at least 100 MB and at most 1,000 MB), several parts in flight,
 * each an HTTP range written at its place in `blobs/sha256-<hex>-partial`, with what each part has
 * so far in `sha256-<hex>-partial-<N>` (Ollama's own JSON, `{"N","Offset","Size","Completed"}`).
 * A pull that stopped (a lost connection, Ctrl-C, a restart) continues each part where its file
 * says. Only a blob whose sha256 is its digest becomes `blobs/sha256-<hex>`; one that is not is
 * deleted, partial file and all.
 */
import { createHash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { open, readFile, rename, rm, stat, writeFile, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { DownloadError } from './download-error.ts'
import { describeFetchError } from './ollama-registry.ts'
import type { RetryPolicy } from './remote-file.ts'

/** How a blob is split, and how many of its parts are fetched at once. */
export interface PartPolicy {
  /** Parts a blob is split into, where the sizes below allow (Ollama: 16). */
  count: number
  /** Ollama: 100 MB, so a blob under 100 MB is one request. */
  minPartBytes: number
  /** Ollama: 1,000 MB. */
  maxPartBytes: number
  /** Parts in flight at once (Ollama: 16). */
  concurrency: number
}

/** Ollama's own numbers (format.MegaByte is 1,000,000 bytes). */
export const OLLAMA_PART_POLICY: PartPolicy = { count: 16, minPartBytes: 100_000_000, maxPartBytes: 1_000_000_000, concurrency: 16 }

interface Part {
  N: number
  Offset: number
  Size: number
  Completed: number
}

const WRITE_BATCH_BYTES = 1 << 20
const SAVE_INTERVAL_MS = 1000

export function blobFileName(digest: string): string {
  return digest.replace(':', '-')
}

export interface BlobDownloadOptions {
  blobsDir: string
  digest: string
  size: number
  /** Where the bytes are (blobLocation), and the headers that go with each range. */
  url: string
  headers: Record<string, string>
  parts: PartPolicy
  retry: RetryPolicy
  signal: AbortSignal
  fetch?: typeof fetch
  /** Bytes of the blob on disk so far. */
  onProgress: (completed: number) => void
}

export class BlobDownload {
  readonly finalPath: string
  readonly partialPath: string
  private parts: Part[] = []
  private handle: FileHandle | undefined
  private readonly fetch: typeof fetch

  constructor(private readonly options: BlobDownloadOptions) {
    this.finalPath = join(options.blobsDir, blobFileName(options.digest))
    this.partialPath = `${this.finalPath}-partial`
    this.fetch = options.fetch ?? fetch
  }

  /** Where the bytes are, once the registry said (a blob's redirect may change between pulls). */
  relocate(url: string, headers: Record<string, string>): void {
    this.options.url = url
    this.options.headers = headers
  }

  get completed(): number {
    return this.parts.reduce((sum, p) => sum + p.Completed, 0)
  }

  /** Reads what an earlier pull left (when it is consistent with this blob), or plans the parts. */
  async prepare(): Promise<void> {
    const kept = await this.readParts()
    const data = await stat(this.partialPath).catch(() => undefined)
    if (kept && data?.isFile()) this.parts = kept
    else {
      await this.removePartFiles()
      this.parts = planParts(this.options.size, this.options.parts)
    }
    this.handle = await open(this.partialPath, data?.isFile() && kept ? 'r+' : 'w+')
    await this.handle.truncate(this.options.size)
    await this.saveParts()
    this.options.onProgress(this.completed)
  }

  /** The blob's first `length` bytes, where they are on disk already. */
  async readHead(length: number): Promise<Buffer | undefined> {
    const first = this.parts[0]
    if (!first || first.Offset !== 0 || first.Completed < Math.min(length, first.Size)) return undefined
    const n = Math.min(length, first.Completed)
    const buf = Buffer.alloc(n)
    await this.handle!.read(buf, 0, n, 0)
    return buf
  }

  /** Bytes from the start of the blob, fetched for a look at its header, count as the first part's. */
  async writeHead(bytes: Buffer): Promise<void> {
    const first = this.parts[0]!
    const n = Math.min(bytes.length, first.Size)
    if (n <= first.Completed) return
    await this.handle!.write(bytes, 0, n, 0)
    first.Completed = n
    await this.saveParts()
    this.options.onProgress(this.completed)
  }

  /** Fetches every part not yet complete, `concurrency` at a time; the first failure stops the rest. */
  async run(): Promise<void> {
    const inner = new AbortController()
    const signal = AbortSignal.any([this.options.signal, inner.signal])
    const queue = this.parts.filter((p) => p.Completed < p.Size)
    let failure: unknown
    const worker = async () => {
      while (queue.length > 0 && failure === undefined) {
        const part = queue.shift()!
        try {
          await this.fetchPart(part, signal)
        } catch (e) {
          failure ??= e
          inner.abort()
        }
      }
    }
    await Promise.all(Array.from({ length: Math.max(1, Math.min(this.options.parts.concurrency, queue.length)) }, worker))
    await this.saveParts()
    if (failure instanceof NoRangeSupport) {
      // The server sends the whole blob whatever is asked: one part, from the start.
      this.parts = [{ N: 0, Offset: 0, Size: this.options.size, Completed: 0 }]
      await this.removePartFiles()
      await this.saveParts()
      return this.run()
    }
    if (failure !== undefined) {
      if (this.options.signal.aborted) throw this.options.signal.reason ?? failure
      throw failure
    }
  }

  /**
   * Hashes the finished blob: its digest's sha256 makes it `blobs/sha256-<hex>`; any other is
   * refused, and its bytes deleted.
   */
  async verifyAndKeep(): Promise<void> {
    await this.close()
    const { size, digest } = this.options
    const info = await stat(this.partialPath)
    if (this.completed !== size || info.size !== size) {
      await this.discard()
      throw new DownloadError('size_mismatch', `blob ${digest}: got ${this.completed} bytes, the manifest says ${size}; it was not kept`, 'model')
    }
    const actual = `sha256:${await sha256File(this.partialPath)}`
    if (actual !== digest) {
      await this.discard()
      throw new DownloadError(
        'checksum_mismatch',
        `digest mismatch, file must be downloaded again: blob ${digest} arrived with the sha256 ${actual.slice(7)}; it was not kept`,
        'model',
      )
    }
    await rename(this.partialPath, this.finalPath)
    await this.removePartFiles()
  }

  /** Closes the file, keeping what is there for the next pull. */
  async close(): Promise<void> {
    const handle = this.handle
    this.handle = undefined
    await handle?.close().catch(() => undefined)
  }

  /** Deletes the partial file and its part files. */
  async discard(): Promise<void> {
    await this.close()
    await rm(this.partialPath, { force: true })
    await this.removePartFiles()
  }

  private async fetchPart(part: Part, signal: AbortSignal): Promise<void> {
    const { retry } = this.options
    let failuresInARow = 0
    while (part.Completed < part.Size) {
      const before = part.Completed
      try {
        await this.attempt(part, signal)
      } catch (e) {
        if (signal.aborted) throw signal.reason ?? e
        if (!(e instanceof RetryableError)) throw e
        failuresInARow = part.Completed > before ? 1 : failuresInARow + 1
        if (failuresInARow > retry.attempts) {
          throw new DownloadError(
            'network',
            `blob ${this.options.digest}: ${e.message} (gave up after ${retry.attempts} retries; ${this.completed} of ${this.options.size} bytes kept, pull again to resume)`,
            'model',
          )
        }
        await sleep(Math.min(30_000, retry.baseDelayMs * 2 ** (failuresInARow - 1)), undefined, { signal }).catch(() => {
          throw signal.reason
        })
      }
    }
  }

  /** One range request for what the part still lacks, written at its place as it arrives. */
  private async attempt(part: Part, signal: AbortSignal): Promise<void> {
    const controller = new AbortController()
    let stalled = false
    const idle = setTimeout(() => {
      stalled = true
      controller.abort()
    }, this.options.retry.idleTimeoutMs)
    const start = part.Offset + part.Completed
    const stop = part.Offset + part.Size
    try {
      let res: Response
      try {
        res = await this.fetch(this.options.url, {
          headers: { ...this.options.headers, 'accept-encoding': 'identity', range: `bytes=${start}-${stop - 1}` },
          redirect: 'follow',
          signal: AbortSignal.any([signal, controller.signal]),
        })
      } catch (e) {
        if (signal.aborted) throw signal.reason
        throw new RetryableError(stalled ? 'the server did not answer' : `cannot reach ${new URL(this.options.url).host} (${describeFetchError(e)})`)
      }
      if (res.status === 200) {
        // The whole blob, whatever was asked: fine for a blob of one part from its start.
        if (this.parts.length === 1 && start === 0) return await this.receive(res, part, start, stop, signal, () => stalled, idle)
        await res.body?.cancel()
        throw new NoRangeSupport()
      }
      if (res.status !== 206) {
        await res.body?.cancel()
        if (res.status >= 500 || res.status === 429 || res.status === 408) throw new RetryableError(`the server answered ${res.status}`)
        throw new DownloadError('source_unavailable', `blob ${this.options.digest}: the server answered ${res.status} to a range of it`, 'model')
      }
      const range = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(res.headers.get('content-range')?.trim() ?? '')
      if (!range || Number(range[1]) !== start) {
        await res.body?.cancel()
        throw new RetryableError(`the server sent another range (${res.headers.get('content-range') ?? 'none'}) than bytes ${start}-${stop - 1}`)
      }
      if (range[3] !== '*' && Number(range[3]) !== this.options.size) {
        await res.body?.cancel()
        throw new DownloadError(
          'size_mismatch',
          `blob ${this.options.digest}: the server has ${range[3]} bytes of it, the manifest says ${this.options.size}`,
          'model',
        )
      }
      await this.receive(res, part, start, stop, signal, () => stalled, idle)
    } finally {
      clearTimeout(idle)
    }
  }

  private async receive(
    res: Response,
    part: Part,
    start: number,
    stop: number,
    signal: AbortSignal,
    stalled: () => boolean,
    idle: NodeJS.Timeout,
  ): Promise<void> {
    if (!res.body) throw new RetryableError('the response has no body')
    const reader = res.body.getReader()
    let pending: Uint8Array[] = []
    let pendingBytes = 0
    let writeAt = start
    let lastSave = Date.now()
    const flush = async () => {
      if (pendingBytes === 0) return
      const chunks = pending
      const size = pendingBytes
      const at = writeAt
      pending = []
      pendingBytes = 0
      writeAt += size
      await this.handle!.writev(chunks, at)
      part.Completed += size
      this.options.onProgress(this.completed)
      if (Date.now() - lastSave >= SAVE_INTERVAL_MS) {
        lastSave = Date.now()
        await this.saveParts()
      }
    }
    try {
      while (writeAt + pendingBytes < stop) {
        let chunk: ReadableStreamReadResult<Uint8Array>
        try {
          chunk = await reader.read()
        } catch (e) {
          if (signal.aborted) throw signal.reason
          throw new RetryableError(
            stalled() ? `no data for ${Math.round(this.options.retry.idleTimeoutMs / 1000)} s` : `the connection broke (${describeFetchError(e)})`,
          )
        }
        if (chunk.done) break
        idle.refresh()
        let bytes = chunk.value
        const room = stop - (writeAt + pendingBytes)
        if (bytes.length > room) bytes = bytes.subarray(0, room)
        pending.push(bytes)
        pendingBytes += bytes.length
        if (pendingBytes >= WRITE_BATCH_BYTES) await flush()
      }
    } finally {
      // What arrived before a break is good: on disk it is where the next attempt resumes.
      await flush().catch(() => undefined)
      await reader.cancel().catch(() => undefined)
      reader.releaseLock()
    }
    if (writeAt < stop) throw new RetryableError('the connection closed early')
  }

  private partFile(n: number): string {
    return `${this.partialPath}-${n}`
  }

  /** The part files of an earlier pull, when they describe this blob's bytes, in order, without gaps. */
  private async readParts(): Promise<Part[] | undefined> {
    const parts: Part[] = []
    for (let n = 0; ; n++) {
      let text: string
      try {
        text = await readFile(this.partFile(n), 'utf8')
      } catch {
        break
      }
      try {
        const p = JSON.parse(text) as Part
        const ints = [p.N, p.Offset, p.Size, p.Completed].every((v) => Number.isSafeInteger(v) && v >= 0)
        if (!ints || p.N !== n || p.Completed > p.Size) return undefined
        parts.push({ N: p.N, Offset: p.Offset, Size: p.Size, Completed: p.Completed })
      } catch {
        return undefined
      }
    }
    if (parts.length === 0) return undefined
    let offset = 0
    for (const p of parts) {
      if (p.Offset !== offset) return undefined
      offset += p.Size
    }
    return offset === this.options.size ? parts : undefined
  }

  private async saveParts(): Promise<void> {
    await Promise.all(this.parts.map((p) => writeFile(this.partFile(p.N), `${JSON.stringify(p)}\n`)))
  }

  private async removePartFiles(): Promise<void> {
    for (let n = 0; ; n++) {
      const path = this.partFile(n)
      if (!(await stat(path).catch(() => undefined))) {
        // Part files are numbered from 0 without gaps; a few more are looked for in case of a crash between removals.
        if (n > this.parts.length + 16) break
        continue
      }
      await rm(path, { force: true })
    }
  }
}

/** Ollama's plan: a sixteenth of the blob a part, within the sizes allowed; the last part takes the rest. */
export function planParts(total: number, policy: PartPolicy): Part[] {
  const size = Math.min(policy.maxPartBytes, Math.max(policy.minPartBytes, Math.floor(total / policy.count)))
  const parts: Part[] = []
  for (let offset = 0; offset < total; offset += size) parts.push({ N: parts.length, Offset: offset, Size: Math.min(size, total - offset), Completed: 0 })
  if (parts.length === 0) parts.push({ N: 0, Offset: 0, Size: 0, Completed: 0 })
  return parts
}

export async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256')
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) hash.update(chunk as Buffer)
  return hash.digest('hex')
}

class RetryableError extends Error {}
class NoRangeSupport extends Error {}
