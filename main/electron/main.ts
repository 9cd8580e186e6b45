/**
 * The desktop app's entry (bundled to dist-electron/main.js by `npm run build:electron`). Everything
 * with logic lives in desktop-app.ts and its neighbours; this only names the files and starts.
 */
import { join } from 'node:path'
import { app, dialog } from 'electron'
import { startServer } from '../server/server.ts'
import { SettingsError } from '../server/settings.ts'
import { startDesktopApp } from './desktop-app.ts'
import { usePackagedEngines } from './packaged-engines.ts'

const here = import.meta.dirname
// The installer's engines (built for every CPU level by `npm run dist`); a dev run uses the cache.
usePackagedEngines(process.resourcesPath)

startDesktopApp({
  preloadPath: join(here, 'preload.cjs'),
  rendererDir: join(here, '..', 'renderer', 'dist'),
  startServer,
}).catch((e: unknown) => {
  const message = e instanceof SettingsError ? e.message : `Hearth could not start: ${(e as Error).stack ?? String(e)}`
  dialog.showErrorBox('Hearth', message)
  app.exit(1)
})
