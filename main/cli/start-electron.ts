/**
 * `npm start`: opens the desktop app. Electron downloads its binary when it is installed; where that
 * did not happen (offline machines, npm's install-script policy), say what is missing and what works
 * without it instead of failing with a stack trace.
 */
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)

function electronBinary(): string | undefined {
  try {
    // The package's main export is the path of the downloaded binary; it throws when there is none.
    const path = require('electron') as unknown
    return typeof path === 'string' ? path : undefined
  } catch {
    return undefined
  }
}

const binary = electronBinary()
if (!binary) {
  console.error(`hearth: Electron's binary is not installed, so the desktop window cannot open here.

  Electron downloads it from the internet when the package is installed. To get it:
    node node_modules/electron/install.js      (needs network access)

  Everything else works without it:
    npm run serve      the API server and the web UI at http://127.0.0.1:8181/
`)
  process.exit(1)
}

const appEntry = fileURLToPath(new URL('../electron/main.ts', import.meta.url))
const child = spawn(binary, [appEntry, ...process.argv.slice(2)], {
  stdio: 'inherit',
  env: { ...process.env, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import tsx`.trim() },
})
child.on('exit', (code) => process.exit(code ?? 0))
