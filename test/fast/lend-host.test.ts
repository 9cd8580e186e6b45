/**
 * The lend routes take any Host (a borrower names its lender as it knows it: `desk`, `desk.local`,
 * `[fd00::2]`), every other route keeps the DNS-rebinding guard (docs/security.md#lending-memory).
 * The tunnel itself is an HTTP upgrade that never passes through Express; test/engines/pool-names.test.ts
 * opens it by name on a real lender.
 */
import { request } from 'node:http'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { isLendPath } from '../../main/server/http/host-check.ts'
import { startInProcessServer, type InProcessServer } from '../support/in-process-server.ts'

function getWithHost(server: InProcessServer, path: string, host: string, key = server.apiKey): Promise<{ status: number; body: any }> {
  const url = new URL(server.url)
  return new Promise((resolve, reject) => {
    const req = request({ hostname: url.hostname, port: url.port, path, headers: { host, ...(key ? { authorization: `Bearer ${key}` } : {}) } }, (res) => {
      let text = ''
      res.on('data', (d) => (text += d))
      res.on('end', () => resolve({ status: res.statusCode!, body: text.startsWith('{') ? JSON.parse(text) : text }))
    })
    req.on('error', reject)
    req.end()
  })
}

describe('the Host a borrower names its lender by', () => {
  let server: InProcessServer
  beforeAll(async () => {
    server = await startInProcessServer({ modelsDir: mkdtempSync(join(tmpdir(), 'hearth-lend-host-')) })
  })
  afterAll(async () => {
    await server?.stop()
  })

  it('reaches the lend route by any name (this server does not lend: 409, not 403 forbidden_host)', async () => {
    for (const host of ['desk:8181', 'desk.local:8181', '[fd00::2]:8181', 'DESK']) {
      const res = await getWithHost(server, '/api/lend', host)
      expect(res.status, host).toBe(409)
      expect(res.body.error.code).toBe('not_lending')
    }
    // Express routes /API/LEND/ there too: so is it let through.
    expect((await getWithHost(server, '/API/LEND/', 'desk:8181')).status).toBe(409)
  })

  it('still asks for the key there, whatever the name', async () => {
    const res = await getWithHost(server, '/api/lend', 'desk:8181', '')
    expect(res.status).toBe(401)
  })

  it('keeps every other route behind the DNS-rebinding guard for that same name', async () => {
    for (const path of ['/v1/models', '/api/models', '/api/lend/other', '/api/lending', '/health', '/']) {
      const res = await getWithHost(server, path, 'desk:8181')
      expect(res.status, path).toBe(403)
      expect(res.body.error.code).toBe('forbidden_host')
    }
  })

  it('matches the lend route as the router does, and nothing else', () => {
    expect(['/api/lend', '/api/lend/', '/API/Lend'].every(isLendPath)).toBe(true)
    expect(['/api/lend/connect', '/api/lend/x', '/api/lends', '/v1/api/lend', '/api/lend%2f'].some(isLendPath)).toBe(false)
  })
})
