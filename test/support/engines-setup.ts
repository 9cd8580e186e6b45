/**
 * Before the engines project's suites: the coding agents the agent suites drive are installed
 * (once per lockfile, into a cache outside the clone), with their own progress line, never inside a
 * suite's hook and its timeout. A registry that cannot be reached makes those suites skip, loudly.
 */
import { installAgents } from './agent-programs.ts'

export default function setup(): void {
  const problem = installAgents((line) => console.log(`[setup] ${line}`))
  if (problem) console.warn(`\n*** the agent suites will be SKIPPED: ${problem} ***\n`)
}
