/**
 * Where llama.cpp's source comes from: the npm package node-llama-cpp carries the complete upstream
 * tree as a git bundle. We pin the package version, its registry integrity and the commit inside,
 * fetch it with `npm pack` into the engine cache, and check all three before building anything.
 */
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs'
import { join } from 'node:path'

export const LLAMA_SOURCE = {
  npmPackage: 'node-llama-cpp',
  version: '3.22.1',
  integrity: 'sha512-bltIipuWmc123H7tMIgDGKSsSrhmhlQYeVUC48XTjVW7XGJJiJJyCdlTMzQ/LiWoPkGDpcL4FviDpgw7qfTiDw==',
  bundlePath: 'package/llama/gitRelease.bundle',
  commit: 'de3ff815ea7d559ee917f063901b8986f038abc6',
} as const

export class EngineBuildError extends Error {}

/** The pinned llama.cpp tree, checked out once under `cacheDir/src-<commit>`; returns its path. */
export function pinnedLlamaSource(cacheDir: string, log: (line: string) => void): string {
  const tree = join(cacheDir, `src-${LLAMA_SOURCE.commit.slice(0, 12)}`)
  if (existsSync(join(tree, '.hearth-complete'))) return tree
  requireTool('git', ['--version'], 'git')
  requireTool('tar', ['--version'], 'tar')
  mkdirSync(cacheDir, { recursive: true })
  const tarball = join(cacheDir, `${LLAMA_SOURCE.npmPackage}-${LLAMA_SOURCE.version}.tgz`)
  if (!existsSync(tarball) || !integrityMatches(tarball)) {
    log(`fetching ${LLAMA_SOURCE.npmPackage}@${LLAMA_SOURCE.version} (llama.cpp ${LLAMA_SOURCE.commit.slice(0, 7)}) from the npm registry`)
    execFileSync('npm', ['pack', `${LLAMA_SOURCE.npmPackage}@${LLAMA_SOURCE.version}`, '--pack-destination', cacheDir, '--silent'], {
      stdio: ['ignore', 'ignore', 'inherit'],
    })
  }
  if (!integrityMatches(tarball)) {
    rmSync(tarball, { force: true })
    throw new EngineBuildError(`${tarball} does not match the pinned integrity ${LLAMA_SOURCE.integrity}`)
  }
  const scratch = `${tree}.partial`
  rmSync(scratch, { recursive: true, force: true })
  mkdirSync(scratch, { recursive: true })
  execFileSync('tar', ['-xzf', tarball, '-C', scratch, LLAMA_SOURCE.bundlePath])
  const checkout = join(scratch, 'llama.cpp')
  execFileSync('git', ['clone', '--quiet', join(scratch, LLAMA_SOURCE.bundlePath), checkout], { stdio: ['ignore', 'ignore', 'inherit'] })
  const head = execFileSync('git', ['-C', checkout, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim()
  if (head !== LLAMA_SOURCE.commit) throw new EngineBuildError(`the bundle holds commit ${head}, not the pinned ${LLAMA_SOURCE.commit}`)
  rmSync(tree, { recursive: true, force: true })
  renameSync(checkout, tree)
  rmSync(scratch, { recursive: true, force: true })
  execFileSync('touch', [join(tree, '.hearth-complete')])
  return tree
}

function integrityMatches(file: string): boolean {
  const [algorithm, expected] = LLAMA_SOURCE.integrity.split('-') as [string, string]
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
