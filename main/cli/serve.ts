/** `npm run serve`: the API server without Electron. */
import { availableParallelism } from 'node:os'
import { startServer } from '../server/server.ts'
import { resolveSettings, SettingsError, USAGE } from '../server/settings.ts'

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
  const server = await startServer(settings)
  const { models, broken, catalogProblem } = await server.context.folder.scan()
  console.log(`models folder: ${settings.modelsDir} (${models.length} model${models.length === 1 ? '' : 's'})`)
  if (catalogProblem) console.warn(`warning: ${catalogProblem}`)
  for (const b of broken) console.warn(`warning: model "${b.id}" cannot be served: ${b.problem}`)
  if (!settings.auth) console.warn('warning: authentication is OFF (--no-auth): any program that can reach this address can use it')
  else if (server.keyFile) console.log(`API key: stored in ${server.keyFile}`)
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

main().catch((e: unknown) => {
  const error = e as NodeJS.ErrnoException
  if (error.code === 'EADDRINUSE') console.error(`hearth: the address is already in use (${error.message}); pick another --port`)
  else console.error('hearth: failed to start:', e)
  process.exit(1)
})
