/**
 * Bundles the desktop app's main-process code for Electron into dist-electron/: the app
 * (main.js, ESM), the preload (preload.cjs: sandboxed preloads must be CommonJS) and the audio
 * decoding worker. npm packages stay outside the bundle and are shipped in node_modules; the native
 * ones are unpacked from the asar by electron-builder. The engines are programs of their own
 * (llama-server, whisper-server), packaged by electron-builder's extraResources.
 */
import { copyFileSync, existsSync, mkdirSync, rmSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build, type BuildOptions } from 'esbuild'

const PROJECT_ROOT = resolve(import.meta.dirname, '../..')
export const ELECTRON_OUT_DIR = join(PROJECT_ROOT, 'dist-electron')
/** Electron 45 runs Node 22 in its main process. */
const NODE_TARGET = 'node22'

/**
 * Files the server's modules find beside themselves through import.meta.url. In the bundle
 * "beside" is dist-electron/, so they are copied (or, for the audio worker, built) there.
 */
const SIDECAR_FILES = ['models/catalog/recommended-models.json', 'engines/pool/tunnel-worker.mjs']
const AUDIO_WORKER = 'media/audio/decode-audio.worker.ts'

export async function buildElectron(outDir = ELECTRON_OUT_DIR): Promise<number> {
  const started = performance.now()
  rmSync(outDir, { recursive: true, force: true })
  const common: BuildOptions = {
    bundle: true,
    platform: 'node',
    target: NODE_TARGET,
    sourcemap: 'linked',
    logLevel: 'warning',
    absWorkingDir: PROJECT_ROOT,
  }
  await Promise.all([
    build({
      ...common,
      entryPoints: { main: 'main/electron/main.ts' },
      outdir: outDir,
      format: 'esm',
      packages: 'external',
      outExtension: { '.js': '.js' },
    }),
    build({
      ...common,
      entryPoints: { preload: 'preload/preload.ts' },
      outdir: outDir,
      format: 'cjs',
      external: ['electron'],
      outExtension: { '.js': '.cjs' },
    }),
    // decode-audio-in-worker.ts starts `decode-audio-worker-entry.mjs` beside itself: in the bundle
    // that is the worker, built whole (the source tree's entry only exists to load TypeScript).
    existsSync(join(PROJECT_ROOT, AUDIO_WORKER))
      ? build({
          ...common,
          entryPoints: { 'decode-audio-worker-entry': AUDIO_WORKER },
          outdir: outDir,
          format: 'esm',
          packages: 'external',
          outExtension: { '.js': '.mjs' },
        })
      : undefined,
  ])
  mkdirSync(outDir, { recursive: true })
  for (const file of SIDECAR_FILES) {
    const from = join(PROJECT_ROOT, file)
    if (existsSync(from)) copyFileSync(from, join(outDir, file.split('/').pop()!))
  }
  return Math.round(performance.now() - started)
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  buildElectron().then(
    (ms) => console.log(`desktop app bundled into dist-electron/ in ${(ms / 1000).toFixed(1)} s`),
    (e: unknown) => {
      console.error(`hearth: ${(e as Error).message}`)
      process.exit(1)
    },
  )
}
