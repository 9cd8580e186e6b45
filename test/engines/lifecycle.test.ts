/** Model lifecycle through the real server: explicit load/unload, idle unload, memory plan, /api/system. */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { makeMemoryCgroup, memoryCgroupsUnavailable } from '../support/memory-cgroups.ts'
import { postJson, startTestServer, type TestServer } from '../support/server-process.ts'
import { cannotRun, itIf } from '../support/skips.ts'
import { writeTinyLlama } from '../support/tiny-models.ts'

let modelsDir: string
let server: TestServer | undefined
const hello = [{ role: 'user', content: 'Once upon a time' }]
const MiB = 1024 ** 2
const noCgroups = memoryCgroupsUnavailable()
if (noCgroups) cannotRun(`test/engines/lifecycle.test.ts (a memory cgroup's cap): ${noCgroups}`)

beforeAll(() => {
  modelsDir = mkdtempSync(join(tmpdir(), 'hearth-lifecycle-'))
  for (const name of ['one', 'two', 'three']) writeTinyLlama(join(modelsDir, `${name}.gguf`), { contextLength: 512, seed: name.length })
})

afterEach(async () => {
  await server?.stop()
  server = undefined
})

async function get(path: string): Promise<any> {
  const res = await fetch(`${server!.url}${path}`, { headers: { authorization: `Bearer ${server!.apiKey}` } })
  return res.json()
}

async function states(): Promise<Record<string, string>> {
  const list = await get('/v1/models')
  return Object.fromEntries(list.data.map((m: any) => [m.id, m.state]))
}

describe('model lifecycle', () => {
  it('loads and unloads on request, and /v1/models shows the state', async () => {
    server = await startTestServer({ modelsDir })
    expect(await states()).toEqual({ one: 'available', three: 'available', two: 'available' })
    const loaded = await postJson(server, '/api/models/one/load', {})
    expect(loaded.status).toBe(200)
    expect(loaded.json).toMatchObject({ id: 'one', state: 'loaded', devices: ['CPU'], load_ms: expect.any(Number) })
    expect(await states()).toMatchObject({ one: 'loaded', two: 'available' })
    const unloaded = await postJson(server, '/api/models/one/unload', {})
    expect(unloaded.json).toMatchObject({ id: 'one', state: 'available', was_loaded: true })
    expect(await states()).toMatchObject({ one: 'available' })
    expect((await postJson(server, '/api/models/nope/load', {})).status).toBe(404)
  })

  it('unloads a model left idle past its time to live, and loads it again on the next request', async () => {
    server = await startTestServer({ modelsDir, args: ['--idle-ttl', '1'] })
    expect((await postJson(server, '/v1/chat/completions', { model: 'two', messages: hello, max_tokens: 2 })).status).toBe(200)
    expect((await states()).two).toBe('loaded')
    await new Promise((r) => setTimeout(r, 1800))
    expect((await states()).two).toBe('available')
    expect((await postJson(server, '/v1/chat/completions', { model: 'two', messages: hello, max_tokens: 2 })).status).toBe(200)
  })

  it('evicts the least recently used idle model when the budget is full', async () => {
    // Each tiny model is planned at about 57 MiB: room for two, not three.
    server = await startTestServer({ modelsDir, args: ['--memory-budget', '130'] })
    await postJson(server, '/api/models/one/load', {})
    await postJson(server, '/api/models/two/load', {})
    await postJson(server, '/v1/chat/completions', { model: 'one', messages: hello, max_tokens: 2 })
    const third = await postJson(server, '/api/models/three/load', {})
    expect(third.status).toBe(200)
    expect(await states()).toEqual({ one: 'loaded', two: 'available', three: 'loaded' })
  })

  it('refuses a model that cannot fit with 503 and the numbers', async () => {
    server = await startTestServer({ modelsDir, args: ['--memory-budget', '20'] })
    const res = await postJson(server, '/v1/chat/completions', { model: 'one', messages: hello, max_tokens: 2 })
    expect(res.status).toBe(503)
    expect(res.json.error).toMatchObject({ type: 'server_error', code: 'insufficient_memory' })
    expect(res.json.error.message).toMatch(/needs about \d+ MiB .* 20 MiB memory budget/)
    expect(await states()).toMatchObject({ one: 'available' })
  })

  it('describes devices, memory and what is loaded in /api/system', async () => {
    server = await startTestServer({ modelsDir })
    await postJson(server, '/api/models/one/load', {})
    const system = await get('/api/system')
    expect(system.devices.some((d: any) => d.type === 'cpu')).toBe(true)
    expect(system.memory.total_bytes).toBeGreaterThan(system.memory.free_bytes)
    expect(system.memory.budget_bytes).toBeGreaterThan(0)
    expect(system.loaded).toHaveLength(1)
    expect(system.loaded[0]).toMatchObject({ id: 'one', devices: ['CPU'], busy: false, waiting: 0 })
    expect(system.loaded[0].rss_bytes).toBeGreaterThan(10 * 1024 * 1024)
    expect(system.loaded[0].estimate_bytes).toBeGreaterThan(1024 * 1024)
  })

  // A container's --memory or a systemd unit's MemoryMax: the kernel kills what grows past the cap
  // however much the machine has free, so the plan counts the cap.
  itIf(noCgroups === undefined, 'needs a memory cgroup (root, cgroup v1 or v2)')(
    "plans within a memory cgroup's cap, refusing with 503 what would not fit there",
    async () => {
      for (const [roomMiB, fits] of [
        [120, true],
        [20, false],
      ] as const) {
        const memory = makeMemoryCgroup(`hearth-lifecycle-${process.pid}-${roomMiB}`)
        try {
          server = await startTestServer({ modelsDir, memory })
          const cap = memory.usageBytes() + roomMiB * MiB
          memory.cap(cap)
          const system = await get('/api/system')
          expect(system.memory.total_bytes).toBe(cap)
          // What the group holds moves a little (the server's heap, its page cache): the room, give or take.
          expect(system.memory.free_bytes).toBeLessThan((roomMiB + 32) * MiB)
          expect(system.memory.budget_bytes).toBeLessThan((roomMiB + 32) * MiB)
          const res = await postJson(server, '/v1/chat/completions', { model: 'one', messages: hello, max_tokens: 2 })
          if (fits) expect(res.status, JSON.stringify(res.json)).toBe(200)
          else {
            expect(res.status).toBe(503)
            expect(res.json.error).toMatchObject({ code: 'insufficient_memory' })
          }
          expect(memory.oomKills()).toBe(0)
        } finally {
          await server?.stop()
          server = undefined
          memory.remove()
        }
      }
    },
  )
})
