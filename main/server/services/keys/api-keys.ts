/**
 * The keys the server accepts. Keys are held as SHA-256 digests and compared in constant time, so
 * neither memory dumps nor response timing give a key away.
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import { mkdir, readFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { writeFileAtomically } from '../atomic-write.ts'
import { generateApiKey, type KeyStore, type ManagedKey } from './key-store.ts'

export const API_KEY_FILE = 'api-key'

/** Who a request's key belongs to: a key from /api/keys (with its quotas), or the server's own key. */
export interface KeyIdentity {
  /** Undefined for the generated key and keys given with --api-key (no label, no quotas). */
  managed: ManagedKey | undefined
}

export class ApiKeys {
  private digests: Buffer[]

  /** `store` holds the keys made under /api/keys; the plain keys are the generated one or --api-key's. */
  constructor(
    keys: readonly string[],
    readonly store?: KeyStore,
  ) {
    this.digests = keys.map(digest)
  }

  /** Swaps the whole set at once (key regeneration): the old keys stop working with the next request. */
  replace(keys: readonly string[]): void {
    this.digests = keys.map(digest)
  }

  /** True when the `Authorization` header carries one of the keys as a Bearer token. */
  accepts(authorization: string | undefined): boolean {
    return this.identify(authorization) !== undefined
  }

  /** The key's owner when the `Authorization` header carries a known key, else undefined. */
  identify(authorization: string | undefined): KeyIdentity | undefined {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '')
    if (!match?.[1]) return undefined
    const candidate = digest(match[1])
    // Check every key, so timing does not tell which one (or whether any) came close.
    let ok = false
    for (const d of this.digests) ok = timingSafeEqual(candidate, d) || ok
    let found: string | undefined
    for (const { id, digest: d } of this.store?.digests() ?? []) {
      if (timingSafeEqual(candidate, d)) found = id
    }
    if (found !== undefined) return { managed: this.store?.get(found) }
    return ok ? { managed: undefined } : undefined
  }
}

function digest(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest()
}

/** The key kept in the data folder, created on first start; returns it and where it lives. */
export async function loadOrCreateStoredKey(dataDir: string): Promise<{ key: string; path: string; created: boolean }> {
  const path = join(dataDir, API_KEY_FILE)
  try {
    const key = (await readFile(path, 'utf8')).trim()
    if (key.length >= 8) return { key, path, created: false }
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e
  }
  const key = generateApiKey()
  await mkdir(dirname(path), { recursive: true })
  // Whole or not at all: a start cut short never leaves the first characters of a key as the key.
  await writeFileAtomically(path, `${key}\n`, { mode: 0o600 })
  return { key, path, created: true }
}
