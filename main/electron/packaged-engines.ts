/**
 * An installed app never compiles: `npm run dist` ships portable engine builds in the app's
 * resources (engines/llama, engines/whisper), and the server is pointed at them unless the
 * environment already names builds of its own.
 */
import { existsSync } from 'node:fs'
import { join } from 'node:path'

const ENGINES = [
  ['llama', 'HEARTH_LLAMA_BUILD_DIR'],
  ['whisper', 'HEARTH_WHISPER_BUILD_DIR'],
] as const

/** Sets the build variables for the engines found under `resourcesPath/engines`; returns the ones set. */
export function usePackagedEngines(resourcesPath: string, env: NodeJS.ProcessEnv = process.env): string[] {
  const set: string[] = []
  for (const [name, variable] of ENGINES) {
    const dir = join(resourcesPath, 'engines', name)
    if (env[variable] || !existsSync(join(dir, 'build.json'))) continue
    env[variable] = dir
    set.push(variable)
  }
  return set
}
