/**
 * Hearth's patches reach the engines' sources wherever the engine cache sits: also inside another
 * git repository (a home folder kept in git), where `git apply` run in a subfolder skips every
 * path outside it and still succeeds, and an engine would be built without the patches.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { applyPatch, applyPatches } from '../../engines/builder/pinned-source.ts'

// As git writes it (the engine patches are): inside a repository, git reads its paths from the top.
const PATCH = `diff --git a/src/answer.txt b/src/answer.txt
--- a/src/answer.txt
+++ b/src/answer.txt
@@ -1 +1 @@
-upstream
+patched
`

function sourceTreeIn(outer: string): string {
  const tree = join(outer, 'cache', 'engines', 'whisper-src')
  mkdirSync(join(tree, 'src'), { recursive: true })
  writeFileSync(join(tree, 'src', 'answer.txt'), 'upstream\n')
  return tree
}

/** A source tree inside a folder that is a git repository of its own, with the patch beside it. */
function treeInsideRepository(): { tree: string; patch: string; answer: () => string } {
  const home = mkdtempSync(join(tmpdir(), 'hearth-home-in-git-'))
  execFileSync('git', ['init', '--quiet', home])
  const tree = sourceTreeIn(home)
  const patch = join(home, 'fix.patch')
  writeFileSync(patch, PATCH)
  return { tree, patch, answer: () => readFileSync(join(tree, 'src', 'answer.txt'), 'utf8') }
}

describe('applying the engine patches', () => {
  it('patches a tree that sits inside another git repository', () => {
    const { tree, patch, answer } = treeInsideRepository()
    applyPatches(tree, [patch], () => undefined)
    expect(answer()).toBe('patched\n')
  })

  it("takes a patch back out and puts it in again (the benchmark's unpatched build)", () => {
    const { tree, patch, answer } = treeInsideRepository()
    applyPatch(tree, patch)
    applyPatch(tree, patch, { reverse: true })
    expect(answer()).toBe('upstream\n')
    applyPatch(tree, patch)
    expect(answer()).toBe('patched\n')
  })

  it('fails, naming the patch, where a patch does not apply', () => {
    const tree = sourceTreeIn(mkdtempSync(join(tmpdir(), 'hearth-plain-')))
    writeFileSync(join(tree, 'src', 'answer.txt'), 'something else\n')
    const patch = join(tree, '..', 'fix.patch')
    writeFileSync(patch, PATCH)
    expect(() => applyPatches(tree, [patch], () => undefined)).toThrow(/fix\.patch does not apply/)
  })
})
