/**
 * Runs bert-to-gguf.py on the pinned llama.cpp's gguf-py, in a virtualenv of its own under the
 * real-models cache, so the user's Python gains nothing. The official converter would need torch,
 * which PyPI ships for Linux with its CUDA libraries (gigabytes); this needs about 110 MB.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { engineCacheDir } from '../../../engines/builder/llama-build.ts'
import { pinnedLlamaSource } from '../../../engines/builder/pinned-source.ts'
import { realModelsDir } from './catalog.ts'

/** numpy as the pinned converter's requirements pin it; PyYAML for gguf-py's model card reader. */
export const CONVERTER_PACKAGES = ['numpy==2.2.6', 'PyYAML==6.0.2', 'tokenizers==0.22.1'] as const

export const PYTHON = process.platform === 'win32' ? 'python' : 'python3'

const SCRIPT = fileURLToPath(new URL('./bert-to-gguf.py', import.meta.url))

export function convertBert(modelDir: string, out: string, log: (line: string) => void, env: NodeJS.ProcessEnv = process.env): void {
  const source = pinnedLlamaSource(engineCacheDir(env), log)
  const python = converterPython(log, env)
  execFileSync(python, [SCRIPT, modelDir, out, source], { stdio: ['ignore', 'ignore', 'inherit'] })
}

/** The virtualenv's interpreter (the converters share it), made (again) when the pinned package list changed. */
export function converterPython(log: (line: string) => void, env: NodeJS.ProcessEnv): string {
  const venv = join(realModelsDir(env), 'venv')
  const python = process.platform === 'win32' ? join(venv, 'Scripts/python.exe') : join(venv, 'bin/python')
  const stamp = join(venv, '.hearth-packages')
  const wanted = CONVERTER_PACKAGES.join('\n')
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === wanted) return python
  log(`making the converter's virtualenv (${CONVERTER_PACKAGES.join(', ')}) in ${venv}`)
  rmSync(venv, { recursive: true, force: true })
  execFileSync(PYTHON, ['-m', 'venv', venv], { stdio: ['ignore', 'ignore', 'inherit'] })
  // --no-deps: these three need nothing else for what the script uses; wheels only, nothing compiles.
  execFileSync(python, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--no-deps', '--only-binary=:all:', ...CONVERTER_PACKAGES], {
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  writeFileSync(stamp, wanted)
  return python
}
