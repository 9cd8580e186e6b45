/**
 * One temporary folder per run of the tests or the benchmarks. Everything they, their workers and
 * the engines they start write under os.tmpdir() lands in it (TMPDIR points there, and child
 * processes inherit it), and it is removed when the run ends; a run that crashed or was killed
 * leaves its folder to the next run, which removes it when its process is gone. Without this the
 * suites' data folders and the benchmarks' model copies (up to 2 GB a run) filled the disk.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const OWNER = 'HEARTH_RUN_SCRATCH'

/**
 * Points TMPDIR at a fresh folder for this run and returns the function that removes it. Called
 * again in the same process (vitest runs a root global setup once per project), it returns a
 * no-op: the first caller owns the folder.
 */
export function useRunScratch(kind: 'test' | 'bench'): () => void {
  if (process.env[OWNER]) return () => {}
  const base = tmpdir()
  const prefix = `hearth-${kind}-run-`
  removeAbandoned(base, prefix)
  const root = mkdtempSync(join(base, `${prefix}${process.pid}-`))
  process.env[OWNER] = root
  process.env.TMPDIR = root
  return () => {
    rmSync(root, { recursive: true, force: true })
    process.env.TMPDIR = base
    delete process.env[OWNER]
  }
}

/** Folders of earlier runs whose process has exited. */
function removeAbandoned(base: string, prefix: string): void {
  for (const name of readdirSync(base)) {
    if (!name.startsWith(prefix)) continue
    const pid = Number(name.slice(prefix.length).split('-')[0])
    if (Number.isInteger(pid) && pid > 0 && !isRunning(pid)) rmSync(join(base, name), { recursive: true, force: true })
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'
  }
}
