/**
 * A suite that cannot run here (no engine build, shared fixture, fetched model or browser) says so
 * loudly and is skipped. Where everything must run (CI: `.ci/run` sets HEARTH_REQUIRE_ALL=1) it
 * fails instead, so a missing fixture or model never passes as green.
 *
 * Every skip in the tests goes through here (test/fast/loud-skips.test.ts checks): `describeIf` and
 * `itIf` in place of vitest's `describe.skipIf` and `it.skipIf`, `skipTest` in place of a test
 * context's `skip()`. Only a suite about another platform (macOS, a GPU build) is skipped quietly
 * everywhere: `{ elsewhere: true }`, since no machine could run it and the one it names.
 */
import { describe, it } from 'vitest'

export const EVERYTHING_MUST_RUN = process.env.HEARTH_REQUIRE_ALL === '1'

const said = new Set<string>()

export function cannotRun(reason: string): void {
  if (EVERYTHING_MUST_RUN) throw new Error(`cannot run: ${reason} (HEARTH_REQUIRE_ALL=1: every suite must run here)`)
  if (said.has(reason)) return
  said.add(reason)
  console.warn(`\n*** SKIPPED: ${reason} ***\n`)
}

/** What `describe.skipIf(…)` and `it.skipIf(…)` hand back: a describe or an it, run or skipped. */
type Suite = typeof describe.skip
type Test = typeof it.skip

export interface SkipOptions {
  /** The suite is about another platform or build than this one: skipped, said, never a failure. */
  elsewhere?: boolean
}

/**
 * `describe` where `condition` holds. Where it does not: vitest's `describe.skip` with the reason
 * said loudly, or (HEARTH_REQUIRE_ALL=1) a suite whose one test fails with the reason.
 * `describeIf(llamaBuild, 'llama.cpp is not built here')('the engine', () => { … })`.
 */
export function describeIf(condition: unknown, reason: string, options: SkipOptions = {}): Suite {
  if (condition) return describe
  if (options.elsewhere) return notHere(reason, describe.skip)
  if (!EVERYTHING_MUST_RUN) {
    cannotRun(reason)
    return describe.skip
  }
  const failing = (name: unknown) => describe(String(name), () => it('runs here', () => cannotRun(reason)))
  return failing as unknown as Suite
}

/** `it` where `condition` holds; otherwise as describeIf says. `itIf(ffmpeg, 'no ffmpeg on PATH')('decodes AIFF', …)`. */
export function itIf(condition: unknown, reason: string, options: SkipOptions = {}): Test {
  if (condition) return it
  if (options.elsewhere) return notHere(reason, it.skip)
  if (!EVERYTHING_MUST_RUN) {
    cannotRun(reason)
    return it.skip
  }
  const failing = (name: unknown) => it(String(name), () => cannotRun(reason))
  return failing as unknown as Test
}

/** Inside a test, in place of its context's `skip()`: `if (!mounted) skipTest(skip, 'no tmpfs')`. */
export function skipTest(skip: (note?: string) => void, reason: string): void {
  cannotRun(reason)
  skip(reason)
}

function notHere<T>(reason: string, skipped: T): T {
  if (!said.has(reason)) {
    said.add(reason)
    console.warn(`\n*** NOT FOR THIS MACHINE: ${reason} ***\n`)
  }
  return skipped
}
