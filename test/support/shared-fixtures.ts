/**
 * The shared fixtures (../shared/fixtures) hold the only real weights on these machines. Suites that
 * use them run wherever they exist and say loudly when they are skipped.
 */
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { PROJECT_ROOT } from './server-process.ts'
import { cannotRun } from './skips.ts'

export const SHARED_FIXTURES = join(PROJECT_ROOT, '..', 'shared', 'fixtures')

export function sharedFixture(relativePath: string): string | undefined {
  const path = join(SHARED_FIXTURES, relativePath)
  if (existsSync(path)) return path
  cannotRun(`shared fixture ${path} is missing; the suites that need it do not run here`)
  return undefined
}
