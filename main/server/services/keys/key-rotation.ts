/**
 * Regenerating the generated API key: a new key replaces the file in the data folder and the
 * in-memory set at once. Keys the user gave (flags, environment, settings file) are theirs to
 * change, so only the generated one can be regenerated here.
 */
import { join } from 'node:path'
import { writeFileAtomically } from '../atomic-write.ts'
import { API_KEY_FILE, type ApiKeys } from './api-keys.ts'
import { generateApiKey } from './key-store.ts'
import { ApiError } from '../api-error.ts'
import type { ServerSettings } from '../../settings.ts'

/** Where the generated key lives, or undefined when the server does not use a generated key. */
export function generatedKeyFile(settings: ServerSettings): string | undefined {
  return settings.auth && settings.apiKeys.length === 0 ? join(settings.dataDir, API_KEY_FILE) : undefined
}

export async function regenerateApiKey(settings: ServerSettings, keys: ApiKeys | undefined): Promise<string> {
  const file = generatedKeyFile(settings)
  if (!keys || !settings.auth) {
    throw new ApiError(409, 'invalid_request_error', 'auth_disabled', 'Authentication is off (--no-auth), so there is no key to regenerate')
  }
  if (!file) {
    throw new ApiError(
      409,
      'invalid_request_error',
      'keys_not_generated',
      'The server uses keys given with --api-key, HEARTH_API_KEY or settings.json; change them there',
    )
  }
  const key = generateApiKey()
  // On the disk before anyone is told: a crash never leaves half a key, nor forgets one already answered.
  await writeFileAtomically(file, `${key}\n`, { mode: 0o600 })
  keys.replace([key])
  return key
}
