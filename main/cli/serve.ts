/** `npm run serve`: the API server without Electron. */
import { existsSync, readFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { join } from 'node:path'
import { startServer } from '../server/server.ts'
import { resolveSettings, SettingsError, USAGE } from '../server/settings.ts'
import { StartupError } from '../server/services/startup-error.ts'

async function main(): Promise<void> {
  let resolved
  try {
    resolved = resolveSettings(process.argv.slice(2), process.env, availableParallelism())
  } catch (e) {
    if (e instanceof SettingsError) {
      console.error(`hearth: ${e.message}`)
      process.exit(2)
    }
    throw e
  }
  if (resolved.help) {
    console.log(USAGE)
    return
  }
  const { settings } = resolved
  const [major, minor] = process.versions.node.split('.').map(Number) as [number, number]
  if (major < 22 || (major === 22 && minor < 12)) {
    console.warn(
      `warning: Node.js ${process.versions.node} is older than the 22.12 Hearth is tested on (Node 20 ended in April 2026); install Node 22 (nodejs.org, or nvm install 22)`,
    )
  }
  const server = await startServer(settings)
  const { models, broken, catalogProblem } = await server.context.folder.scan()
  console.log(`models folder: ${settings.modelsDir} (${models.length} model${models.length === 1 ? '' : 's'})`)
  if (catalogProblem) console.warn(`warning: ${catalogProblem}`)
  for (const b of broken) console.warn(`warning: model "${b.id}" cannot be served: ${b.problem}`)
  for (const m of models) if (m.contextNote) console.warn(`warning: model "${m.id}": ${m.contextNote}`)
  warnIfEnvironmentHidesStoredKey(settings.dataDir, settings.apiKeys)
  if (!settings.auth) console.warn('warning: authentication is OFF (--no-auth): any program that can reach this address can use it')
  else if (server.keyFile) console.log(`API key: stored in ${server.keyFile}`)
  if (server.ollamaUrl)
    console.log(
      `Ollama's API and its /v1 (no key needed from this computer) on ${server.ollamaUrl}: ollama, its clients and the tools set up for Ollama work unchanged`,
    )
  console.log(`listening on ${server.url}`)

  let stopping = false
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return
    stopping = true
    console.log(`${signal}: shutting down`)
    server.close().then(
      () => process.exit(0),
      (e) => {
        console.error(e)
        process.exit(1)
      },
    )
  }
  process.on('SIGINT', stop)
  process.on('SIGTERM', stop)
}

/**
 * HEARTH_API_KEY sets the server's keys, so a client's key exported under that name silently
 * replaces the stored one, and every program using the stored key gets 401: say so.
 */
function warnIfEnvironmentHidesStoredKey(dataDir: string, keys: string[]): void {
  const fromEnvironment =
    process.env.HEARTH_API_KEY?.split(',')
      .map((k) => k.trim())
      .filter(Boolean) ?? []
  const stored = join(dataDir, 'api-key')
  if (fromEnvironment.length === 0 || !existsSync(stored)) return
  const storedKey = readFileSync(stored, 'utf8').trim()
  if (keys.includes(storedKey)) return
  console.warn(
    `warning: HEARTH_API_KEY in the environment sets the server's keys, so the key stored in ${stored} is not accepted. ` +
      'Unset it to use the stored key (clients take theirs from OPENAI_API_KEY or their own setting).',
  )
}

main().catch((e: unknown) => {
  const error = e as NodeJS.ErrnoException
  if (error.code === 'EADDRINUSE') console.error(`hearth: the address is already in use (${error.message}); pick another --port`)
  else if (e instanceof StartupError) console.error(`hearth: ${error.message}`)
  else console.error('hearth: failed to start:', e)
  process.exit(1)
})
