/**
 * Streams to an engine go over kept connections (engines/engine-server-process.ts, patch llama-17):
 * a stream read to its end leaves its connection for the next request, on the llama-server Hearth
 * builds; and a kept connection the engine closed just as it was reused costs a second try on a fresh
 * one, never a failed request, while a fresh connection that fails is not tried again.
 */
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import type { IncomingMessage } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { programPath } from '../../engines/builder/llama-build.ts'
import { EngineServerProcess } from '../../engines/engine-server-process.ts'
import { writeTinyLlama } from '../support/tiny-models.ts'
import { llamaBuild } from '../support/upstream-servers.ts'
import { cannotRun, describeIf } from '../support/skips.ts'

let engine: EngineServerProcess | undefined

afterEach(async () => {
  await engine?.stop()
  engine = undefined
})

/** The body read to its end, and whether the request went over a connection an earlier one had used. */
async function readAll(res: IncomingMessage): Promise<{ text: string; reused: boolean }> {
  let text = ''
  for await (const chunk of res) text += String(chunk)
  return { text, reused: (res as IncomingMessage & { req: { reusedSocket: boolean } }).req.reusedSocket }
}

if (!llamaBuild) cannotRun('llama.cpp is not built on this machine (npm run build:engines); the kept connections to llama-server cannot be tried')

describeIf(llamaBuild, 'needs llama.cpp built here (npm run build:engines)')('streams to llama-server', () => {
  it('leave their connection open for the next request once read to the end', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hearth-connection-reuse-'))
    writeTinyLlama(join(dir, 'chat.gguf'), { contextLength: 512 })
    engine = await EngineServerProcess.start({
      program: programPath(llamaBuild!.dir, 'llama-server'),
      args: ['--model', join(dir, 'chat.gguf'), '--threads', '1', '--parallel', '1'],
      apiKeyVariable: 'LLAMA_API_KEY',
      modelId: 'chat',
      loadTimeoutMs: 60_000,
      forwardLog: false,
    })
    const body = JSON.stringify({ prompt: 'the quick brown fox', n_predict: 4, temperature: 0, stream: true })
    const first = await readAll(await engine.streamRequest('/completion', body))
    const second = await readAll(await engine.streamRequest('/completion', body))
    const third = await readAll(await engine.streamRequest('/completion', body))
    for (const answer of [first, second, third]) expect(answer.text).toMatch(/"stop":true/)
    expect([first.reused, second.reused, third.reused]).toEqual([false, true, true])
  })
})

/**
 * A stand-in engine: healthy, and it streams two events for each POST, except that in `mode`
 * `close-on-reuse` it drops a connection's second request unanswered (as a server does with a
 * kept connection whose idle time ran out just as the request came), and in `drop-all` every
 * request after the first. It writes how many connections it took and requests it answered.
 */
function standInEngine(mode: 'close-on-reuse' | 'drop-all'): { program: string; counts: () => { connections: number; answered: number } } {
  const dir = mkdtempSync(join(tmpdir(), 'hearth-stand-in-engine-'))
  const program = join(dir, 'stand-in-server')
  const countsFile = join(dir, 'counts.json')
  writeFileSync(
    program,
    `#!/usr/bin/env node
const http = require('node:http')
const fs = require('node:fs')
const port = Number(process.argv[process.argv.indexOf('--port') + 1])
let connections = 0, answered = 0, posts = 0
const save = () => fs.writeFileSync(${JSON.stringify(countsFile)}, JSON.stringify({ connections, answered }))
const server = http.createServer((req, res) => {
  if (req.url === '/health') return res.end('{"status":"ok"}')
  req.resume()
  req.on('end', () => {
    posts++
    req.socket.requests = (req.socket.requests ?? 0) + 1
    const drop = ${JSON.stringify(mode)} === 'drop-all' ? posts > 1 : req.socket.requests > 1
    if (drop) return req.socket.destroy()
    answered++
    save()
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write('data: {"content":"a"}\\n\\n')
    res.end('data: [DONE]\\n\\n')
  })
})
server.on('connection', () => { connections++; save() })
server.listen(port, '127.0.0.1')
`,
  )
  chmodSync(program, 0o755)
  return { program, counts: () => JSON.parse(readFileSync(countsFile, 'utf8')) }
}

describe('a kept connection the engine closed', () => {
  const start = (program: string) => EngineServerProcess.start({ program, args: [], modelId: 'stand-in', loadTimeoutMs: 10_000, forwardLog: false })

  it('costs the request a second try on a fresh connection, not a failure', async () => {
    const standIn = standInEngine('close-on-reuse')
    engine = await start(standIn.program)
    const before = standIn.counts().connections
    const first = await readAll(await engine.streamRequest('/v1/chat/completions', '{}'))
    const second = await readAll(await engine.streamRequest('/v1/chat/completions', '{}'))
    expect(first.text).toContain('"content":"a"')
    expect(second).toEqual({ text: first.text, reused: false })
    // The first stream's connection, and the fresh one the second went on once its reuse failed.
    expect(standIn.counts()).toEqual({ connections: before + 2, answered: 2 })
  })

  it('is tried again once; a fresh connection that fails too fails the request, naming the engine', async () => {
    const standIn = standInEngine('drop-all')
    engine = await start(standIn.program)
    await readAll(await engine.streamRequest('/v1/chat/completions', '{}'))
    const before = standIn.counts().connections
    await expect(engine.streamRequest('/v1/chat/completions', '{}')).rejects.toThrow(/the engine for model "stand-in" failed: socket hang up/)
    expect(standIn.counts().connections - before).toBe(1)
    expect(engine.alive).toBe(true)
  })
})
