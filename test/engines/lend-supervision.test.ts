/**
 * A lender's rpc-server is supervised (engines/pool/rpc-lender.ts): killed, it is started again
 * after a short backoff and lends within 5 s, `GET /api/lend` and the log saying how it died;
 * dying five times within a minute with no borrower is a crash loop, and lending stops with the
 * reason, which the tunnel and a borrower's check both give. A death while a borrower is connected
 * never counts toward the loop (test/engines/rpc-fuzz.test.ts kills it that way again and again, and
 * test/engines/pool.test.ts mid-answer and mid-load).
 */
import { readdirSync, readFileSync, mkdtempSync } from 'node:fs'
import { request } from 'node:http'
import type { Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { LenderLink } from '../../engines/pool/lender-link.ts'
import { ANSWER_SIZE, body, Cmd, frame, Reader } from '../support/rpc-protocol.ts'
import { startTestServer, TEST_API_KEY, type TestServer } from '../support/server-process.ts'
import { describeIf } from '../support/skips.ts'
import { llamaBuild } from '../support/upstream-servers.ts'

describeIf(llamaBuild, 'needs llama.cpp built here (npm run build:engines)')("a lender's rpc-server, supervised", () => {
  let lender: TestServer

  beforeAll(async () => {
    lender = await startTestServer({ modelsDir: mkdtempSync(join(tmpdir(), 'hearth-lend-supervision-')), args: ['--lend', '--lend-memory', '64'] })
  })
  afterAll(async () => {
    await lender?.stop()
  })

  const status = async () => (await fetch(`${lender.url}/api/lend`, { headers: { authorization: `Bearer ${TEST_API_KEY}` } })).json()
  /** Kills the rpc-server and waits until the lender has heard of it. */
  async function kill(signal: NodeJS.Signals): Promise<void> {
    const before = (await status()).crashes
    process.kill(rpcServerOf(lender.process.pid!), signal)
    await expect.poll(async () => (await status()).crashes, { timeout: 5_000, interval: 20 }).toBe(before + 1)
  }

  it('starts it again when it dies, and lends within 5 s: a borrower is answered through the tunnel', async () => {
    const killed = performance.now()
    await kill('SIGKILL')
    await expect.poll(async () => (await status()).state, { timeout: 5_000, interval: 20 }).toBe('running')
    expect(await helloThroughTunnel(lender.url)).toBe(true)
    const backMs = performance.now() - killed
    console.log(`lend supervision: the rpc-server was lending again ${backMs.toFixed(0)} ms after it was killed`)
    expect(backMs).toBeLessThan(5_000)
    const s = await status()
    expect(s).toMatchObject({ running: true, state: 'running', crashes: 1, restarts: 1, problem: null, last_exit: { reason: 'SIGKILL', borrowers: [] } })
    expect(Math.abs(s.last_exit.at - Date.now() / 1000)).toBeLessThan(30)
    expect(lender.output()).toContain('warning: lend: the rpc-server died (SIGKILL); starting it again in 0.1 s')
    expect(lender.output()).toContain('lend: the rpc-server is lending again (restart 1)')
  })

  it('stops after five deaths within a minute with no borrower, and says why to the tunnel and to a borrower', async () => {
    // The last tunnel (the first test's) long gone: a death just after one closes is put down to it.
    await new Promise((resolve) => setTimeout(resolve, 500))
    for (let i = 2; i <= 4; i++) {
      await kill('SIGKILL')
      await expect.poll(async () => (await status()).state, { timeout: 10_000, interval: 20 }).toBe('running')
    }
    await kill('SIGABRT')
    const s = await status()
    expect(s).toMatchObject({ running: false, state: 'stopped', crashes: 5, restarts: 4 })
    expect(s.problem).toBe('its rpc-server died 5 times within 60 s with no borrower (last: SIGABRT); lending has stopped until Hearth is restarted there')
    expect(lender.output()).toContain(`warning: lend: ${s.problem}`)
    // The tunnel refuses at once, with the reason.
    const refused = await tunnelAnswer(lender.url)
    expect(refused.status).toBe(503)
    expect(refused.body.error).toMatchObject({ code: 'lender_stopped', message: `This Hearth has stopped lending: ${s.problem}` })
    // And a borrower's check names the lender and the reason.
    await expect(LenderLink.open({ url: lender.url, apiKeyEnv: 'K' }, llamaBuild!.commit, { env: { K: TEST_API_KEY } })).rejects.toThrow(
      `lender ${new URL(lender.url).host} has stopped lending: ${s.problem}`,
    )
    // It stays stopped: nothing restarts it behind the person's back.
    await new Promise((resolve) => setTimeout(resolve, 3_000))
    expect((await status()).state).toBe('stopped')
  })
})

/** The rpc-server among the lender's descendants. */
function rpcServerOf(ancestor: number): number {
  const parentOf = (pid: number) => Number(/^PPid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0)
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry)
    if (!Number.isInteger(pid)) continue
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() !== 'ggml-rpc-server') continue
      for (let p = parentOf(pid); p > 1; p = parentOf(p)) if (p === ancestor) return pid
    } catch {
      // Gone meanwhile.
    }
  }
  throw new Error(`no ggml-rpc-server under process ${ancestor}`)
}

function upgradeRequest(base: string) {
  return request(new URL('/api/lend/connect', base), { headers: { connection: 'Upgrade', upgrade: 'hearth-rpc', authorization: `Bearer ${TEST_API_KEY}` } })
}

/** Whether the rpc-server answers HELLO through the tunnel. */
function helloThroughTunnel(base: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const req = upgradeRequest(base)
    req.on('upgrade', (_res, socket: Socket, head) => {
      if (head.length > 0) socket.unshift(head)
      const reader = new Reader(socket)
      socket.write(frame(Cmd.HELLO, body.hello()))
      reader.answer(ANSWER_SIZE.HELLO!, 5_000).then((answer) => {
        socket.destroy()
        resolve(answer !== undefined)
      }, reject)
    })
    req.on('response', (res) => (res.resume(), resolve(false)))
    req.on('error', reject)
    req.end()
  })
}

/** The tunnel's refusal: its status and body. */
function tunnelAnswer(base: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = upgradeRequest(base)
    req.on('upgrade', (res, socket: Socket) => (socket.destroy(), resolve({ status: res.statusCode ?? 0, body: undefined })))
    req.on('response', (res) => {
      let text = ''
      res.on('data', (d) => (text += d))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }))
    })
    req.on('error', reject)
    req.end()
  })
}
