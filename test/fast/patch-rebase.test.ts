/**
 * `npm run engines:rebase` carries our llama.cpp patches onto a new tree by three-way merge
 * (engines/builder/patch-rebase.ts): a patch whose lines upstream left alone merges even
 * where the lines around it moved, and one whose lines upstream changed too is reported with its
 * file and the lines in conflict, while the patches after it are still tried.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { conflictLines, rebasePatches } from '../../engines/builder/patch-rebase.ts'

const lines = (n: number, edit: Record<number, string> = {}) => Array.from({ length: n }, (_, i) => edit[i + 1] ?? `line ${i + 1}`).join('\n') + '\n'

/** A tree with the given files, and a patch made with git against it, as our patches are. */
function treeWith(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'hearth-rebase-tree-'))
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true })
    writeFileSync(join(dir, name), text)
  }
  return dir
}

function patchOf(before: string, name: string, after: string, header: string): string {
  const repo = mkdtempSync(join(tmpdir(), 'hearth-rebase-patch-'))
  const git = (...args: string[]) => execFileSync('git', ['-C', repo, '-c', 'user.name=t', '-c', 'user.email=t@t', ...args], { encoding: 'utf8' })
  git('init', '-q')
  mkdirSync(join(repo, name, '..'), { recursive: true })
  writeFileSync(join(repo, name), before)
  git('add', '-A')
  git('commit', '-qm', 'base')
  writeFileSync(join(repo, name), after)
  const file = join(repo, '..', `${repo.split('/').pop()}.patch`)
  writeFileSync(file, header + git('diff'))
  return file
}

describe('carrying the patch stack onto a new llama.cpp', () => {
  it('merges what upstream left alone, reports what it changed too, and keeps each patch header', () => {
    const old = treeWith({ 'src/a.cpp': lines(40), 'src/b.cpp': lines(20) })
    // Upstream since: ten lines added at the top of a.cpp, and b.cpp's line 5 rewritten.
    const upstream = treeWith({ 'src/a.cpp': `${lines(10).replace(/line/g, 'new')}${lines(40)}`, 'src/b.cpp': lines(20, { 5: 'upstream changed line 5' }) })
    const first = patchOf(lines(40), 'src/a.cpp', lines(40, { 30: 'ours at 30' }), '# Hearth: first fix.\n')
    const second = patchOf(lines(20), 'src/b.cpp', lines(20, { 5: 'ours at 5' }), '# Hearth: second fix.\n')
    const third = patchOf(lines(20), 'src/b.cpp', lines(20, { 15: 'ours at 15' }), '# Hearth: third fix.\n')
    const logged: string[] = []
    const workDir = mkdtempSync(join(tmpdir(), 'hearth-rebase-work-'))
    const outcomes = rebasePatches({ oldTree: old, newTree: upstream, patches: [first, second, third], workDir, log: (l) => logged.push(l) })

    expect(outcomes.map((o) => o.applied)).toEqual([true, false, true])
    expect(readFileSync(join(workDir, 'src/a.cpp'), 'utf8').split('\n')[39]).toBe('ours at 30') // moved down ten lines
    expect(outcomes[0]!.refreshed).toMatch(/^# Hearth: first fix\.\ndiff --git a\/src\/a\.cpp/)
    expect(outcomes[0]!.refreshed).toContain('@@ -37,7 +37,7 @@')
    expect(outcomes[1]!.conflicts).toEqual([{ file: 'src/b.cpp', lines: [expect.stringMatching(/^5-\d+$/)] }])
    expect(logged.join('\n')).toMatch(/✗ .*\.patch\n {4}conflict in src\/b\.cpp, lines 5-\d+/)
    // The failed patch was left out, and the one after it still merged.
    expect(readFileSync(join(workDir, 'src/b.cpp'), 'utf8')).toBe(lines(20, { 5: 'upstream changed line 5', 15: 'ours at 15' }))
  })

  it('finds every conflict in a merged file', () => {
    expect(conflictLines('a\n<<<<<<< ours\nx\n=======\ny\n>>>>>>> theirs\nb\n<<<<<<< ours\n=======\n>>>>>>> theirs\n')).toEqual(['2-6', '8-10'])
  })
})
