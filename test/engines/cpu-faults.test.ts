/**
 * An engine that dies of SIGILL while loading or on its first batch (a kernel the CPU or the
 * compiler gets wrong, as ggml's AMX tiles did on Xeons): the model is loaded again without the
 * kernels made for this CPU's special units, the request is answered, and what happened is said in
 * words in the log, /api/system and the Server page's data. Where it crashes even so, the answer
 * says which weight type, what was tried and the command that builds without AVX-512. The engine
 * is the real llama-server behind test/support/faulting-llama-server.mjs, which dies on cue.
 */
import { execFileSync } from 'node:child_process'
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import { chromium } from 'playwright-core'
import { afterEach, beforeAll, expect, it } from 'vitest'
import { ensureUiBuilt } from '../../main/cli/build-ui.ts'
import { programPath } from '../../engines/builder/llama-build.ts'
import { PROJECT_ROOT, startTestServer, type TestServer } from '../support/server-process.ts'
import { writeTinyLlama } from '../support/tiny-models.ts'
import { cannotRun, describeIf } from '../support/skips.ts'
import { llamaBuild } from '../support/upstream-servers.ts'

const CHROMIUM = process.env.HEARTH_CHROMIUM ?? '/usr/bin/chromium'
const haveChromium = existsSync(CHROMIUM)
if (!haveChromium) cannotRun(`the Server page in test/engines/cpu-faults.test.ts: no Chromium at ${CHROMIUM}`)

let modelsDir: string
let faultingBuild: string
let server: TestServer | undefined

beforeAll(() => {
  if (!llamaBuild) return
  modelsDir = mkdtempSync(join(tmpdir(), 'hearth-cpu-faults-models-'))
  const f32 = join(modelsDir, 'tiny.gguf.f32')
  writeTinyLlama(f32, { contextLength: 512 })
  // A weight type people download, so the message can name it.
  execFileSync(programPath(llamaBuild.dir, 'llama-quantize'), [f32, join(modelsDir, 'tiny.gguf'), 'Q4_0', '1'], { stdio: 'ignore' })
  execFileSync('rm', [f32])
  // A build folder whose llama-server is the faulting one in front of the real one.
  faultingBuild = mkdtempSync(join(tmpdir(), 'hearth-faulting-build-'))
  copyFileSync(join(llamaBuild.dir, 'build.json'), join(faultingBuild, 'build.json'))
  for (const program of ['llama-bench', 'llama-quantize', 'ggml-rpc-server']) symlinkSync(programPath(llamaBuild.dir, program), join(faultingBuild, program))
  const wrapper = join(faultingBuild, 'llama-server')
  writeFileSync(
    wrapper,
    `#!/bin/sh\nexec "${process.execPath}" "${join(PROJECT_ROOT, 'test/support/faulting-llama-server.mjs')}" "${programPath(llamaBuild.dir, 'llama-server')}" "$@"\n`,
  )
  chmodSync(wrapper, 0o755)
})

afterEach(async () => {
  await server?.stop()
  server = undefined
})

async function serve(phase: 'loading' | 'first-batch' | 'always'): Promise<{ client: OpenAI; system: () => Promise<any> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'hearth-cpu-faults-data-'))
  mkdirSync(dataDir, { recursive: true })
  server = await startTestServer({ modelsDir, dataDir, env: { HEARTH_LLAMA_BUILD_DIR: faultingBuild, FAULT_PHASE: phase } })
  const { url, apiKey } = server
  return {
    client: new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0 }),
    system: async () => (await fetch(`${url}/api/system`, { headers: { authorization: `Bearer ${apiKey}` } })).json(),
  }
}

const ask = (client: OpenAI) => client.chat.completions.create({ model: 'tiny', messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 4 })

describeIf(llamaBuild, 'needs llama.cpp built here (npm run build:engines)')('a model that crashes llama.cpp on this CPU', () => {
  it('on its first batch: answered all the same, without the special kernels, and said so', async () => {
    const { client, system } = await serve('first-batch')
    const answer = await ask(client)
    expect(answer.choices[0]!.message.content).toBeTypeOf('string')
    expect(answer.usage!.completion_tokens).toBeGreaterThan(0)
    const log = server!.output()
    expect(log).toMatch(
      /warning: model "tiny" \(Q4_0 weights\) crashed llama\.cpp with SIGILL on its first batch, in the kernels for .*; Hearth runs it without them \(--no-repack\)/,
    )
    const info = await system()
    expect(info.engine.cpu_fallbacks).toEqual([
      expect.objectContaining({ model: 'tiny', weight_type: 'Q4_0', signal: 'SIGILL', phase: 'first batch', recovered: true }),
    ])
    // Later requests go to the engine that runs, with no second crash.
    await ask(client)
    expect(server!.output().match(/crashed llama\.cpp/g)).toHaveLength(1)
    if (haveChromium)
      await expectServerPageSays(/Model tiny \(Q4_0 weights\) crashed llama\.cpp with SIGILL on its first batch: it now runs without .*, with slower prompts\./)
  })

  it('while loading: loaded again without them', async () => {
    const { client, system } = await serve('loading')
    await ask(client)
    expect((await system()).engine.cpu_fallbacks).toEqual([expect.objectContaining({ weight_type: 'Q4_0', phase: 'loading', recovered: true })])
  })

  it('even without them: an answer that says what was tried and what to do, and the server stays up', async () => {
    const { client, system } = await serve('always')
    const failure = await ask(client).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(failure).toBeInstanceOf(OpenAI.APIError)
    const error = failure as InstanceType<typeof OpenAI.APIError>
    expect(error.status).toBe(500)
    expect(error.message).toMatch(/model "tiny" \(Q4_0 weights\) crashes llama\.cpp on this CPU with SIGILL, even without /)
    expect(error.message).toContain('npm run build:engines -- --without avx512')
    expect(error.message).not.toContain('docs/build.md')
    expect((await system()).engine.cpu_fallbacks).toEqual([expect.objectContaining({ model: 'tiny', recovered: false })])
    expect((await fetch(`${server!.url}/health`)).status).toBe(200)
  })
})

/** The Server page's engine card, in Chromium, says `text` (screenshot in test/artifacts/ui/). */
async function expectServerPageSays(text: RegExp): Promise<void> {
  ensureUiBuilt()
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] })
  try {
    const page = await browser.newPage({ viewport: { width: 900, height: 700 } })
    await page.addInitScript((k) => localStorage.setItem('hearth.apiKey', k), server!.apiKey)
    await page.goto(`${server!.url}/#/server`)
    const note = page.getByTestId('engine-cpu-fallback')
    await expect.poll(async () => (await note.textContent())?.replace(/\s+/g, ' '), { timeout: 15_000 }).toMatch(text)
    expect(await page.getByTestId('engine-self-test').first().textContent()).toMatch(/llama\.cpp: self-test passed/)
    const shot = join(PROJECT_ROOT, 'test/artifacts/ui/server-cpu-fallback.png')
    mkdirSync(join(shot, '..'), { recursive: true })
    await page.getByTestId('engine-card').screenshot({ path: shot })
  } finally {
    await browser.close()
  }
}
