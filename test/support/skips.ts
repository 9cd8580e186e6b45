/**
 * A suite that cannot run here (no engine build, shared fixture, fetched model or browser) says so
 * loudly and is skipped. Where everything must run (CI: `.ci/run` sets HEARTH_REQUIRE_ALL=1) it
 * fails instead, so a missing fixture or model never passes as green.
 */
export const EVERYTHING_MUST_RUN = process.env.HEARTH_REQUIRE_ALL === '1'

export function cannotRun(reason: string): void {
  if (EVERYTHING_MUST_RUN) throw new Error(`cannot run: ${reason} (HEARTH_REQUIRE_ALL=1: every suite must run here)`)
  console.warn(`\n*** SKIPPED: ${reason} ***\n`)
}
