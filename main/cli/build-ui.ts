/**
 * Builds the web UI (renderer/ → renderer/dist) with Vite. `--if-stale` builds only when the build
 * is missing or older than a source file, which is what `npm run serve` and the UI tests ask for.
 * A failed build never stops the server: it serves the API and says at `/` that the UI is missing.
 */
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const PROJECT_ROOT = resolve(import.meta.dirname, '../..')

/** Newest modification time under these paths (files or folders), 0 when none exist. */
function newestMtime(paths: string[]): number {
  let newest = 0
  const visit = (path: string) => {
    if (!existsSync(path)) return
    const stat = statSync(path)
    if (stat.isDirectory()) for (const entry of readdirSync(path)) visit(join(path, entry))
    else newest = Math.max(newest, stat.mtimeMs)
  }
  paths.forEach(visit)
  return newest
}

export interface UiBuildState {
  stale: boolean
  reason: string
}

export function uiBuildState(root = PROJECT_ROOT): UiBuildState {
  const renderer = join(root, 'renderer')
  const sources = [join(renderer, 'src'), join(renderer, 'index.html'), join(renderer, 'vite.config.ts'), join(root, 'preload', 'hearth-bridge.ts')]
  const sourceTime = newestMtime(sources)
  if (sourceTime === 0) return { stale: false, reason: 'no UI sources here (a packaged app)' }
  const built = join(renderer, 'dist', 'index.html')
  if (!existsSync(built)) return { stale: true, reason: 'renderer/dist is missing' }
  // The whole dist, not just index.html: a build interrupted half-way leaves old assets behind.
  const builtTime = Math.min(statSync(built).mtimeMs, newestMtime([join(renderer, 'dist', 'assets')]) || Infinity)
  return sourceTime > builtTime ? { stale: true, reason: 'the UI sources changed since the last build' } : { stale: false, reason: 'up to date' }
}

/** Runs `vite build renderer`; returns the time it took in ms, or throws with Vite's output. */
export function buildUi(root = PROJECT_ROOT): number {
  const vite = join(dirname(createRequire(join(root, 'package.json')).resolve('vite/package.json')), 'bin', 'vite.js')
  const started = performance.now()
  const result = spawnSync(process.execPath, [vite, 'build', join(root, 'renderer'), '--logLevel', 'warn'], { cwd: root, encoding: 'utf8' })
  if (result.status !== 0) throw new Error(`the UI build failed:\n${result.stdout}${result.stderr}`)
  return Math.round(performance.now() - started)
}

export function ensureUiBuilt(root = PROJECT_ROOT, log: (line: string) => void = console.log): void {
  const state = uiBuildState(root)
  if (!state.stale) return
  log(`building the web UI (${state.reason})…`)
  const ms = buildUi(root)
  log(`web UI built in ${(ms / 1000).toFixed(1)} s`)
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const ifStale = process.argv.includes('--if-stale')
  try {
    if (ifStale) ensureUiBuilt()
    else console.log(`web UI built in ${(buildUi() / 1000).toFixed(1)} s`)
  } catch (e) {
    console.error(`hearth: ${(e as Error).message}`)
    // `npm run serve` goes on without the UI; an explicit build must fail loudly.
    process.exit(ifStale ? 0 : 1)
  }
}
