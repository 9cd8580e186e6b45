/**
 * docs/ollama.md's "Switching from Ollama in five minutes", run as a person follows it: every
 * command block of the section, taken from the page, against a real server and its engines, the
 * real `ollama` command, Claude Code and Codex (pinned in test/agents), on an Ollama store that the
 * real `ollama create` made under the page's model names (`llama3.2:3b` is stories260K with
 * `num_predict 32` in its Modelfile, so that no answer runs long; `qwen2.5-coder:7b` the agents
 * suite's small model with Qwen 2.5's tool template, which answers "OK").
 *
 * What the test changes, and only this: the port (the page's 11434 is the test's Ollama port, and
 * `ollama` and Codex, which find Ollama at 11434 unless told, are told by OLLAMA_HOST and
 * CODEX_OSS_PORT); `npm run serve` is the test server with the page's flags (and the store named by
 * OLLAMA_MODELS); and the agents run headless, as agents.test.ts runs them: Claude Code with
 * `-p <prompt>`, Codex as `codex exec --skip-git-repo-check … <prompt>`. Each block marked
 * `<!-- switch: <name> -->` runs; one marked `<!-- switch: not run (why) -->` is said not to; an
 * unmarked block fails the test.
 */
import { spawn } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { RequestRecord } from '../../main/server/http/request-history.ts'
import { agentProgram } from '../support/agent-programs.ts'
import { AGENT_MODEL } from '../support/conformance-families.ts'
import { familyModel } from '../support/family-models.ts'
import { makeOllamaStore, ollamaProgram, runOllama } from '../support/ollama-program.ts'
import { PROJECT_ROOT, startTestServer, type TestServer } from '../support/server-process.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { cannotRun, describeIf } from '../support/skips.ts'
import { llamaBuild } from '../support/upstream-servers.ts'

const SECTION = 'Switching from Ollama in five minutes'
const DOC = readFileSync(join(PROJECT_ROOT, 'docs/ollama.md'), 'utf8')

/** The section's text, from its heading to the next. */
function section(): string {
  const start = DOC.indexOf(`## ${SECTION}\n`)
  expect(start, `docs/ollama.md has the section "${SECTION}"`).toBeGreaterThanOrEqual(0)
  const end = DOC.indexOf('\n## ', start + 3)
  return DOC.slice(start, end === -1 ? undefined : end)
}

/** Each fenced block of the section with the marker before it (undefined where there is none). */
function blocks(): Array<{ marker: string | undefined; code: string }> {
  return [...section().matchAll(/(?:<!-- switch: ([^\n]*?) -->\n)?```\w*\n([\s\S]*?)```/g)].map((m) => ({ marker: m[1], code: m[2]! }))
}

/** The blocks the test runs, by their marker, and what each must show. */
const RUN = ['serve', 'ollama', 'modelfile', 'openai', 'claude', 'codex'] as const
type Step = (typeof RUN)[number]

function block(step: Step): string {
  const found = blocks().filter((b) => b.marker === step)
  expect(found, `one block marked <!-- switch: ${step} -->`).toHaveLength(1)
  return found[0]!.code
}

describe(`docs/ollama.md: ${SECTION}`, () => {
  it('marks every block: run by this test, or not run with the reason', () => {
    const all = blocks()
    expect(all.length).toBeGreaterThan(RUN.length)
    for (const { marker, code } of all) {
      expect(marker, `a block without <!-- switch: … --> in "${SECTION}":\n${code}`).toBeDefined()
      expect(RUN.includes(marker as Step) || /^not run \(.+\)$/.test(marker!), `<!-- switch: ${marker} -->`).toBe(true)
    }
    expect(new Set(all.map((b) => b.marker).filter((m) => RUN.includes(m as Step)))).toEqual(new Set(RUN))
  })
})

const stories = sharedFixture('models/stories260K-chatml.gguf')
const qwenTemplate = sharedFixture('chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja')
const claude = agentProgram('claude')
const codex = agentProgram('codex')
if (!llamaBuild) cannotRun('llama.cpp is not built on this machine (npm run build:engines); the switching page cannot be run')
if (!ollamaProgram()) cannotRun('the ollama command is not built (the engines setup builds it from the Go module proxy); the switching page cannot be run')
if (!claude || !codex)
  cannotRun("Claude Code and Codex are not installed (the engines project's setup installs them from test/agents); the switching page cannot be run")

/** Port 9 (discard) on loopback: what the programs would fetch from the internet is refused at once. */
const NO_INTERNET = 'http://127.0.0.1:9'
const PROMPT = 'Reply with OK'

describeIf(
  llamaBuild && stories && qwenTemplate && ollamaProgram() && claude && codex,
  'needs llama.cpp built here (npm run build:engines), the shared fixtures (../shared/fixtures), the ollama command, Claude Code and Codex (the engines setup builds and installs them)',
)(`docs/ollama.md: ${SECTION}, run as written`, () => {
  let server: TestServer
  let port: string
  let home: string
  let work: string

  beforeAll(async () => {
    // The person's Ollama store, as the real `ollama create` writes one.
    const files = mkdtempSync(join(tmpdir(), 'hearth-switch-files-'))
    const store = mkdtempSync(join(tmpdir(), 'hearth-switch-store-'))
    copyFileSync(stories!, join(files, 'llama.gguf'))
    copyFileSync(familyModel(join(PROJECT_ROOT, 'test/artifacts/family-models'), AGENT_MODEL, readFileSync(qwenTemplate!, 'utf8')), join(files, 'coder.gguf'))
    await makeOllamaStore(store, [
      { name: 'llama3.2:3b', gguf: join(files, 'llama.gguf'), modelfileExtra: 'PARAMETER num_predict 32' },
      { name: 'qwen2.5-coder:7b', gguf: join(files, 'coder.gguf') },
    ])
    // Step 2: `npm run serve -- <flags>`, the page's flags with a free port for 11434.
    const serve = /^npm run serve -- (.+)$/m.exec(block('serve'))
    expect(serve, 'the serve block is `npm run serve -- <flags>`').not.toBeNull()
    const flags = serve![1]!
      .trim()
      .split(/\s+/)
      .map((flag) => flag.replace('11434', '0'))
    server = await startTestServer({
      modelsDir: mkdtempSync(join(tmpdir(), 'hearth-switch-models-')),
      args: [...flags, '--model-sources', 'ollama'],
      env: { OLLAMA_MODELS: store },
    })
    port = new URL(server.ollamaUrl!).port
    home = mkdtempSync(join(tmpdir(), 'hearth-switch-home-'))
    work = mkdtempSync(join(tmpdir(), 'hearth-switch-work-'))
  })

  afterAll(async () => {
    await server?.stop()
  })

  /** A block run by bash as the page writes it, with the test's port for 11434; what it printed. */
  function runBlock(code: string, cwd = work): Promise<{ code: number | null; output: string }> {
    const env: NodeJS.ProcessEnv = {
      PATH: [dirname(ollamaProgram()!), dirname(claude!), process.env.PATH].join(':'),
      HOME: home,
      TMPDIR: tmpdir(),
      OLLAMA_HOST: `127.0.0.1:${port}`,
      CODEX_OSS_PORT: port,
      OLLAMA_NOHISTORY: '1',
      HTTPS_PROXY: NO_INTERNET,
      HTTP_PROXY: NO_INTERNET,
      NO_PROXY: 'localhost,127.0.0.1',
    }
    return new Promise((resolve, reject) => {
      const child = spawn('bash', ['-eo', 'pipefail', '-c', code.replaceAll('11434', port)], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
      let output = ''
      child.stdout.on('data', (d: Buffer) => (output += d))
      child.stderr.on('data', (d: Buffer) => (output += d))
      const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), 240_000)
      child.once('error', reject)
      child.once('close', (exit) => {
        clearTimeout(timer)
        resolve({ code: exit, output: output.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '') })
      })
    })
  }

  async function requestsSince(since: number): Promise<RequestRecord[]> {
    const res = await fetch(`${server.url}/api/requests`, { headers: { authorization: `Bearer ${server.apiKey}` } })
    return ((await res.json()) as { requests: RequestRecord[] }).requests.filter((r) => Date.parse(r.time) >= since)
  }

  it('2. npm run serve -- --ollama-port 11434: the Ollama port is on, and says so', () => {
    expect(server.output()).toMatch(new RegExp(`^Ollama's API.* on http://127\\.0\\.0\\.1:${port}\\b`, 'm'))
  })

  it('3. ollama list, run and ps: the store’s models under their names, an answer, the model running', async () => {
    const { code, output } = await runBlock(block('ollama'))
    expect(code, output).toBe(0)
    expect(output).toMatch(/^llama3\.2:3b\s+[0-9a-f]{12}\s/m)
    expect(output).toMatch(/^qwen2\.5-coder:7b\s+[0-9a-f]{12}\s/m)
    // The answer, then `ps` with the model loaded.
    const [, afterList] = output.split(/^qwen2\.5-coder:7b.*$/m)
    expect(afterList!.split(/^NAME\s+ID\s+SIZE\s+PROCESSOR/m)[0]!.trim().length, output).toBeGreaterThan(0)
    expect(output).toMatch(/^llama3\.2:3b\s+[0-9a-f]{12}\s+[\d.]+ [MG]B\s+100% CPU/m)
  })

  it('4. a Modelfile FROM a model by name, with PARAMETER and SYSTEM: made, and it answers as that model', async () => {
    const since = Date.now()
    const dir = join(work, 'modelfile')
    mkdirSync(dir)
    const { code, output } = await runBlock(block('modelfile'), dir)
    expect(code, output).toBe(0)
    expect(output).toContain('success')
    const ollama = (args: string[]) => runOllama(args, { host: server.ollamaUrl!, home })
    expect((await ollama(['show', '--system', 'brief'])).stdout).toBe('You answer in one short paragraph.')
    const parameters = (await ollama(['show', '--parameters', 'brief'])).stdout
    expect(parameters).toMatch(/^temperature\s+0\.2$/m)
    expect(parameters).toMatch(/^num_ctx\s+8192$/m)
    // Made from the store's model, whose own num_predict it keeps.
    expect(parameters).toMatch(/^num_predict\s+32$/m)
    expect((await requestsSince(since)).filter((r) => r.model === 'brief').map((r) => [r.path, r.status])).toEqual([['/api/generate', 200]])
  })

  it('5. a program set up for Ollama’s /v1, with the key "ollama": answered', async () => {
    const { code, output } = await runBlock(block('openai'))
    expect(code, output).toBe(0)
    const answer = JSON.parse(output.slice(output.indexOf('{'))) as { object: string; choices: Array<{ message: { content: string } }> }
    expect(answer.object).toBe('chat.completion')
    expect(answer.choices[0]!.message.content.length).toBeGreaterThan(0)
  })

  it('6. Claude Code as Ollama’s docs set it up: it reaches Hearth through the Ollama port and answers', async () => {
    const since = Date.now()
    // Headless: the page's command with `-p <prompt>`.
    const { code, output } = await runBlock(`${block('claude').trimEnd()} -p '${PROMPT}'`)
    expect(code, output).toBe(0)
    expect(output).toContain('OK')
    expect(output).not.toMatch(/API Error/i)
    const requests = await requestsSince(since)
    // It has no key of Hearth's ("ollama"): only the Ollama port lets it in, and answers.
    expect(
      requests.filter((r) => r.path === '/v1/messages' && r.model === 'qwen2.5-coder:7b' && r.status === 200).length,
      JSON.stringify(requests),
    ).toBeGreaterThan(0)
    for (const r of requests) expect(r.status, `${r.method} ${r.path} ${r.model} ${r.code}`).toBeLessThan(500)
  }, 300_000)

  it('7. Codex with --oss, its built-in Ollama provider: it reaches Hearth through the Ollama port and answers', async () => {
    const since = Date.now()
    // Headless: `codex exec --skip-git-repo-check` with the page's flags and a prompt.
    const { code, output } = await runBlock(
      `${block('codex')
        .trimEnd()
        .replace(/^codex /m, 'codex exec --skip-git-repo-check ')} '${PROMPT}'`,
    )
    expect(code, output).toBe(0)
    expect(output).toMatch(/^codex\nOK$/m)
    const requests = await requestsSince(since)
    expect(
      requests.filter((r) => r.path === '/v1/responses' && r.model === 'qwen2.5-coder:7b' && r.status === 200).length,
      JSON.stringify(requests),
    ).toBeGreaterThan(0)
    for (const r of requests) expect(r.status, `${r.method} ${r.path} ${r.model} ${r.code}`).toBeLessThan(500)
  }, 300_000)
})
