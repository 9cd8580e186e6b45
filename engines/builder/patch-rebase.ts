/**
 * Hearth's patch stack carried onto another llama.cpp tree by three-way merge, one patch at a time,
 * in a scratch git repository: the pinned tree is committed first (so each patch's `index` lines
 * find the files they were written against), the new tree on top of it, then each patch with
 * `git apply --3way`. A patch that does not merge is reported with its files and the lines in
 * conflict, and left out so the rest can be tried; a patch that merges is written out again,
 * its header kept, against the new tree.
 */
import { spawnSync } from 'node:child_process'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { basename, join } from 'node:path'

export interface Conflict {
  file: string
  /** The lines of the merged file that hold conflict markers, e.g. "1598-1630". */
  lines: string[]
}

export interface PatchOutcome {
  patch: string
  applied: boolean
  /** Conflicting files, with where in each. */
  conflicts: Conflict[]
  /** What git said when the patch did not apply at all (a file missing, a blob not found). */
  errors: string[]
  /** The patch as it applies to the new tree, header first (applied patches only). */
  refreshed?: string
}

export interface RebaseOptions {
  /** The tree the patches were written against (the pinned source, unpatched). */
  oldTree: string
  newTree: string
  patches: readonly string[]
  /** The scratch repository; made anew. */
  workDir: string
  log: (line: string) => void
}

export function rebasePatches({ oldTree, newTree, patches, workDir, log }: RebaseOptions): PatchOutcome[] {
  rmSync(workDir, { recursive: true, force: true })
  mkdirSync(workDir, { recursive: true })
  const git = gitIn(workDir)
  git(['init', '-q'])
  git(['config', 'user.name', 'Hearth rebase'])
  git(['config', 'user.email', 'rebase@hearth.invalid'])
  git(['config', 'core.autocrlf', 'false'])
  log('committing the pinned tree, then the new tree on top of it')
  commitTree(git, oldTree, 'pinned tree')
  commitTree(git, newTree, 'new tree')
  git(['checkout', '-q', '-f', 'HEAD'])
  return patches.map((patch) => {
    const name = basename(patch)
    const tried = git(['apply', '--3way', '--whitespace=nowarn', patch], false)
    if (tried.status === 0) {
      git(['commit', '-q', '--allow-empty', '-m', name])
      const refreshed = headerOf(readFileSync(patch, 'utf8')) + git(['diff', 'HEAD~1', 'HEAD']).stdout
      log(`✓ ${name}`)
      return { patch: name, applied: true, conflicts: [], errors: [], refreshed }
    }
    const conflicted = git(['diff', '--name-only', '--diff-filter=U']).stdout.split('\n').filter(Boolean)
    const conflicts = conflicted.map((file) => ({ file, lines: conflictLines(readFileSync(join(workDir, file), 'utf8')) }))
    const errors = tried.stderr.split('\n').filter((l) => /^error:/.test(l))
    log(`✗ ${name}`)
    for (const c of conflicts) log(`    conflict in ${c.file}, lines ${c.lines.join(', ')}`)
    for (const e of errors) log(`    ${e}`)
    git(['reset', '-q', '--hard', 'HEAD'])
    git(['clean', '-q', '-f', '-d'])
    return { patch: name, applied: false, conflicts, errors }
  })
}

/** The lines before the first file diff: the patch's subject and why. */
export function headerOf(patch: string): string {
  const at = patch.search(/^diff --git /m)
  return at <= 0 ? '' : patch.slice(0, at)
}

/** Where a merged file holds conflict markers: one "from-to" range per conflict. */
export function conflictLines(text: string): string[] {
  const ranges: string[] = []
  let start = 0
  text.split('\n').forEach((line, i) => {
    if (line.startsWith('<<<<<<< ')) start = i + 1
    else if (line.startsWith('>>>>>>> ') && start) {
      ranges.push(`${start}-${i + 1}`)
      start = 0
    }
  })
  return ranges
}

/** Commits `tree`'s files (its own .git and our completion mark aside) as the whole content of the next commit. */
function commitTree(git: Git, tree: string, message: string): void {
  git(['read-tree', '--empty'])
  git(['--work-tree', tree, 'add', '-A', '-f', '--', ':/', ':!/.hearth-complete'])
  git(['commit', '-q', '--allow-empty', '-m', message])
}

type Git = (args: string[], check?: boolean) => { status: number; stdout: string; stderr: string }

function gitIn(dir: string): Git {
  return (args, check = true) => {
    const result = spawnSync('git', ['-C', dir, ...args], { encoding: 'utf8', maxBuffer: 1 << 30 })
    const outcome = { status: result.status ?? 1, stdout: result.stdout ?? '', stderr: result.stderr ?? '' }
    if (check && outcome.status !== 0) throw new Error(`git ${args.slice(0, 3).join(' ')} failed: ${outcome.stderr.trim()}`)
    return outcome
  }
}

/** Writes the refreshed patches into `dir` under their own names. */
export function writeRefreshed(outcomes: readonly PatchOutcome[], dir: string): void {
  for (const o of outcomes) if (o.refreshed) writeFileSync(join(dir, o.patch), o.refreshed)
}
