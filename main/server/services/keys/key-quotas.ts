/**
 * Per-key quotas for keys made under /api/keys: requests per minute (a sliding minute, counted
 * when the key is checked) and tokens per UTC day (counted when a response is done, from what the
 * route recorded). A spent quota is 429 `insufficient_quota` with `x-should-retry: false`, so the
 * official clients do not hammer the server retrying.
 */
import type { Response } from 'express'
import { ApiError } from '../api-error.ts'
import type { KeyStore, ManagedKey } from './key-store.ts'

/**
 * Translation has no tokens in its usage, only seconds of audio. A second of speech is about 2.5
 * words, and decoding it costs about what generating ~10 tokens does on the same machine, so a
 * second counts as 10 tokens against a key's daily quota.
 */
export const AUDIO_TOKENS_PER_SECOND = 10

export interface RequestUsage {
  promptTokens: number
  /** Of the prompt tokens, those the engine's cache held (the request log shows them). */
  cachedTokens: number
  completionTokens: number
  /** Seconds of audio a translation decoded. */
  audioSeconds: number
  /** Speculative decoding: tokens drafted, and how many of them the model accepted (metrics and the request log). */
  draftTokens?: number
  draftAccepted?: number
}

/** What a route calls once it knows a request's usage (metrics and quotas read it at the end). */
export function recordUsage(res: Response, usage: Partial<RequestUsage>): void {
  const previous = usageOf(res)
  res.locals.usage = {
    promptTokens: previous.promptTokens + (usage.promptTokens ?? 0),
    cachedTokens: previous.cachedTokens + (usage.cachedTokens ?? 0),
    completionTokens: previous.completionTokens + (usage.completionTokens ?? 0),
    audioSeconds: previous.audioSeconds + (usage.audioSeconds ?? 0),
    ...(usage.draftTokens !== undefined || previous.draftTokens !== undefined
      ? { draftTokens: (previous.draftTokens ?? 0) + (usage.draftTokens ?? 0), draftAccepted: (previous.draftAccepted ?? 0) + (usage.draftAccepted ?? 0) }
      : {}),
  } satisfies RequestUsage
}

export function usageOf(res: Response): RequestUsage {
  const usage = res.locals.usage as RequestUsage | undefined
  return usage ?? { promptTokens: 0, cachedTokens: 0, completionTokens: 0, audioSeconds: 0 }
}

/** The tokens a request costs against a daily quota. */
export function quotaTokens(usage: RequestUsage): number {
  return usage.promptTokens + usage.completionTokens + Math.ceil(usage.audioSeconds * AUDIO_TOKENS_PER_SECOND)
}

const MINUTE_MS = 60_000

export class QuotaGate {
  /** Times of the requests each key made in the last minute, oldest first (at most its quota). */
  private readonly recent = new Map<string, number[]>()

  constructor(private readonly store: KeyStore) {}

  /** Lets a request of this key in, counting it, or throws the 429. */
  admit(key: ManagedKey, now = Date.now()): void {
    if (key.tokensPerDay !== null) {
      const used = this.store.tokensToday(key.id, now)
      if (used >= key.tokensPerDay) {
        throw quotaError(`This key has used its quota of ${key.tokensPerDay} tokens per day (${used} today); it renews at 00:00 UTC`)
      }
    }
    if (key.requestsPerMinute !== null) {
      const times = (this.recent.get(key.id) ?? []).filter((t) => now - t < MINUTE_MS)
      if (times.length >= key.requestsPerMinute) {
        this.recent.set(key.id, times)
        const waitS = Math.ceil((MINUTE_MS - (now - times[0]!)) / 1000)
        throw quotaError(`This key has used its quota of ${key.requestsPerMinute} requests per minute; the next one is possible in ${waitS} s`)
      }
      times.push(now)
      this.recent.set(key.id, times)
    }
    this.store.touch(key.id, now)
  }

  /** Counts what a finished request used against its key's daily tokens. */
  charge(key: ManagedKey, usage: RequestUsage, now = Date.now()): void {
    this.store.addTokens(key.id, quotaTokens(usage), now)
  }

  forget(id: string): void {
    this.recent.delete(id)
  }
}

function quotaError(message: string): ApiError {
  return new ApiError(429, 'insufficient_quota', 'insufficient_quota', message, null, { 'x-should-retry': 'false' })
}
