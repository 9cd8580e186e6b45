import { relative } from 'node:path'
import { BaseSequencer, type TestSpecification } from 'vitest/node'
import { defineConfig } from 'vitest/config'

/**
 * Two projects, run side by side:
 * - `fast`: pure modules and the HTTP app in-process with scripted engines (test/support/
 *   in-process-server.ts). No engine or server processes; the whole project takes seconds, so
 *   `npm run test:fast` is the loop to run while editing.
 * - `engines`: suites that start real servers and llama.cpp / whisper.cpp engines. Each engine gets
 *   one inference thread, so two suites run at once.
 * The slowest suites start first (longest first packs two workers best); the rest follow.
 */
const FAST = [
  'test/renderer/**/*.test.ts',
  'test/agent-replay.test.ts',
  'test/agents-docs.test.ts',
  'test/audio-decode.test.ts',
  'test/client-params.test.ts',
  'test/cors.test.ts',
  'test/docs-links.test.ts',
  'test/documents.test.ts',
  'test/downloads.test.ts',
  'test/downloads-api.test.ts',
  'test/llama-server-environment.test.ts',
  'test/loud-skips.test.ts',
  'test/engine-load-deadline.test.ts',
  'test/field-decisions.test.ts',
  'test/electron-shell.test.ts',
  'test/gpu-toolkit.test.ts',
  'test/gguf-writer.test.ts',
  'test/image-normalize.test.ts',
  'test/import-direction.test.ts',
  'test/json-body.test.ts',
  'test/lend-host.test.ts',
  'test/mcp.test.ts',
  'test/metrics.test.ts',
  'test/model-folder.test.ts',
  'test/ollama-api.test.ts',
  'test/ollama-pull.test.ts',
  'test/ollama-replay.test.ts',
  'test/ollama-modelfile.test.ts',
  'test/ollama-environment.test.ts',
  'test/model-sources.test.ts',
  'test/nothing-lost.test.ts',
  'test/patch-rebase.test.ts',
  'test/pinned-source.test.ts',
  'test/quiet-stretches.test.ts',
  'test/responses-mcp.test.ts',
  'test/messages-mcp.test.ts',
  'test/protocol-features.test.ts',
  'test/route-contract.test.ts',
  'test/run-scratch.test.ts',
  'test/scheduler.test.ts',
  'test/speculation-plan.test.ts',
  'test/security.test.ts',
  'test/settings.test.ts',
  'test/slot-affinity.test.ts',
  'test/speech-format.test.ts',
  'test/stream-order.test.ts',
  'test/template-messages.test.ts',
  'test/upstream-errors.test.ts',
]
/** Measured on a 2-core machine: 250 s, 150 s, 150 s, 90 s, 65 s, 50 s, 47 s, 25 s, 25 s. */
const SLOWEST_FIRST = ['test/tool-conformance.test.ts', 'test/agents.test.ts', 'test/real-speech.test.ts', 'test/chaos.test.ts', 'test/soak.test.ts', 'test/fuzz.test.ts', 'test/ollama-switch.test.ts', 'test/translation.test.ts', 'test/ui.test.ts']

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
      { extends: true, test: { name: 'fast', include: FAST } },
      { extends: true, test: { name: 'engines', include: ['test/**/*.test.ts'], exclude: FAST, globalSetup: ['test/support/engines-setup.ts'] } },
    ],
  },
})
