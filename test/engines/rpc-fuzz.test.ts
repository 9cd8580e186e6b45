/**
 * llama.cpp's RPC protocol fuzzed through Hearth's lend tunnel, as any holder of a lending key (or
 * a borrower with a bug) could send it: every command of the protocol at our pin, well formed and
 * corrupted (fields set to edge values, sizes that lie, bodies cut short or padded, bytes flipped,
 * commands out of order; test/support/rpc-fuzz.ts). Patch llama-21 refuses what upstream trusted
 * (a malformed graph was a SIGSEGV), so the rpc-server never dies of it; should it die all the
 * same, its supervision has lending back within 5 s. Every well-formed command is taken.
 *
 * One fixed seed, which must not kill the rpc-server, then two random seeds, printed: a death on
 * one fails the test only if lending took over 5 s to come back, and says the seed.
 * HEARTH_RPC_FUZZ_SEED=<n> replays a seed alone; HEARTH_RPC_FUZZ_SECONDS sets the time (60 s).
 */
import { request } from 'node:http'
import type { Socket } from 'node:net'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { fuzzRpc, type FuzzReport, type FuzzTarget } from '../support/rpc-fuzz.ts'
import { ANSWER_SIZE, body, Cmd, frame, Reader } from '../support/rpc-protocol.ts'
import { startTestServer, TEST_API_KEY, type TestServer } from '../support/server-process.ts'
import { describeIf } from '../support/skips.ts'
import { llamaBuild } from '../support/upstream-servers.ts'

const REPLAY = process.env.HEARTH_RPC_FUZZ_SEED
const FIXED_SEED = Number(REPLAY ?? 20_261_201)
const RANDOM_SEEDS = REPLAY ? [] : [1 + Math.floor(Math.random() * 2 ** 31), 1 + Math.floor(Math.random() * 2 ** 31)]
const SECONDS = Number(process.env.HEARTH_RPC_FUZZ_SECONDS ?? 60)
/** Lending back within this after a death: the acceptance of issue 64. */
const RECOVERY_LIMIT_MS = 5_000

describeIf(llamaBuild, 'needs llama.cpp built here (npm run build:engines)')("llama.cpp's RPC protocol, fuzzed through the lend tunnel", () => {
  let lender: TestServer

  beforeAll(async () => {
    lender = await startTestServer({ modelsDir: mkdtempSync(join(tmpdir(), 'hearth-rpc-fuzz-')), args: ['--lend', '--lend-memory', '256'] })
  })
  afterAll(async () => {
    await lender?.stop()
  })

  const status = async () => (await fetch(`${lender.url}/api/lend`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } })).json()
  const target: FuzzTarget = { connect: () => tunnel(lender.url), deaths: async () => (await status()).crashes }

  it(
    'never kills the rpc-server with the fixed seed, has lending back within 5 s on any other, and takes every well-formed command',
    async () => {
      const log = (line: string) => console.log(line)
      const share = RANDOM_SEEDS.length ? 0.6 : 1
      const fixed = await fuzzRpc(target, { seeds: [FIXED_SEED], budgetMs: SECONDS * share * 1000, log })
      const random = RANDOM_SEEDS.length ? await fuzzRpc(target, { seeds: RANDOM_SEEDS, budgetMs: SECONDS * (1 - share) * 1000, log }) : undefined
      const reports = [fixed, ...(random ? [random] : [])]
      console.log(summary(reports))
      // Every command of the protocol was sent, well formed and corrupted.
      const all = Object.keys(Cmd)
      expect(Object.keys(fixed.sent).sort()).toEqual([...all].sort())
      expect(Object.keys(fixed.corruptedBy).sort()).toEqual([...all].sort())
      for (const report of reports) {
        expect(report.wrongfullyRefused, `well-formed commands refused (seeds ${report.seeds.join(', ')})`).toEqual([])
        for (const crash of report.crashes) expect(crash.recoveryMs, `lending back after ${crash.message} (seed ${crash.seed})`).toBeLessThan(RECOVERY_LIMIT_MS)
      }
      expect(
        fixed.crashes.map((c) => c.message),
        `the rpc-server died on the fixed seed ${FIXED_SEED}`,
      ).toEqual([])
      // Lending is on, and a borrower is answered.
      const after = await status()
      expect(after).toMatchObject({ running: true, state: 'running' })
      expect(after.crashes).toBe(reports.reduce((n, r) => n + r.crashes.length + r.unattributedDeaths, 0))
      const sock = await tunnel(lender.url)
      sock.write(frame(Cmd.HELLO, body.hello()))
      expect(await new Reader(sock).answer(ANSWER_SIZE.HELLO!, 5_000)).toBeDefined()
      sock.destroy()
    },
    (SECONDS + 90) * 1000,
  )
})

/** A connection to the lender's rpc-server through its tunnel, as a borrower makes it. */
function tunnel(base: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const req = request(new URL('/api/lend/connect', base), {
      headers: { connection: 'Upgrade', upgrade: 'hearth-rpc', authorization: `Bearer ${TEST_API_KEY}` },
    })
    req.on('upgrade', (_res, socket, head) => {
      if (head.length > 0) socket.unshift(head)
      resolve(socket)
    })
    req.on('response', (res) => {
      res.resume()
      reject(new Error(`the tunnel answered ${res.statusCode}`))
    })
    req.on('error', reject)
    req.end()
  })
}

function summary(reports: FuzzReport[]): string {
  const lines = reports.map((r) => {
    const recoveries = r.crashes.map((c) => c.recoveryMs).sort((a, b) => a - b)
    const recovery = recoveries.length
      ? `, lending back in ${recoveries[0]!.toFixed(0)}–${recoveries.at(-1)!.toFixed(0)} ms (median ${recoveries[Math.floor(recoveries.length / 2)]!.toFixed(0)})`
      : ''
    return (
      `rpc fuzz, seed${r.seeds.length > 1 ? 's' : ''} ${r.seeds.join(', ')}: ${r.messages} messages (${r.corrupted} corrupted) in ${r.sessions} sessions, ${r.seconds.toFixed(1)} s; ` +
      `${Object.keys(r.sent).length} commands; ${r.taken} well-formed taken, ${r.wrongfullyRefused.length} refused; ${r.refused} sessions ended by a refusal; ` +
      `${r.crashes.length + r.unattributedDeaths} deaths${recovery}; ${r.timeouts} timeouts`
    )
  })
  return `${lines.join('\n')}\n(HEARTH_RPC_FUZZ_SEED=<seed> replays one)`
}
