/**
 * Every skip in the tests goes through test/support/skips.ts, so that it is said loudly and, under
 * HEARTH_REQUIRE_ALL=1 (CI), fails: vitest's own `.skipIf(`, `.runIf(`, `.skip(`, `.todo(`,
 * `.only(` (which skips every other test), `xit(` and a test context's bare `skip()` would skip in
 * silence, even in CI.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'

const TESTS = resolve(import.meta.dirname, '..')
const HELPER = 'support/skips.ts'
const THIS_FILE = 'fast/loud-skips.test.ts'

/** What skips without the helper, each with a name for the report. */
const SILENT: Array<[string, RegExp]> = [
  ['vitest .skipIf/.runIf', /\.(skipIf|runIf)\s*\(/],
  ['vitest .skip', /\.skip\s*\(/],
  ['vitest .todo', /\.todo\s*\(/],
  ['vitest .only', /\.only\s*\(/],
  ['xit/xdescribe/xtest', /(^|[^\w.$])x(it|describe|test)\s*\(/],
  ["a test context's skip()", /(^|[^\w.$'"`])skip\s*\(/],
]

function testSources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return ['node_modules', 'fixtures', 'artifacts'].includes(entry.name) ? [] : testSources(path)
    return /\.(ts|mts|cts|js|mjs|svelte)$/.test(entry.name) ? [path] : []
  })
}

/** Each silent skip in `text`, as `file:line: kind: the line`; comments do not count. */
export function silentSkips(file: string, text: string): string[] {
  const found: string[] = []
  text.split('\n').forEach((line, i) => {
    const code = line.replace(/\/\/.*$/, '').replace(/^\s*\*.*$/, '')
    for (const [kind, pattern] of SILENT) if (pattern.test(code)) found.push(`${file}:${i + 1}: ${kind}: ${line.trim()}`)
  })
  return found
}

describe('skips in the tests', () => {
  it('recognises every silent form, and the helper forms as loud', () => {
    const silent = [
      "describe.skipIf(!llamaBuild)('suite', () => {})",
      "it.skipIf(!x)('test', async () => {})",
      "describe.runIf(x)('suite', () => {})",
      "it.skip('test', () => {})",
      "test.skip('test', () => {})",
      "it.todo('later')",
      "describe.only('suite', () => {})",
      "xit('test', () => {})",
      "it('test', async ({ skip }) => { if (!mounted) skip() })",
    ]
    for (const line of silent) expect(silentSkips('x.ts', line), line).toHaveLength(1)
    const loud = [
      "describeIf(llamaBuild, 'needs llama.cpp built here')('suite', () => {})",
      "itIf(ffmpeg, 'needs ffmpeg')('test', async () => {})",
      "if (!mounted) skipTest(skip, 'needs a tmpfs')",
      '// describe.skipIf(x) in a comment',
      'const skipped = list.filter((t) => t.skipped)',
    ]
    for (const line of loud) expect(silentSkips('x.ts', line), line).toEqual([])
  })

  it('go through test/support/skips.ts everywhere, so that each is said and fails under HEARTH_REQUIRE_ALL=1', () => {
    const files = testSources(TESTS).filter((f) => ![HELPER, THIS_FILE].includes(relative(TESTS, f)))
    expect(files.length).toBeGreaterThan(80)
    const found = files.flatMap((f) => silentSkips(`test/${relative(TESTS, f)}`, readFileSync(f, 'utf8')))
    expect(found).toEqual([])
  })
})
