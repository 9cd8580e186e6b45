/**
 * Keeps the engine cache from growing with every Hearth update. Each new set of patches makes a
 * patched source tree (about 250 MB for llama.cpp and whisper.cpp together) and a build; left
 * alone, every update and every new CPU a home folder meets adds to them for good. After install
 * has its engines, what no build needs any more goes: source trees and package tarballs other than
 * the pinned ones (made again from the registry in seconds, should an older Hearth want them), the
 * leftovers of interrupted builds, and builds that nothing has used for a month (a build found by
 * a server or an install counts as used: findBuild stamps it). Anything the cache holds that is
 * not its own (benchmark models, a rebase in progress) is left alone.
 */
import { existsSync, lstatSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { formatBytes } from '../../models/format-bytes.ts'

/** A build not used for this long is removed (another clone or CPU that shares the home folder would build it again). */
export const UNUSED_BUILD_DAYS = 30
/** Interrupted builds' folders and logs are kept this long: a build may be running now, a failed one's log may be wanted. */
const LEFTOVER_DAYS = 7
const DAY_MS = 24 * 60 * 60 * 1000

/** The stamp a build's folder carries of when it was last found for use. */
const LAST_USED = '.last-used'

export interface CacheKeep {
  /** Folder names of the builds in use now (`llama-<key>`, `whisper-<key>`). */
  builds: readonly string[]
  /** Folder and file names of the sources the pinned versions build from (source trees, tarballs). */
  sources: readonly string[]
}

export interface TidiedEntry {
  name: string
  bytes: number
  why: 'earlier source' | 'unused build' | 'leftover'
}

/** Marks a build as used now, at most once a day (a read-only cache is left as it is). */
export function stampBuildUsed(dir: string, now = Date.now()): void {
  const stamp = join(dir, LAST_USED)
  try {
    if (existsSync(stamp) && now - statSync(stamp).mtimeMs < DAY_MS) return
    writeFileSync(stamp, '')
    utimesSync(stamp, new Date(now), new Date(now))
  } catch {
    // nothing to stamp with: the build's own date stands in
  }
}

/** Removes from `cacheDir` what `keep` does not need any more (see the top of this file); returns what went. */
export function tidyEngineCache(cacheDir: string, keep: CacheKeep, now = Date.now()): TidiedEntry[] {
  if (!existsSync(cacheDir)) return []
  const keptKeys = new Set(keep.builds.map(buildKeyOf).filter((k) => k !== undefined))
  const removed: TidiedEntry[] = []
  for (const name of readdirSync(cacheDir)) {
    const path = join(cacheDir, name)
    const why = reasonToRemove(name, path, keep, keptKeys, now)
    if (!why) continue
    const bytes = sizeOf(path)
    rmSync(path, { recursive: true, force: true })
    removed.push({ name, bytes, why })
  }
  return removed
}

/** One line for install to print, or undefined when nothing went. */
export function describeTidy(removed: readonly TidiedEntry[]): string | undefined {
  if (removed.length === 0) return undefined
  const count = (why: TidiedEntry['why'], one: string, many: string) => {
    const n = removed.filter((r) => r.why === why).length
    return n === 0 ? [] : [`${n} ${n === 1 ? one : many}`]
  }
  const parts = [
    ...count('earlier source', 'source no build here needs', 'sources no build here needs'),
    ...count('unused build', `build unused for ${UNUSED_BUILD_DAYS} days`, `builds unused for ${UNUSED_BUILD_DAYS} days`),
    ...count('leftover', 'leftover of an interrupted build', 'leftovers of interrupted builds'),
  ]
  const bytes = removed.reduce((sum, r) => sum + r.bytes, 0)
  return `cache: removed ${parts.join(', ')} (${formatBytes(bytes)} freed)`
}

function reasonToRemove(name: string, path: string, keep: CacheKeep, keptKeys: Set<string>, now: number): TidiedEntry['why'] | undefined {
  const age = now - mtime(path)
  // An interrupted build's staging, CMake folder, log or self-test scratch.
  if (name.endsWith('.partial') || /^build-.+-[0-9a-f]{16}(\.log)?$/.test(name) || /^self-test-/.test(name) || /-self-test$/.test(name)) {
    const key = buildKeyOf(name.replace(/\.(partial|log)$/, '').replace(/-self-test$/, ''))
    if (key && keptKeys.has(key) && !name.endsWith('.partial')) return undefined
    return age > LEFTOVER_DAYS * DAY_MS ? 'leftover' : undefined
  }
  if (/^(whisper-)?src-/.test(name) || name.endsWith('.tgz')) return keep.sources.includes(name) ? undefined : 'earlier source'
  if (buildKeyOf(name) && existsSync(join(path, 'build.json'))) {
    if (keep.builds.includes(name)) return undefined
    const lastUsed = existsSync(join(path, LAST_USED)) ? mtime(join(path, LAST_USED)) : mtime(join(path, 'build.json'))
    return now - lastUsed > UNUSED_BUILD_DAYS * DAY_MS ? 'unused build' : undefined
  }
  return undefined
}

/** The cache key a build's folder name ends with (`llama-e29102eb0556e4ff` → `e29102eb0556e4ff`). */
function buildKeyOf(name: string): string | undefined {
  return /-([0-9a-f]{16})$/.exec(name)?.[1]
}

function mtime(path: string): number {
  try {
    return statSync(path).mtimeMs
  } catch {
    return 0
  }
}

function sizeOf(path: string): number {
  try {
    const stat = lstatSync(path)
    if (!stat.isDirectory()) return stat.size
    return readdirSync(path).reduce((sum, entry) => sum + sizeOf(join(path, entry)), 0)
  } catch {
    return 0
  }
}
