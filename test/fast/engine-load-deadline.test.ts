/**
 * An engine's load is given up when it stops making progress, not at a fixed time
 * (engines/engine-server-process.ts): a program that keeps writing its log while it
 * loads is waited for past the limit, one that hangs in silence fails at the limit, naming it.
 */
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { EngineServerProcess } from '../../engines/engine-server-process.ts'

/** A "server" that never listens: it writes a log line every 200 ms for `talkSeconds`, then hangs. */
function fakeEngine(talkSeconds: number): string {
  const program = join(mkdtempSync(join(tmpdir(), 'hearth-fake-engine-')), 'fake-server')
  writeFileSync(program, `#!/bin/sh\ni=0\nwhile [ $i -lt ${talkSeconds * 5} ]; do echo "loading tensors $i" >&2; sleep 0.2; i=$((i+1)); done\nsleep 60\n`)
  chmodSync(program, 0o755)
  return program
}

const start = (program: string) => EngineServerProcess.start({ program, args: [], modelId: 'slow', loadTimeoutMs: 1_000, forwardLog: false })

describe('the load deadline', () => {
  it('waits for a load that keeps making progress, then gives up once it stalls', async () => {
    const started = performance.now()
    await expect(start(fakeEngine(3))).rejects.toThrow(/model "slow" did not load: no progress for 1000 ms \(\d+ s in all\) \(engine log: loading tensors 14\)/)
    const took = performance.now() - started
    expect(took).toBeGreaterThan(3_500)
    expect(took).toBeLessThan(8_000)
  })

  it('gives up on a silent load at the limit', async () => {
    const started = performance.now()
    await expect(start(fakeEngine(0))).rejects.toThrow(/did not load: no progress for 1000 ms/)
    expect(performance.now() - started).toBeLessThan(3_000)
  })
})
