import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { useRunScratch } from '../support/run-scratch.ts'

// The run itself uses a scratch folder (test/support/scratch-setup.ts): each test here starts as a
// fresh process would, with a base of its own, and puts the run's environment back after.
describe('one temporary folder per run', () => {
  const saved = { TMPDIR: process.env.TMPDIR, HEARTH_RUN_SCRATCH: process.env.HEARTH_RUN_SCRATCH }
  let base: string
  beforeEach(() => {
    base = mkdtempSync(join(tmpdir(), 'hearth-scratch-base-'))
    process.env.TMPDIR = base
    delete process.env.HEARTH_RUN_SCRATCH
  })
  afterEach(() => {
    Object.assign(process.env, saved)
    rmSync(base, { recursive: true, force: true })
  })

  test('what a run writes under the temporary folder goes when it ends', () => {
    const remove = useRunScratch('test')
    const root = tmpdir()
    expect(root.startsWith(join(base, `hearth-test-run-${process.pid}-`))).toBe(true)
    const data = mkdtempSync(join(tmpdir(), 'hearth-data-'))
    writeFileSync(join(data, 'model.gguf'), 'x')
    expect(useRunScratch('test')).not.toBe(remove) // a second caller in the run owns nothing
    useRunScratch('test')()
    expect(existsSync(data)).toBe(true)
    remove()
    expect(existsSync(root)).toBe(false)
    expect(tmpdir()).toBe(base)
  })

  test("a killed run's folder is removed by the next run, a running one's is left alone", async () => {
    const exited = spawn(process.execPath, ['-e', ''])
    await new Promise((resolve) => exited.on('exit', resolve))
    const abandoned = join(base, `hearth-test-run-${exited.pid}-abc123`)
    const alive = join(base, `hearth-test-run-${process.ppid}-def456`)
    for (const dir of [abandoned, alive]) mkdirSync(dir)
    const remove = useRunScratch('test')
    expect(existsSync(abandoned)).toBe(false)
    expect(existsSync(alive)).toBe(true)
    remove()
  })
})
