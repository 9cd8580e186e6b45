/**
 * The llama-server engine through the real server: what it reports of itself, the prompt cache
 * within and across loads, a crash explained by its log, and what a machine without a build gets
 * (a server that runs, and a 503 naming `npm run build:engines` for every local model).
 */
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LLAMA_SOURCE } from '../../engines/builder/pinned-source.ts'
import { engineProcessIds } from '../support/process-stats.ts'
import { PROJECT_ROOT, postJson, startTestServer, type TestServer } from '../support/server-process.ts'
import { writeTinyLlama, writeTinyWhisper } from '../support/tiny-models.ts'
import { wavFile } from '../audio/synthesize-audio-files.ts'
import { llamaBuild, startUpstreamLlamaServer, whisperBuild, type UpstreamServer } from '../support/upstream-servers.ts'
import { cannotRun, describeIf, itIf } from '../support/skips.ts'

const WORDS = 'the quick brown fox jumps over the lazy dog and runs into the green wood '.repeat(12)

if (!llamaBuild) cannotRun('llama.cpp is not built on this machine (npm run build:engines); the llama-server engine suite cannot run')

describeIf(llamaBuild, 'needs llama.cpp built here (npm run build:engines)')('the llama-server engine', () => {
  let modelsDir: string
  let dataDir: string
  let server: TestServer
  let client: OpenAI

  beforeAll(async () => {
    modelsDir = mkdtempSync(join(tmpdir(), 'hearth-llama-server-'))
    dataDir = mkdtempSync(join(tmpdir(), 'hearth-llama-server-data-'))
    writeTinyLlama(join(modelsDir, 'chat.gguf'), { contextLength: 2048 })
    server = await startTestServer({ modelsDir, dataDir })
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey })
  })

  afterAll(async () => {
    await server?.stop()
  })

  const turn = (content: string) => client.chat.completions.create({ model: 'chat', messages: [{ role: 'user', content }], max_tokens: 4 })

  it('says what it runs: the pinned commit, the CPU features it was built for, its GPU backend, its self-test', async () => {
    await postJson(server, '/api/models/chat/load', {})
    const system = await (await fetch(`${server.url}/api/system`, { headers: { authorization: `Bearer ${server.apiKey}` } })).json()
    expect(system.engine).toEqual({
      name: 'llama-server',
      commit: LLAMA_SOURCE.commit,
      cpu_features: llamaBuild!.cpuFeatures,
      gpu_backend: llamaBuild!.gpu,
      not_built: whisperBuild ? [] : [expect.stringMatching(/^whisper\.cpp is not built for this machine.*npm run build:engines/)],
      self_tests: [
        {
          engine: 'llama.cpp',
          passed: true,
          verdict: expect.stringMatching(/^self-test passed: 15 weight types ran at 1 and 2 threads/),
          withheld: llamaBuild!.withheld ?? [],
        },
        ...(whisperBuild
          ? [
              {
                engine: 'whisper.cpp',
                passed: true,
                verdict: expect.stringMatching(/^self-test passed: 11 weight types/),
                withheld: whisperBuild.withheld ?? [],
              },
            ]
          : []),
      ],
      cpu_fallbacks: [],
    })
    expect(system.loaded).toEqual([expect.objectContaining({ id: 'chat', engine: 'llama-server', rss_bytes: expect.any(Number) })])
    expect(system.loaded[0].rss_bytes).toBeGreaterThan(1_000_000)
    expect(engineProcessIds(server.process.pid)).toHaveLength(1)
  })

  // A GPU build keeps the file mapped (its weights live in the GPU's memory).
  itIf(llamaBuild?.gpu === 'none', 'a GPU build keeps the model file mapped; only a CPU build reads its weights in', { elsewhere: true })(
    'holds its weights in its own memory, on huge pages where Linux has them (a CPU decode reads every weight each token)',
    async () => {
      const [pid] = engineProcessIds(server.process.pid)
      // The model file is read in, not mapped: nothing of it is left in the engine's address space.
      expect(readFileSync(`/proc/${pid}/maps`, 'utf8')).not.toContain('chat.gguf')
      expect(readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0')).toContain('GLIBC_TUNABLES=glibc.malloc.hugetlb=1')
      const hugePages = Number(/^AnonHugePages:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1])
      if (!readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8').includes('[never]')) expect(hugePages).toBeGreaterThan(0)
    },
  )

  it('reuses the first turn of a conversation for the second, and says how much in usage', async () => {
    const first = await turn(`${WORDS} first`)
    expect(first.usage!.prompt_tokens).toBeGreaterThan(150)
    const second = await turn(`${WORDS} second`)
    const cached = second.usage!.prompt_tokens_details!.cached_tokens!
    // All of the shared beginning comes from the cache; only the differing end is computed.
    expect(cached).toBeGreaterThan(first.usage!.prompt_tokens - 10)
    expect(cached).toBeLessThan(second.usage!.prompt_tokens)
  })

  it('keeps a conversation cached across an unload and a load, in the data folder', async () => {
    await turn(`${WORDS} before the unload`)
    const unloaded = await postJson(server, '/api/models/chat/unload', {})
    expect(unloaded.json.was_loaded).toBe(true)
    expect(readdirSync(join(dataDir, 'slot-cache')).filter((f) => f.endsWith('.bin')).length).toBeGreaterThan(0)
    const after = await turn(`${WORDS} after the reload`)
    expect(after.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThan(150)
  })

  it('explains a crash with the engine log, and loads the model again on the next request', async () => {
    await turn('hello')
    const [pid] = engineProcessIds(server.process.pid)
    process.kill(pid!, 'SIGSEGV')
    await new Promise((r) => setTimeout(r, 200))
    const again = await turn('hello again')
    expect(again.usage!.completion_tokens).toBe(4)
    expect(engineProcessIds(server.process.pid)).not.toContain(pid)
  })
})

describeIf(llamaBuild, 'needs llama.cpp built here (npm run build:engines)')('three conversations on two slots', () => {
  let server: TestServer
  let client: OpenAI
  let dataDir: string

  beforeAll(async () => {
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-llama-server-'))
    dataDir = mkdtempSync(join(tmpdir(), 'hearth-llama-server-data-'))
    writeTinyLlama(join(modelsDir, 'chat.gguf'), { contextLength: 4096 })
    server = await startTestServer({ modelsDir, dataDir, args: ['--parallel', '2'] })
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey })
  })

  afterAll(async () => {
    await server?.stop()
  })

  // Like agents: a long system prompt they all share, and a tail of their own shorter than it, so
  // that llama-server alone (which loads from its RAM cache only when a slot keeps less than half
  // of what it holds) computes a returning conversation's tail again.
  const system = WORDS.repeat(4)
  const session = (task: string, ...more: string[]) =>
    client.chat.completions.create({
      model: 'chat',
      max_tokens: 2,
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: `${task}: ${`the ${task} part of the work `.repeat(40)}` },
        ...more.map((content, i) => ({ role: i % 2 ? ('user' as const) : ('assistant' as const), content })),
      ],
    })

  it('brings a conversation pushed out of its slot back from where it was parked', async () => {
    const alpha = await session('alpha')
    await session('beta')
    const gamma = await session('gamma') // pushes one of the two out
    await session('beta', 'ok', 'go on') // goes on in its own slot
    const alphaBack = await session('alpha', 'ok', 'go on')
    expect(alphaBack.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThan(alpha.usage!.prompt_tokens - 10)
    const gammaBack = await session('gamma', 'ok', 'go on')
    expect(gammaBack.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThan(gamma.usage!.prompt_tokens - 10)
    // Loaded back, a parked file is gone: the folder holds only what is still parked.
    expect(parkedFiles().length).toBeLessThanOrEqual(2)
  })

  it("brings back conversations that share nothing from llama-server's RAM cache, parking nothing on disk", async () => {
    // Three projects: each its own system prompt, so a slot's prompt is swapped in memory by llama-server.
    const project = (name: string, ...more: string[]) =>
      client.chat.completions.create({
        model: 'chat',
        max_tokens: 2,
        messages: [
          { role: 'system', content: `${name}: ${`the ${name} project keeps its own notes `.repeat(60)}` },
          { role: 'user', content: `Work on ${name}.` },
          ...more.map((content, i) => ({ role: i % 2 ? ('user' as const) : ('assistant' as const), content })),
        ],
      })
    const before = parkedFiles()
    const harbor = await project('harbor')
    const quill = await project('quill')
    const lumen = await project('lumen') // pushes one of the two out, into llama-server's RAM cache
    const harborBack = await project('harbor', 'ok', 'go on')
    expect(harborBack.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThan(harbor.usage!.prompt_tokens - 10)
    const lumenBack = await project('lumen', 'ok', 'go on')
    expect(lumenBack.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThan(lumen.usage!.prompt_tokens - 10)
    const quillBack = await project('quill', 'ok', 'go on')
    expect(quillBack.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThan(quill.usage!.prompt_tokens - 10)
    expect(parkedFiles().filter((f) => !before.includes(f))).toEqual([])

    // Two at once: a new project takes the slot of one that comes back at the same moment, which
    // then finds itself in llama-server's cache.
    const [orchard, quillAgain] = await Promise.all([project('orchard'), project('quill', 'ok', 'go on', 'and more')])
    expect(orchard.usage!.prompt_tokens_details!.cached_tokens).toBeLessThan(20)
    expect(quillAgain.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThan(quillBack.usage!.prompt_tokens - 10)
  })

  const parkedFiles = () => readdirSync(join(dataDir, 'slot-cache')).filter((f) => f.includes('-parked-'))
})

describeIf(llamaBuild, 'needs llama.cpp built here (npm run build:engines)')('llama-server as Hearth builds it', () => {
  let upstream: UpstreamServer

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hearth-llama-server-'))
    writeTinyLlama(join(dir, 'chat.gguf'), { contextLength: 2048 })
    upstream = await startUpstreamLlamaServer(['--model', join(dir, 'chat.gguf'), '--threads', '1', '--parallel', '1'])
  })

  afterAll(async () => {
    await upstream?.stop('SIGKILL')
  })

  /** A streamed completion of 200 tokens: its text, and how many reads of the connection it took. */
  async function streamed(extra: Record<string, unknown>): Promise<{ text: string; reads: number; events: number }> {
    const res = await fetch(`${upstream.url}/completion`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'the quick brown fox', n_predict: 200, ignore_eos: true, temperature: 0, stream: true, ...extra }),
    })
    let reads = 0
    let raw = ''
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      reads++
      raw += Buffer.from(chunk).toString('utf8')
    }
    const events = raw
      .split('\n\n')
      .filter((e) => e.startsWith('data: '))
      .map((e) => JSON.parse(e.slice(6)) as { content?: string })
    return { text: events.map((e) => e.content ?? '').join(''), reads, events: events.length }
  }

  it('writes the tokens that come within stream_interval_ms of its last write together, the same text as one by one', async () => {
    const oneByOne = await streamed({})
    const together = await streamed({ stream_interval_ms: 50 })
    expect(together.events).toBe(oneByOne.events)
    expect(together.text).toBe(oneByOne.text)
    // 200 tokens from a tiny model take well under a second: a handful of writes, not 200.
    expect(together.reads).toBeLessThan(40)
  })
})

describe('without engine builds', () => {
  it('starts, says what is missing, and answers model requests 503 naming npm run build:engines', async () => {
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-not-built-'))
    writeTinyLlama(join(modelsDir, 'chat.gguf'))
    writeTinyWhisper(join(modelsDir, 'whisper.bin'))
    // What a machine where `npm run build:engines` never succeeded has: an empty engine cache.
    const cache = mkdtempSync(join(tmpdir(), 'hearth-empty-engine-cache-'))
    const env = { HEARTH_ENGINE_CACHE: cache, HEARTH_LLAMA_BUILD_DIR: undefined, HEARTH_WHISPER_BUILD_DIR: undefined }
    const server = await startTestServer({ modelsDir, env })
    try {
      expect(server.output()).toMatch(/warning: llama\.cpp is not built for this machine.*npm run build:engines/)
      expect(server.output()).toMatch(/warning: whisper\.cpp is not built for this machine.*npm run build:engines/)
      const chat = await postJson(server, '/v1/chat/completions', { model: 'chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 })
      expect(chat.status).toBe(503)
      expect(chat.json.error).toMatchObject({ type: 'server_error', code: 'engine_not_built', param: null })
      expect(chat.json.error.message).toMatch(/^llama\.cpp is not built for this machine.*npm run build:engines/)
      // Waiting does not build it: no Retry-After.
      expect(chat.headers.get('retry-after')).toBeNull()

      const form = new FormData()
      form.append('model', 'whisper')
      form.append(
        'file',
        new Blob([new Uint8Array(wavFile(new Float32Array(16_000), { sampleRate: 16_000, encoding: 'int', bitsPerSample: 16 }))]),
        'silence.wav',
      )
      const speech = await fetch(`${server.url}/v1/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${server.apiKey}` }, body: form })
      expect(speech.status).toBe(503)
      const speechError = (await speech.json()).error
      expect(speechError).toMatchObject({ type: 'server_error', code: 'engine_not_built' })
      expect(speechError.message).toMatch(/^whisper\.cpp is not built for this machine.*npm run build:engines/)

      // The models are still listed, and /api/system (the Server page) says the same.
      const models = await (await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${server.apiKey}` } })).json()
      expect(models.data.map((m: { id: string }) => m.id).sort()).toEqual(['chat', 'whisper'])
      const system = await (await fetch(`${server.url}/api/system`, { headers: { authorization: `Bearer ${server.apiKey}` } })).json()
      expect(system.engine).toEqual({
        name: 'not-built',
        commit: null,
        cpu_features: [],
        gpu_backend: 'none',
        not_built: [chat.json.error.message, speechError.message],
        self_tests: [],
        cpu_fallbacks: [],
      })
      expect(system.devices).toEqual([expect.objectContaining({ type: 'cpu' })])
      expect(system.loaded).toEqual([])
    } finally {
      await server.stop()
    }
  })

  it('the engine build names the exact command that installs what is missing', () => {
    // A PATH with node, npm and git but no CMake and no compiler.
    const bin = mkdtempSync(join(tmpdir(), 'hearth-no-tools-'))
    for (const tool of ['node', 'npm', 'git', 'tar']) {
      const found = spawnSync('which', [tool], { encoding: 'utf8' }).stdout.trim()
      if (found) symlinkSync(found, join(bin, tool))
    }
    const cache = join(bin, 'cache')
    mkdirSync(cache)
    writeFileSync(join(cache, 'README'), 'empty engine cache')
    const run = (args: string[]) =>
      spawnSync(process.execPath, ['--import', 'tsx', join(PROJECT_ROOT, 'main/cli/build-engines.ts'), ...args], {
        cwd: PROJECT_ROOT,
        env: { PATH: bin, HOME: bin, HEARTH_ENGINE_CACHE: cache },
        encoding: 'utf8',
      })
    const strict = run([])
    expect(strict.status).toBe(1)
    expect(strict.stderr).toContain('CMake was not found')
    expect(strict.stderr).toContain('sudo apt-get install -y cmake g++ git')
    // From npm install: the install goes on, and says what it means.
    const soft = run(['--soft'])
    expect(soft.status).toBe(0)
    expect(soft.stderr).toContain('npm run build:engines')
  })
})

describeIf(llamaBuild, 'needs llama.cpp built here (npm run build:engines)')('speculative decoding', () => {
  let server: TestServer

  beforeAll(async () => {
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-speculative-'))
    writeTinyLlama(join(modelsDir, 'target.gguf'), { contextLength: 1024, seed: 11 })
    // Same vocabulary (the writer's), other weights: a draft that is sometimes right.
    writeTinyLlama(join(modelsDir, 'draft.gguf'), { contextLength: 1024, seed: 12, layers: 1 })
    writeFileSync(
      join(modelsDir, 'models.json'),
      JSON.stringify({
        models: [
          // Speculation is on by default (the folder's smaller model would be paired as its draft).
          { id: 'plain', file: 'target.gguf', speculative: false },
          { id: 'drafted', file: 'target.gguf', draft: 'draft.gguf' },
          { id: 'ngram', file: 'target.gguf', speculative: 'ngram' },
          { id: 'bad-draft', file: 'target.gguf', draft: 'missing.gguf' },
        ],
      }),
    )
    server = await startTestServer({ modelsDir })
  })

  afterAll(async () => {
    await server?.stop()
  })

  const complete = (model: string) =>
    postJson(server, '/v1/chat/completions', { model, messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 48 })

  it('never changes a greedy answer, and reports what the draft proposed and what was kept', async () => {
    const plain = await complete('plain')
    const drafted = await complete('drafted')
    const ngram = await complete('ngram')
    expect(drafted.status).toBe(200)
    expect(drafted.json.choices[0].message.content).toBe(plain.json.choices[0].message.content)
    expect(ngram.json.choices[0].message.content).toBe(plain.json.choices[0].message.content)
    expect(plain.json.timings.draft_n).toBeUndefined()
    const t = drafted.json.timings
    expect(t.draft_n).toBeGreaterThan(0)
    expect(t.draft_n_accepted).toBeLessThanOrEqual(t.draft_n)
    expect(t.draft_acceptance_rate).toBeCloseTo(t.draft_n_accepted / t.draft_n, 3)
  })

  it('reports a draft file that is not there as a catalog problem', async () => {
    const models = await (await fetch(`${server.url}/api/models`, { headers: { authorization: `Bearer ${server.apiKey}` } })).json()
    expect(models.problems).toContainEqual(expect.objectContaining({ id: 'bad-draft', problem: expect.stringContaining('draft "missing.gguf"') }))
    expect((await complete('bad-draft')).status).toBe(404)
  })
})
