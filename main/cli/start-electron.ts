/**
 * `npm start`: builds the desktop app (the web UI when its sources changed, the main process
 * always: it takes well under a second) and opens it. Electron downloads its binary when it is
 * installed; where that did not happen (offline machines, npm's install-script policy), say what
 * is missing and what works without it, instead of failing with a stack trace. The check reads
 * Electron's files itself: requiring the `electron` package would try to download the binary.
 */
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const PROJECT_ROOT = resolve(import.meta.dirname, '../..')

export type ElectronLookup =
  | { found: true; binary: string; version: string }
  | { found: false; problem: 'package-missing' | 'binary-missing'; version: string | undefined; expectedAt: string | undefined }

export function findElectron(root = PROJECT_ROOT, env: NodeJS.ProcessEnv = process.env): ElectronLookup {
  let packageDir: string
  try {
    packageDir = dirname(createRequire(join(root, 'package.json')).resolve('electron/package.json'))
  } catch {
    return { found: false, problem: 'package-missing', version: undefined, expectedAt: undefined }
  }
  const version = (JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8')) as { version: string }).version
  const pathFile = join(packageDir, 'path.txt')
  const relative = existsSync(pathFile) ? readFileSync(pathFile, 'utf8').trim() : undefined
  const override = env.ELECTRON_OVERRIDE_DIST_PATH
  const binary = override ? join(override, relative || defaultExecutable()) : relative ? join(packageDir, 'dist', relative) : undefined
  if (binary && existsSync(binary)) return { found: true, binary, version }
  return { found: false, problem: 'binary-missing', version, expectedAt: binary ?? join(packageDir, 'dist', defaultExecutable()) }
}

function defaultExecutable(): string {
  return process.platform === 'win32' ? 'electron.exe' : process.platform === 'darwin' ? 'Electron.app/Contents/MacOS/Electron' : 'electron'
}

export function explainMissingElectron(lookup: Extract<ElectronLookup, { found: false }>): string {
  const what =
    lookup.problem === 'package-missing'
      ? `the \`electron\` package is not installed (run \`npm install\`).`
      : `Electron ${lookup.version}'s binary is not installed (looked for ${lookup.expectedAt}).`
  return `hearth: the desktop window cannot open here: ${what}

  Electron downloads its binary when the package is installed, which needs the internet. To get it:
    node node_modules/electron/install.js          (with network access)
  or, offline, point at an unpacked Electron ${lookup.version ?? ''} build you have:
    ELECTRON_OVERRIDE_DIST_PATH=/path/to/electron-dir npm start

  Everything else works without it:
    npm run serve      the API server, and the same UI in your browser at http://127.0.0.1:8181/
`
}

async function main(): Promise<void> {
  const lookup = findElectron()
  if (!lookup.found) {
    console.error(explainMissingElectron(lookup))
    process.exit(1)
  }
  const { ensureUiBuilt } = await import('./build-ui.ts')
  const { buildElectron } = await import('./build-electron.ts')
  ensureUiBuilt()
  await buildElectron()
  const env = { ...process.env }
  // Set by some tools; it would make the binary a plain Node and ignore the app.
  delete env.ELECTRON_RUN_AS_NODE
  const child = spawn(lookup.binary, [PROJECT_ROOT, ...process.argv.slice(2)], { stdio: 'inherit', env })
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)))
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal))
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e: unknown) => {
    console.error(`hearth: ${(e as Error).message}`)
    process.exit(1)
  })
}
