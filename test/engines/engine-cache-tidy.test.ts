/**
 * The engine cache does not grow with every update: a build counts as used whenever a server or
 * an install finds it, and goes only after a month unused; a source no build needs goes at once,
 * and only the cache's own link to it where it is a link. (Install's own line about it:
 * test/engine-build-output.test.ts.)
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { findBuild, type BuildRecipe } from '../../engines/builder/cmake-build.ts'
import { tidyEngineCache, UNUSED_BUILD_DAYS } from '../../engines/builder/engine-cache-tidy.ts'

const DAY = 24 * 3600 * 1000

function cacheWithBuild(name: string, builtDaysAgo: number): { cache: string; dir: string } {
  const cache = mkdtempSync(join(tmpdir(), 'hearth-cache-tidy-'))
  const dir = join(cache, name)
  mkdirSync(dir)
  writeFileSync(join(dir, 'build.json'), '{"commit": "x"}')
  writeFileSync(join(dir, 'llama-server'), '')
  const built = new Date(Date.now() - builtDaysAgo * DAY)
  utimesSync(join(dir, 'build.json'), built, built)
  return { cache, dir }
}

describe('the engine cache, tidied', () => {
  it('keeps a build a server found within the month, and clears it a month after its last use', () => {
    const { cache, dir } = cacheWithBuild('llama-00000000000000aa', 90)
    const recipe = { name: 'llama', programs: ['llama-server'], sourceId: 'test', flags: [] } as unknown as BuildRecipe
    // What a server does when it starts: find its build (here by folder, as HEARTH_LLAMA_BUILD_DIR does).
    expect(findBuild(recipe, dir)?.dir).toBe(dir)
    expect(existsSync(join(dir, '.last-used'))).toBe(true)

    expect(tidyEngineCache(cache, { builds: [], sources: [] })).toEqual([])
    expect(existsSync(dir)).toBe(true)
    const removed = tidyEngineCache(cache, { builds: [], sources: [] }, Date.now() + (UNUSED_BUILD_DAYS + 1) * DAY)
    expect(removed).toEqual([expect.objectContaining({ name: 'llama-00000000000000aa', why: 'unused build' })])
    expect(existsSync(dir)).toBe(false)
  })

  it('stamps a found build once a day, not on every start', () => {
    const { dir } = cacheWithBuild('whisper-00000000000000bb', 1)
    const recipe = { name: 'whisper', programs: ['llama-server'], sourceId: 'test', flags: [] } as unknown as BuildRecipe
    findBuild(recipe, dir)
    const stamped = statSync(join(dir, '.last-used')).mtimeMs
    const hourAgo = new Date(stamped - 3600 * 1000)
    utimesSync(join(dir, '.last-used'), hourAgo, hourAgo)
    findBuild(recipe, dir)
    // Still an hour old, not moved to now (file times round to the filesystem's precision).
    expect(Math.abs(statSync(join(dir, '.last-used')).mtimeMs - hourAgo.getTime())).toBeLessThan(1000)
  })

  it('removes a link to an earlier source, never what it points at', () => {
    const elsewhere = mkdtempSync(join(tmpdir(), 'hearth-source-elsewhere-'))
    writeFileSync(join(elsewhere, 'ggml.c'), 'int x;')
    const cache = mkdtempSync(join(tmpdir(), 'hearth-cache-tidy-'))
    symlinkSync(elsewhere, join(cache, 'src-0123456789ab-patched-000000000000'))
    mkdirSync(join(cache, 'src-0123456789ab'))
    const removed = tidyEngineCache(cache, { builds: [], sources: ['src-0123456789ab'] })
    expect(removed.map((r) => r.name)).toEqual(['src-0123456789ab-patched-000000000000'])
    expect(readdirSync(cache)).toEqual(['src-0123456789ab'])
    expect(readdirSync(elsewhere)).toEqual(['ggml.c'])
  })
})
