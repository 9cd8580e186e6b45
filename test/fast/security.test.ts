/** Safe by default on localhost: DNS rebinding, LAN exposure without a key. */
import { request } from 'node:http'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { allowedHostNames, hostNameOf } from '../../main/server/http/host-check.ts'
import { resolveSettings } from '../../main/server/settings.ts'
import { startInProcessServer, type InProcessServer } from '../support/in-process-server.ts'

function getWithHost(server: InProcessServer, path: string, host: string): Promise<{ status: number; body: any }> {
  const url = new URL(server.url)
  return new Promise((resolve, reject) => {
    const req = request({ hostname: url.hostname, port: url.port, path, headers: { host, authorization: `Bearer ${server.apiKey}` } }, (res) => {
      let text = ''
      res.on('data', (d) => (text += d))
      res.on('end', () => resolve({ status: res.statusCode!, body: text.startsWith('{') ? JSON.parse(text) : text }))
    })
    req.on('error', reject)
    req.end()
  })
}

describe('DNS rebinding', () => {
  let server: InProcessServer
  beforeAll(async () => {
    server = await startInProcessServer({ modelsDir: mkdtempSync(join(tmpdir(), 'hearth-sec-')) })
  })
  afterAll(async () => {
    await server?.stop()
  })

  it('refuses requests addressed to a name the server does not have, on every route', async () => {
    for (const path of ['/v1/models', '/health', '/api/models', '/']) {
      const res = await getWithHost(server, path, 'attacker.example:8181')
      expect(res.status).toBe(403)
      expect(res.body.error).toMatchObject({ code: 'forbidden_host', type: 'invalid_request_error' })
    }
  })

  it('serves its own names', async () => {
    const port = new URL(server.url).port
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`, 'localhost']) {
      expect((await getWithHost(server, '/v1/models', host)).status).toBe(200)
    }
  })
})

describe('host names', () => {
  it('parses Host headers with ports and IPv6 literals', () => {
    expect(hostNameOf('localhost:8181')).toBe('localhost')
    expect(hostNameOf('[::1]:8181')).toBe('::1')
    expect(hostNameOf('Example.COM')).toBe('example.com')
  })

  it('allows loopback, the bound address and extra names; all local addresses only when bound to all', () => {
    const specific = allowedHostNames('192.168.1.5', ['hearth.local'])
    expect([...specific]).toEqual(expect.arrayContaining(['localhost', '127.0.0.1', '::1', '192.168.1.5', 'hearth.local']))
    expect(specific.has('10.0.0.1')).toBe(false)
    expect(allowedHostNames('0.0.0.0', []).has('127.0.0.1')).toBe(true)
  })

  it('refuses to expose the server to the network without a key', () => {
    const env = { HEARTH_DATA_DIR: mkdtempSync(join(tmpdir(), 'hearth-sec-')) }
    expect(() => resolveSettings(['--host', '0.0.0.0', '--no-auth'], env, 2)).toThrow(/without an API key/)
    expect(resolveSettings(['--host', '0.0.0.0'], env, 2).settings.auth).toBe(true)
    expect(resolveSettings(['--no-auth'], env, 2).settings.auth).toBe(false)
  })
})
