/**
 * One remote file over HTTP: what the server says about it before we fetch it (size, sha256), and
 * the transfer itself into a partial file, resumed with `Range` after a broken connection.
 */
import { createHash, type Hash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { open, type FileHandle } from 'node:fs/promises'
import { setTimeout as sleep } from 'node:timers/promises'
import { DownloadError } from './download-error.ts'
import type { ModelSource } from './hf-reference.ts'

export interface RemoteFileInfo {
  size: number | undefined
  /** Lowercase hex; from the hub's `X-Linked-ETag` (or the `ETag` of a hub file), never guessed. */
  sha256: string | undefined
  /** Tells one version of the remote file from another, so a stale partial file is not resumed. */
  etag: string | undefined
}

export interface HttpAccess {
  /** Sent as a bearer token to the hub's own origin only (gated repositories). */
  hubToken?: string
  hubOrigin?: string
}

export interface RetryPolicy {
  /** Broken or stalled connections in a row before the transfer gives up (the partial file stays). */
  attempts: number
  /** First pause between attempts; doubles each time, at most 30 s. */
  baseDelayMs: number
  /** No byte for this long ends the attempt (and retries it). */
  idleTimeoutMs: number
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 5, baseDelayMs: 1000, idleTimeoutMs: 60_000 }

const MAX_REDIRECTS = 10
const WRITE_BATCH_BYTES = 1 << 20
const SHA256_HEX = /^[0-9a-f]{64}$/

/**
 * Asks for the file's size and checksum without fetching it (HEAD, redirects followed by hand so the
 * hub's `X-Linked-*` headers on its first answer are not lost). Best effort: a server that does not
 * answer HEAD leaves the fields unknown and the GET decides. A 404/401/410 for the URL itself is final.
 */
export async function probeRemoteFile(
  source: ModelSource,
  param: string,
  access: HttpAccess,
  signal: AbortSignal,
  timeoutMs = 30_000,
): Promise<RemoteFileInfo> {
  let url = source.url
  let linkedSha: string | undefined
  let linkedSize: number | undefined
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    let res: Response
    try {
      res = await fetch(url, {
        method: 'HEAD',
        redirect: 'manual',
        headers: requestHeaders(url, access),
        signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]),
      })
    } catch (e) {
      if (signal.aborted) throw e
      throw new DownloadError('network', `${source.source}: cannot reach ${new URL(url).host} (${describeFetchError(e)})`, param)
    }
    linkedSha ??= sha256FromEtag(res.headers.get('x-linked-etag'))
    linkedSize ??= sizeHeader(res.headers.get('x-linked-size'))
    const location = res.headers.get('location')
    if (res.status >= 300 && res.status < 400 && location) {
      const next = new URL(location, url)
      // Like huggingface_hub: once the hub has named the file and sends us to its storage, stop.
      if (source.hub && next.origin !== new URL(url).origin && (linkedSha || linkedSize !== undefined)) {
        return { size: linkedSize, sha256: linkedSha, etag: linkedSha ?? undefined }
      }
      url = next.href
      continue
    }
    if (res.ok) {
      const etag = res.headers.get('etag') ?? undefined
      return {
        size: linkedSize ?? (res.headers.get('content-encoding') ? undefined : sizeHeader(res.headers.get('content-length'))),
        sha256: linkedSha ?? (source.hub ? sha256FromEtag(etag) : undefined),
        etag: linkedSha ?? etag,
      }
    }
    if (hop === 0 && (res.status === 404 || res.status === 410 || res.status === 401)) throw unavailable(source, param, res)
    if (res.status >= 500) {
      throw new DownloadError('network', `${source.source}: the server answered ${res.status} ${res.statusText}`.trim(), param)
    }
    break
  }
  return { size: linkedSize, sha256: linkedSha, etag: linkedSha }
}

export interface TransferOptions {
  source: ModelSource
  param: string
  partialPath: string
  /** Continue the partial file that is there (the caller checked it belongs to this remote file). */
  resume: boolean
  expected: RemoteFileInfo
  access: HttpAccess
  retry: RetryPolicy
  signal: AbortSignal
  /** Bytes in the partial file so far, and the total once known. */
  onProgress: (bytes: number, total: number | undefined) => void
}

export interface TransferResult {
  size: number
  sha256: string
}

/**
 * Streams the file into `partialPath`, hashing as it goes. A broken or stalled connection is
 * retried with backoff from where it stopped (`Range: bytes=N-`); a server that answers 200 to a
 * range starts the file over. Throws DownloadError; 'network' means the partial file is worth keeping.
 */
export async function transferFile(options: TransferOptions): Promise<TransferResult> {
  const { source, param, partialPath, signal, retry } = options
  let total = options.expected.size
  const state = { hash: createHash('sha256'), written: 0 }
  const handle = await openPartial(partialPath, options.resume)
  try {
    if (options.resume) state.written = await hashExisting(partialPath, state.hash)
    if (total !== undefined && state.written > total) await restart(handle, state)
    options.onProgress(state.written, total)

    let failuresInARow = 0
    while (true) {
      const before = state.written
      try {
        const outcome = await attempt()
        if (outcome === 'complete') break
        continue // 'restarted': the next request asks for the whole file
      } catch (e) {
        if (signal.aborted) throw signal.reason ?? e
        if (!(e instanceof RetryableError)) throw e
        failuresInARow = state.written > before ? 1 : failuresInARow + 1
        if (failuresInARow > retry.attempts) {
          throw new DownloadError('network', `${source.source}: ${e.message} (gave up after ${retry.attempts} retries)`, param)
        }
        await sleep(Math.min(30_000, retry.baseDelayMs * 2 ** (failuresInARow - 1)), undefined, { signal }).catch(() => {
          throw signal.reason
        })
      }
    }
    if (total !== undefined && state.written !== total) {
      throw new DownloadError('size_mismatch', `${source.source}: got ${state.written} bytes, expected ${total}`, param)
    }
    await handle.sync()
    return { size: state.written, sha256: state.hash.digest('hex') }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOSPC') {
      throw new DownloadError('insufficient_storage', `the disk is full: ${source.fileName} could not be written`, param)
    }
    throw e
  } finally {
    await handle.close()
  }

  async function attempt(): Promise<'complete' | 'restarted'> {
    const attemptController = new AbortController()
    let stalled = false
    const idleTimer = setTimeout(() => {
      stalled = true
      attemptController.abort()
    }, retry.idleTimeoutMs)
    const armIdleTimer = () => idleTimer.refresh()
    const from = state.written
    const headers = requestHeaders(source.url, options.access)
    if (from > 0) headers.range = `bytes=${from}-`
    try {
      let res: Response
      try {
        res = await fetch(source.url, { headers, redirect: 'follow', signal: AbortSignal.any([signal, attemptController.signal]) })
      } catch (e) {
        if (signal.aborted) throw signal.reason
        throw new RetryableError(stalled ? 'the server did not answer' : `cannot reach ${new URL(source.url).host} (${describeFetchError(e)})`)
      }
      if (res.status === 416 && from > 0) {
        await res.body?.cancel()
        const remoteTotal = contentRangeTotal(res.headers.get('content-range')) ?? total
        if (remoteTotal === from) return 'complete'
        await restart(handle, state)
        return 'restarted'
      }
      if (!res.ok) {
        await res.body?.cancel()
        if (res.status >= 500 || res.status === 429 || res.status === 408) throw new RetryableError(`the server answered ${res.status}`)
        throw unavailable(source, param, res)
      }
      if (from > 0) {
        const start = contentRangeStart(res.headers.get('content-range'))
        if (res.status !== 206 || start !== from) {
          // No range support (or a range we did not ask for): the whole file comes again.
          if (res.status === 206) {
            await res.body?.cancel()
            await restart(handle, state)
            return 'restarted'
          }
          await restart(handle, state)
        }
      }
      const announced =
        res.status === 206
          ? contentRangeTotal(res.headers.get('content-range'))
          : res.headers.get('content-encoding')
            ? undefined
            : sizeHeader(res.headers.get('content-length'))
      if (total === undefined && announced !== undefined) total = announced
      else if (total !== undefined && announced !== undefined && announced !== total) {
        await res.body?.cancel()
        throw new DownloadError('size_mismatch', `${source.source}: the server sends ${announced} bytes, expected ${total}`, param)
      }
      options.onProgress(state.written, total)
      if (!res.body) throw new RetryableError('the response has no body')

      // Chunks are gathered and written a megabyte at a time, one write in flight while the next
      // megabyte arrives: a write per network chunk, or reading and writing by turns, halves the rate.
      const reader = res.body.getReader()
      let pending: Uint8Array[] = []
      let pendingBytes = 0
      let writeAt = state.written
      let inflight: Promise<void> = Promise.resolve()
      let writeError: unknown
      const flush = async (wait: boolean) => {
        if (pendingBytes > 0) {
          const chunks = pending
          const size = pendingBytes
          const at = writeAt
          pending = []
          pendingBytes = 0
          writeAt += size
          await inflight
          inflight = handle.writev(chunks, at).then(
            () => void (state.written += size),
            (e: unknown) => void (writeError ??= e),
          )
        }
        if (wait) await inflight
        if (writeError) throw writeError
      }
      try {
        while (true) {
          let chunk: ReadableStreamReadResult<Uint8Array>
          try {
            chunk = await reader.read()
          } catch (e) {
            if (signal.aborted) throw signal.reason
            throw new RetryableError(stalled ? `no data for ${Math.round(retry.idleTimeoutMs / 1000)} s` : `the connection broke (${describeFetchError(e)})`)
          }
          if (chunk.done) break
          armIdleTimer()
          const bytes = chunk.value
          if (total !== undefined && writeAt + pendingBytes + bytes.length > total) {
            throw new DownloadError('size_mismatch', `${source.source}: the server sent more than the expected ${total} bytes`, param)
          }
          state.hash.update(bytes)
          pending.push(bytes)
          pendingBytes += bytes.length
          if (pendingBytes >= WRITE_BATCH_BYTES) await flush(false)
          options.onProgress(writeAt + pendingBytes, total)
        }
      } finally {
        reader.releaseLock()
        // What arrived before a break is good: on disk it is where the next attempt resumes.
        await flush(true)
      }
      if (total !== undefined && state.written < total) throw new RetryableError('the connection closed early')
      return 'complete'
    } finally {
      clearTimeout(idleTimer)
    }
  }
}

/** A failure worth another try from where the file stopped. */
class RetryableError extends Error {}

async function openPartial(path: string, resume: boolean): Promise<FileHandle> {
  if (!resume) return open(path, 'w+')
  try {
    return await open(path, 'r+')
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return open(path, 'w+')
    throw e
  }
}

async function restart(handle: FileHandle, state: { hash: Hash; written: number }): Promise<void> {
  await handle.truncate(0)
  state.hash = createHash('sha256')
  state.written = 0
}

async function hashExisting(path: string, hash: Hash): Promise<number> {
  let size = 0
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) {
    hash.update(chunk as Buffer)
    size += (chunk as Buffer).length
  }
  return size
}

function requestHeaders(url: string, access: HttpAccess): Record<string, string> {
  // Identity: a compressed body would not match the size and checksum the server published.
  const headers: Record<string, string> = { 'accept-encoding': 'identity', 'user-agent': 'hearth' }
  if (access.hubToken && access.hubOrigin && new URL(url).origin === access.hubOrigin) headers.authorization = `Bearer ${access.hubToken}`
  return headers
}

function unavailable(source: ModelSource, param: string, res: Response): DownloadError {
  const why =
    res.status === 404 || res.status === 410
      ? 'not found'
      : res.status === 401 || res.status === 403
        ? 'access denied (a missing, private or gated repository; set HF_TOKEN for gated ones)'
        : 'refused'
  return new DownloadError('source_unavailable', `${source.source}: ${why} (HTTP ${res.status})`, param)
}

export function sha256FromEtag(etag: string | null | undefined): string | undefined {
  if (!etag) return undefined
  const value = etag.replace(/^W\//, '').replace(/"/g, '').trim().toLowerCase()
  return SHA256_HEX.test(value) ? value : undefined
}

function sizeHeader(value: string | null): number | undefined {
  if (value === null || !/^\d+$/.test(value.trim())) return undefined
  return Number(value)
}

function contentRangeStart(value: string | null): number | undefined {
  const m = value ? /^bytes (\d+)-\d+\/(?:\d+|\*)$/.exec(value.trim()) : null
  return m ? Number(m[1]) : undefined
}

function contentRangeTotal(value: string | null): number | undefined {
  const m = value ? /\/(\d+)$/.exec(value.trim()) : null
  return m ? Number(m[1]) : undefined
}

function describeFetchError(e: unknown): string {
  const cause = (e as { cause?: { code?: string; message?: string } }).cause
  return cause?.code ?? cause?.message ?? (e as Error).message ?? String(e)
}
