/**
 * docs/pool.md's "In five minutes", as written, with lenders named as people name their machines:
 * `http://desk:8181`, `http://desk.local:8181` and an IPv6 literal. Two lenders in network
 * namespaces of their own (lan-namespaces.ts), started with the page's own command (`--host
 * 0.0.0.0`, or `--host ::` to be reached over IPv6, on port 8181), the borrower's key made with the
 * page's own curl on the lender; the borrower resolves names through a hosts file of its own
 * (bound over /etc/hosts in a mount namespace of its own: the system's resolver, this machine's
 * /etc/hosts untouched). The lend routes take any Host; the rest of the lender keeps the
 * DNS-rebinding guard for the same name.
 */
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { hostsFile, makeLanMachine, namespacesUnavailable, type LanMachine } from '../support/lan-namespaces.ts'
import { realModel } from '../support/real-models/real-model.ts'
import { startTestServer, type TestServer } from '../support/server-process.ts'
import { describeIf } from '../support/skips.ts'
import { llamaBuild } from '../support/upstream-servers.ts'

const smollm = realModel('smollm2-135m-instruct-q4_1')
const noLan = namespacesUnavailable()
const QUESTION = [
  { role: 'system', content: 'Answer in one short sentence.' },
  { role: 'user', content: 'What is the capital of France?' },
]

describeIf(
  smollm && llamaBuild && noLan === undefined,
  `needs the real models fetched (npm run models:fetch), llama.cpp built here (npm run build:engines) and network namespaces (root)${noLan ? `: ${noLan}` : ''}`,
)('docs/pool.md in five minutes, lenders by name', () => {
  const machines: LanMachine[] = []
  let desk: TestServer
  let desk6: TestServer
  let borrower: TestServer
  let deskKey: string

  beforeAll(async () => {
    const [deskMachine, desk6Machine] = [makeLanMachine(11), makeLanMachine(12, { ipv6: true })]
    machines.push(deskMachine, desk6Machine)
    // 1. On the lender: `npm run serve -- --host 0.0.0.0 --lend --lend-memory …` (its key made at first start).
    const deskData = mkdtempSync(join(tmpdir(), 'hearth-desk-'))
    desk = await startTestServer({
      modelsDir: mkdtempSync(join(tmpdir(), 'hearth-desk-models-')),
      dataDir: deskData,
      namespace: deskMachine.namespace,
      noKeyFlag: true,
      args: ['--host', '0.0.0.0', '--port', '8181', '--lend', '--lend-memory', '40'],
    })
    desk6 = await startTestServer({
      modelsDir: mkdtempSync(join(tmpdir(), 'hearth-desk6-models-')),
      namespace: desk6Machine.namespace,
      args: ['--host', '::', '--port', '8181', '--lend', '--lend-memory', '40'],
    })
    // The borrower's key, made as the page says: curl on the lender, with the key in ~/.hearth/api-key.
    const serverKey = readFileSync(join(deskData, 'api-key'), 'utf8').trim()
    const made = execFileSync(
      'ip',
      [
        'netns',
        'exec',
        deskMachine.namespace,
        'curl',
        '-s',
        'http://localhost:8181/api/keys',
        '-H',
        `Authorization: Bearer ${serverKey}`,
        '-H',
        'Content-Type: application/json',
        '-d',
        '{"label": "laptop", "lend": true}',
      ],
      { encoding: 'utf8' },
    )
    deskKey = JSON.parse(made).key
    // 2. On the borrower: the lender named in models.json, its key in a variable.
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-laptop-'))
    copyFileSync(smollm!, join(modelsDir, 'smol.gguf'))
    const pooled = (id: string, url: string, env: string) => ({ id, file: 'smol.gguf', pool: [{ url, api_key_env: env }] })
    writeFileSync(
      join(modelsDir, 'models.json'),
      JSON.stringify({
        models: [
          { id: 'smol', file: 'smol.gguf' },
          pooled('smol-desk', 'http://desk:8181', 'DESK_KEY'),
          pooled('smol-desk-local', 'http://desk.local:8181', 'DESK_KEY'),
          pooled('smol-desk6', `http://[${desk6Machine.address6}]:8181`, 'DESK6_KEY'),
          pooled('smol-attic', 'http://attic:8181', 'DESK_KEY'),
        ],
      }),
    )
    const hosts = hostsFile(join(modelsDir, 'hosts'), { desk: deskMachine, 'desk.local': deskMachine })
    borrower = await startTestServer({ modelsDir, hostsFile: hosts, env: { DESK_KEY: deskKey, DESK6_KEY: desk6.apiKey } })
  }, 120_000)

  afterAll(async () => {
    await borrower?.stop()
    for (const lender of [desk, desk6]) await lender?.stop()
    for (const machine of machines) machine.remove()
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
  const listing = async (id: string) =>
    (await (await fetch(`${borrower.url}/api/models`, { headers: headers() })).json()).models.find((m: { id: string }) => m.id === id)
  /** One model borrows a lender at a time (its rpc-server serves one borrower in turn): each is let go before the next. */
  const unload = async (id: string) => {
    await fetch(`${borrower.url}/api/models/${id}/unload`, { method: 'POST', headers: headers() })
    await expect.poll(async () => (await listing(id)).state, { timeout: 10_000 }).not.toBe('loaded')
  }

  it('prints what the page says it prints', () => {
    expect(desk.output()).toMatch(/lending CPU 40 MiB to borrowers with a key that may lend/)
    expect(desk.url).toMatch(/:8181$/)
  })

  it('lets the lend routes through by the lender’s name, and keeps the rest behind the DNS-rebinding guard', async () => {
    const address = machines[0]!.address
    const lend = await getWithHost(address, '/api/lend', 'desk:8181', deskKey)
    expect(lend.status).toBe(200)
    expect(lend.body).toMatchObject({ object: 'lend', running: true, state: 'running', memory_cap_mib: 40 })
    expect((await getWithHost(address, '/api/lend', 'desk.local:8181', deskKey)).status).toBe(200)
    for (const path of ['/v1/models', '/api/models', '/health']) {
      const refused = await getWithHost(address, path, 'desk:8181', deskKey)
      expect(refused.status, path).toBe(403)
      expect(refused.body.error.code).toBe('forbidden_host')
    }
    expect(await upgradeWithHost(address, 'desk:8181', deskKey)).toBe(101)
    expect(await upgradeWithHost(address, 'desk:8181', 'not-the-key-0123')).toBe(401)
  })

  it('answers through a lender named by its host name, word for word as the model whole (3. Use it)', async () => {
    const whole = await ask('smol')
    expect(whole.status, JSON.stringify(whole.body)).toBe(200)
    await unload('smol')
    const byName = await ask('smol-desk')
    expect(byName.status, JSON.stringify(byName.body)).toBe(200)
    expect(byName.body.choices[0].message.content).toBe(whole.body.choices[0].message.content)
    expect((await listing('smol-desk')).devices).toEqual(['CPU', 'RPC desk:8181'])
    // The lender's side: who borrows, and with which key.
    const lend = await getWithHost(machines[0]!.address, '/api/lend', 'desk:8181', deskKey)
    expect(lend.body.borrowers).toEqual([expect.objectContaining({ address: `10.231.11.1`, key: 'laptop' })])
    await unload('smol-desk')
  })

  it('answers through a lender named by its .local name', async () => {
    const res = await ask('smol-desk-local')
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    expect((await listing('smol-desk-local')).devices).toEqual(['CPU', 'RPC desk.local:8181'])
    await unload('smol-desk-local')
  })

  it('answers through a lender named by an IPv6 literal', async () => {
    const res = await ask('smol-desk6')
    expect(res.status, JSON.stringify(res.body)).toBe(200)
    expect((await listing('smol-desk6')).devices).toEqual(['CPU', `RPC [${machines[1]!.address6}]:8181`])
    await unload('smol-desk6')
  })

  it('says how to fix a name that does not resolve', async () => {
    const res = await ask('smol-attic')
    expect(res.status).toBe(502)
    expect(res.body.error.message).toMatch(
      /^lender attic:8181 cannot be reached: the name "attic" does not resolve here \(ENOTFOUND\); use its address, or give the name an address here/,
    )
  })
})

function getWithHost(address: string, path: string, host: string, key: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: address, port: 8181, path, headers: { host, authorization: `Bearer ${key}` } }, (res) => {
      let text = ''
      res.on('data', (d) => (text += d))
      res.on('end', () => resolve({ status: res.statusCode!, body: text.startsWith('{') ? JSON.parse(text) : text }))
    })
    req.on('error', reject)
    req.end()
  })
}

/** The tunnel's upgrade as a borrower asks for it, by the lender's name: the status it got. */
function upgradeWithHost(address: string, host: string, key: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: address,
      port: 8181,
      path: '/api/lend/connect',
      headers: { host, connection: 'Upgrade', upgrade: 'hearth-rpc', authorization: `Bearer ${key}` },
    })
    req.on('upgrade', (res, socket) => (socket.destroy(), resolve(res.statusCode ?? 0)))
    req.on('response', (res) => (res.resume(), resolve(res.statusCode ?? 0)))
    req.on('error', reject)
    req.end()
  })
}
