import { relative } from 'node:path'
import { BaseSequencer, type TestSpecification } from 'vitest/node'
import { defineConfig } from 'vitest/config'

/**
 * Two projects, run side by side, one folder each:
 * - `fast` (test/fast/, test/renderer/): pure modules and the HTTP app in-process with scripted
 *   engines (test/support/in-process-server.ts). No engine or server processes; the whole project
 *   takes a minute, so `npm run test:fast` is the loop to run while editing.
 * - `engines` (test/engines/): suites that start real servers and llama.cpp / whisper.cpp engines.
 *   Each engine gets one inference thread, so two suites run at once.
 * The slowest suites start first (longest first packs two workers best); the rest follow.
 */
/** Measured on a 2-core machine: 250 s, 150 s, 150 s, 90 s, 65 s, 50 s, 47 s, 25 s, 25 s. */
const SLOWEST_FIRST = [
  'test/engines/tool-conformance.test.ts',
  'test/engines/agents.test.ts',
  'test/engines/real-speech.test.ts',
  'test/engines/chaos.test.ts',
  'test/engines/soak.test.ts',
  'test/engines/fuzz.test.ts',
  'test/engines/ollama-switch.test.ts',
  'test/engines/translation.test.ts',
  'test/engines/ui.test.ts',
]

class SlowestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (spec: TestSpecification) => {
      const i = SLOWEST_FIRST.indexOf(relative(spec.project.config.root, spec.moduleId))
      return i === -1 ? SLOWEST_FIRST.length : i
    }
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b))
  }
}

export default defineConfig({
  test: {
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ['default'],
    maxWorkers: 2,
    sequence: { sequencer: SlowestFirst },
    // Runs once for the whole run and again per project (a no-op then): TMPDIR → the run's folder.
    globalSetup: ['test/support/scratch-setup.ts'],
    projects: [
      { extends: true, test: { name: 'fast', include: ['test/fast/**/*.test.ts', 'test/renderer/**/*.test.ts'] } },
      { extends: true, test: { name: 'engines', include: ['test/engines/**/*.test.ts'], globalSetup: ['test/support/engines-setup.ts'] } },
    ],
  },
})
