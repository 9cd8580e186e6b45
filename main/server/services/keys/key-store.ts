/**
 * The API keys made under /api/keys, kept in `<dataDir>/keys.json`: a label, optional quotas and the
 * key's SHA-256 digest, never the key itself (it is shown once, when it is made). Usage that
 * quotas count per day is kept there too, so a restart does not hand out a fresh day's tokens.
 */
import { createHash, randomBytes } from 'node:crypto'
import { mkdir, readFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { z } from 'zod'
import { writeFileAtomically } from '../atomic-write.ts'
import { StartupError } from '../startup-error.ts'

/** A new key: `hearth-` and 24 random bytes, as the server and /api/keys hand them out. */
export function generateApiKey(): string {
  return `hearth-${randomBytes(24).toString('base64url')}`
}

export const KEYS_FILE = 'keys.json'

/** What a key may do with MCP servers: nothing, run their tools, or also add, change and remove them. */
export const MCP_PERMISSIONS = ['none', 'use', 'manage'] as const
export type McpPermission = (typeof MCP_PERMISSIONS)[number]

/** A key as the store keeps it (and as GET /api/keys shows it, less the digest). */
export interface ManagedKey {
  id: string
  label: string | null
  /** Hex SHA-256 of the key. */
  sha256: string
  /** The key's first and last characters (`hearth-…Wx9z`), so people can tell their keys apart. */
  hint: string
  /** Unix seconds. */
  created: number
  requestsPerMinute: number | null
  tokensPerDay: number | null
  /** Unix seconds of the last accepted request; null when never used. */
  lastUsed: number | null
  /** The UTC day (`2026-01-31`) `tokensToday` counts for. */
  tokensDay: string | null
  tokensToday: number
  /** MCP servers: "none" unless granted (keys made before MCP existed have none). */
  mcp: McpPermission
  /** May borrow this machine's memory when it lends (`--lend`, docs/pool.md); false unless granted. */
  lend: boolean
}

export interface KeyQuotas {
  requestsPerMinute?: number | null
  tokensPerDay?: number | null
}

const storedKeySchema = z.object({
  id: z.string().regex(/^key_[a-f0-9]{12}$/),
  label: z.string().max(200).nullable(),
  sha256: z.string().regex(/^[a-f0-9]{64}$/),
  hint: z.string().max(40),
  created: z.number(),
  requests_per_minute: z.int().positive().nullable(),
  tokens_per_day: z.int().positive().nullable(),
  last_used: z.number().nullable(),
  tokens_day: z.string().nullable().default(null),
  tokens_today: z.number().min(0).default(0),
  mcp: z.enum(MCP_PERMISSIONS).default('none'),
  lend: z.boolean().default(false),
})
const keysFileSchema = z.object({ version: z.literal(1), keys: z.array(storedKeySchema) })

export class KeyStoreError extends StartupError {
  override name = 'KeyStoreError'
}

/** How long usage may sit in memory before it is written (last_used, tokens of the day). */
const USAGE_SAVE_DELAY_MS = 5_000
/** A failed write of usage is tried again after this, doubling up to the most. */
const RETRY_FIRST_MS = 5_000
const RETRY_MOST_MS = 5 * 60_000

export class KeyStore {
  private readonly keys = new Map<string, ManagedKey>()
  private writing: Promise<void> = Promise.resolve()
  private saveTimer: NodeJS.Timeout | undefined
  /** Usage changed since the last write that succeeded. */
  private usagePending = false
  private retryMs = RETRY_FIRST_MS

  private constructor(
    readonly path: string,
    private readonly log: (line: string) => void,
  ) {}

  /** Reads `<dataDir>/keys.json`; a missing file is an empty store, a damaged one an error. */
  static async open(dataDir: string, log: (line: string) => void = console.warn): Promise<KeyStore> {
    const store = new KeyStore(join(dataDir, KEYS_FILE), log)
    let text: string
    try {
      text = await readFile(store.path, 'utf8')
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return store
      throw new KeyStoreError(`cannot read ${store.path}: ${(e as Error).message}`)
    }
    let parsed
    try {
      parsed = keysFileSchema.safeParse(JSON.parse(text))
    } catch (e) {
      throw new KeyStoreError(`${store.path} is not valid JSON: ${(e as Error).message}`)
    }
    if (!parsed.success) {
      const issue = parsed.error.issues[0]
      throw new KeyStoreError(`${store.path} has a bad value at "${issue?.path.join('.')}": ${issue?.message}`)
    }
    for (const k of parsed.data.keys) {
      store.keys.set(k.id, {
        id: k.id,
        label: k.label,
        sha256: k.sha256,
        hint: k.hint,
        created: k.created,
        requestsPerMinute: k.requests_per_minute,
        tokensPerDay: k.tokens_per_day,
        lastUsed: k.last_used,
        tokensDay: k.tokens_day,
        tokensToday: k.tokens_today,
        mcp: k.mcp,
        lend: k.lend,
      })
    }
    return store
  }

  list(): ManagedKey[] {
    return [...this.keys.values()].sort((a, b) => a.created - b.created || a.id.localeCompare(b.id))
  }

  get(id: string): ManagedKey | undefined {
    return this.keys.get(id)
  }

  /** Every key's digest, for the constant-time comparison in ApiKeys. */
  digests(): Array<{ id: string; digest: Buffer }> {
    return this.list().map((k) => ({ id: k.id, digest: Buffer.from(k.sha256, 'hex') }))
  }

  /**
   * Makes a key; the returned `key` is the only time it exists outside the client. It is on the
   * disk before this returns: a key whose write failed is not made (and the error is thrown), so a
   * key a client was given is never lost to a crash.
   */
  async create(label: string | null, quotas: KeyQuotas, mcp: McpPermission = 'none', lend = false): Promise<{ key: string; record: ManagedKey }> {
    const key = generateApiKey()
    const record: ManagedKey = {
      id: `key_${randomBytes(6).toString('hex')}`,
      label,
      sha256: createHash('sha256').update(key, 'utf8').digest('hex'),
      hint: `${key.slice(0, 7)}…${key.slice(-4)}`,
      created: Math.floor(Date.now() / 1000),
      requestsPerMinute: quotas.requestsPerMinute ?? null,
      tokensPerDay: quotas.tokensPerDay ?? null,
      lastUsed: null,
      tokensDay: null,
      tokensToday: 0,
      mcp,
      lend,
    }
    this.keys.set(record.id, record)
    try {
      await this.save()
    } catch (e) {
      this.keys.delete(record.id)
      throw e
    }
    return { key, record }
  }

  async update(id: string, changes: KeyQuotas & { label?: string | null; mcp?: McpPermission; lend?: boolean }): Promise<ManagedKey | undefined> {
    const record = this.keys.get(id)
    if (!record) return undefined
    const before = { ...record }
    if (changes.label !== undefined) record.label = changes.label
    if (changes.requestsPerMinute !== undefined) record.requestsPerMinute = changes.requestsPerMinute
    if (changes.tokensPerDay !== undefined) record.tokensPerDay = changes.tokensPerDay
    if (changes.mcp !== undefined) record.mcp = changes.mcp
    if (changes.lend !== undefined) record.lend = changes.lend
    try {
      await this.save()
    } catch (e) {
      Object.assign(record, { ...before, lastUsed: record.lastUsed, tokensDay: record.tokensDay, tokensToday: record.tokensToday })
      throw e
    }
    return record
  }

  async remove(id: string): Promise<boolean> {
    const record = this.keys.get(id)
    if (!record || !this.keys.delete(id)) return false
    try {
      await this.save()
    } catch (e) {
      this.keys.set(id, record)
      throw e
    }
    return true
  }

  /** Notes a use; written to disk a little later, with other uses. */
  touch(id: string, nowMs = Date.now()): void {
    const record = this.keys.get(id)
    if (!record) return
    record.lastUsed = Math.floor(nowMs / 1000)
    this.usageChanged()
  }

  /** Tokens spent today (UTC) by the key. */
  tokensToday(id: string, nowMs = Date.now()): number {
    const record = this.keys.get(id)
    if (!record) return 0
    return record.tokensDay === utcDay(nowMs) ? record.tokensToday : 0
  }

  addTokens(id: string, tokens: number, nowMs = Date.now()): void {
    const record = this.keys.get(id)
    if (!record || !(tokens > 0)) return
    const day = utcDay(nowMs)
    if (record.tokensDay !== day) {
      record.tokensDay = day
      record.tokensToday = 0
    }
    record.tokensToday += Math.ceil(tokens)
    this.usageChanged()
  }

  /** Writes what is pending now (at shutdown); a write that fails is logged, not thrown, so shutdown goes on. */
  async flush(): Promise<void> {
    if (this.saveTimer) {
      clearTimeout(this.saveTimer)
      this.saveTimer = undefined
    }
    if (this.usagePending) await this.saveUsage()
    await this.writing
  }

  private usageChanged(): void {
    this.usagePending = true
    this.saveUsageIn(USAGE_SAVE_DELAY_MS)
  }

  private saveUsageIn(ms: number): void {
    if (this.saveTimer) return
    this.saveTimer = setTimeout(() => {
      this.saveTimer = undefined
      void this.saveUsage()
    }, ms)
    this.saveTimer.unref()
  }

  /** Writes the usage; a failure is logged and tried again later (backing off), never dropped. */
  private async saveUsage(): Promise<void> {
    try {
      await this.save()
      if (this.retryMs !== RETRY_FIRST_MS) this.log(`the keys' usage is written to ${this.path} again`)
      this.retryMs = RETRY_FIRST_MS
    } catch (e) {
      this.usagePending = true
      this.log(
        `warning: the keys' usage and quotas could not be written to ${this.path} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); trying again in ${Math.round(this.retryMs / 1000)} s`,
      )
      this.saveUsageIn(this.retryMs)
      this.retryMs = Math.min(this.retryMs * 2, RETRY_MOST_MS)
    }
  }

  /**
   * One write at a time, each of the keys as they are when it starts, flushed to the disk and
   * renamed over the old file (never half a file). Every write holds all usage so far.
   */
  private save(): Promise<void> {
    const next = this.writing.then(async () => {
      this.usagePending = false
      const json = `${JSON.stringify({ version: 1, keys: this.list().map(toStored) }, null, 2)}\n`
      try {
        await mkdir(dirname(this.path), { recursive: true })
        await writeFileAtomically(this.path, json, { mode: 0o600 })
      } catch (e) {
        this.usagePending = true
        throw e
      }
    })
    this.writing = next.catch(() => undefined)
    return next
  }
}

function toStored(k: ManagedKey) {
  return {
    id: k.id,
    label: k.label,
    sha256: k.sha256,
    hint: k.hint,
    created: k.created,
    requests_per_minute: k.requestsPerMinute,
    tokens_per_day: k.tokensPerDay,
    last_used: k.lastUsed,
    tokens_day: k.tokensDay,
    tokens_today: k.tokensToday,
    mcp: k.mcp,
    lend: k.lend,
  }
}

export function utcDay(nowMs: number): string {
  return new Date(nowMs).toISOString().slice(0, 10)
}
