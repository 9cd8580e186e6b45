/**
 * `npm run launch`: which agents it knows, what it says when one is missing, and what an agent is
 * given, against a running server or one the command starts itself. The agent here is a stand-in
 * on PATH that prints what it got; the real agents run in agents.test.ts.
 */
import { spawn } from 'node:child_process'
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startInProcessServer, type InProcessServer } from '../support/in-process-server.ts'
import { PROJECT_ROOT } from '../support/server-process.ts'
import { writeTinyLlama } from '../support/tiny-models.ts'

let modelsDir: string
let server: InProcessServer
/** A folder of stand-in agents that print their environment and arguments as JSON. */
let agentsBin: string

beforeAll(async () => {
  modelsDir = mkdtempSync(join(tmpdir(), 'hearth-launch-models-'))
  writeTinyLlama(join(modelsDir, 'tiny.gguf'), { contextLength: 2048 })
  server = await startInProcessServer({ modelsDir })
  agentsBin = mkdtempSync(join(tmpdir(), 'hearth-launch-bin-'))
  for (const name of ['claude', 'codex', 'opencode', 'cn', 'kilo', 'cline', 'aider']) {
    const script = join(agentsBin, name)
    writeFileSync(script, `#!/bin/sh\nexec "${process.execPath}" -e 'console.log(JSON.stringify({ argv: process.argv.slice(1), env: process.env }))' -- "$@"\n`)
    chmodSync(script, 0o755)
  }
})

afterAll(async () => {
  await server?.stop()
})

/** Runs `npm run launch -- …` with PATH as given; its exit code and output. */
function launch(args: string[], path: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(PROJECT_ROOT, 'main/cli/launch.ts'), ...args], {
      cwd: PROJECT_ROOT,
      env: { PATH: path, HOME: mkdtempSync(join(tmpdir(), 'hearth-launch-home-')) },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => (stdout += d))
    child.stderr.on('data', (d: Buffer) => (stderr += d))
    child.once('exit', (code) => resolve({ code, stdout, stderr }))
  })
}

const systemPath = '/usr/local/bin:/usr/bin:/bin'
const port = () => new URL(server.url).port
const printed = (stdout: string) => JSON.parse(stdout.split('\n').find((l) => l.startsWith('{'))!) as { argv: string[]; env: Record<string, string> }

describe('npm run launch', () => {
  it('lists the agents it knows, and how to install the missing ones', async () => {
    const { code, stdout } = await launch(['--list'], `${agentsBin}:${systemPath}`)
    expect(code).toBe(0)
    expect(stdout).toMatch(/^claude\s+Claude Code\s+Anthropic Messages\s+installed: .*claude$/m)
    expect(stdout).toMatch(/^qwen\s+Qwen Code\s+OpenAI chat completions\s+not installed: npm install -g @qwen-code\/qwen-code$/m)
  })

  it('prints the exact install command for an agent that is not installed', async () => {
    const { code, stderr } = await launch(['qwen'], systemPath)
    expect(code).toBe(1)
    expect(stderr).toContain('Qwen Code is not installed. Install it with:\n\n  npm install -g @qwen-code/qwen-code')
  })

  it('gives Claude Code the running server, its key and the model, in its environment only', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'hearth-launch-data-'))
    const { code, stdout, stderr } = await launch(
      ['claude', '--port', port(), '--api-key', server.apiKey, '--data-dir', dataDir, '--', '-p', 'hello'],
      `${agentsBin}:${systemPath}`,
    )
    expect(code, stderr).toBe(0)
    const got = printed(stdout)
    expect(got.env).toMatchObject({
      ANTHROPIC_BASE_URL: server.url,
      ANTHROPIC_AUTH_TOKEN: server.apiKey,
      ANTHROPIC_MODEL: 'tiny',
      ANTHROPIC_DEFAULT_HAIKU_MODEL: 'tiny',
      CLAUDE_CODE_MAX_OUTPUT_TOKENS: '2048',
    })
    // The true window: for a model it does not know Claude Code assumes a million tokens.
    expect(got.env.CLAUDE_CODE_MAX_CONTEXT_TOKENS).toBe('2048')
    expect(got.env).not.toHaveProperty('CLAUDE_CODE_AUTO_COMPACT_WINDOW') // 2048 is under Claude Code's 100k minimum
    expect(got.argv).toEqual(['--model', 'tiny', '-p', 'hello'])
  })

  it('gives Codex a provider on its command line, and OpenCode a config file inside the data folder', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'hearth-launch-data-'))
    const codex = printed((await launch(['codex', '--port', port(), '--api-key', server.apiKey, '--data-dir', dataDir], `${agentsBin}:${systemPath}`)).stdout)
    expect(codex.argv).toContain(
      `model_providers.hearth={ name = "Hearth", base_url = "${server.url}/v1", env_key = "HEARTH_AGENT_KEY", wire_api = "responses" }`,
    )
    expect(codex.argv).toContain('model_context_window=2048')
    expect(codex.env.HEARTH_AGENT_KEY).toBe(server.apiKey)
    const opencode = printed(
      (await launch(['opencode', '--port', port(), '--api-key', server.apiKey, '--data-dir', dataDir], `${agentsBin}:${systemPath}`)).stdout,
    )
    expect(opencode.env.OPENCODE_CONFIG).toBe(join(dataDir, 'agents', 'opencode.json'))
    const config = JSON.parse(readFileSync(opencode.env.OPENCODE_CONFIG!, 'utf8'))
    expect(config).toMatchObject({
      model: 'hearth/tiny',
      provider: { hearth: { options: { baseURL: `${server.url}/v1` }, models: { tiny: { limit: { context: 2048 } } } } },
    })
    expect(JSON.stringify(config)).not.toContain(server.apiKey) // the key stays in the environment
  })

  it("gives Continue, Kilo, Cline and Aider their setup in the data folder or their environment, with the model's limits", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'hearth-launch-data-'))
    const agentsDir = join(dataDir, 'agents')
    const run = async (agent: string) =>
      printed((await launch([agent, '--port', port(), '--api-key', server.apiKey, '--data-dir', dataDir], `${agentsBin}:${systemPath}`)).stdout)
    const continueRun = await run('continue')
    expect(continueRun.argv).toEqual(['--config', join(agentsDir, 'continue.yaml')])
    expect(JSON.parse(readFileSync(join(agentsDir, 'continue.yaml'), 'utf8'))).toMatchObject({
      name: 'Hearth',
      version: '1.0.0',
      models: [{ provider: 'openai', model: 'tiny', apiBase: `${server.url}/v1`, defaultCompletionOptions: { contextLength: 2048, maxTokens: 512 } }],
    })
    const kilo = await run('kilo')
    expect(JSON.parse(kilo.env.KILO_CONFIG_CONTENT!)).toMatchObject({
      model: 'hearth/tiny',
      provider: { hearth: { options: { baseURL: `${server.url}/v1` }, models: { tiny: { limit: { context: 2048, output: 2048 } } } } },
    })
    expect(kilo.env.HEARTH_AGENT_KEY).toBe(server.apiKey)
    const cline = await run('cline')
    expect(cline.argv).toEqual(['--data-dir', join(agentsDir, 'cline'), '-P', 'openai-compatible', '-m', 'tiny'])
    expect(JSON.parse(readFileSync(join(agentsDir, 'cline/settings/providers.json'), 'utf8')).providers['openai-compatible'].settings).toMatchObject({
      baseUrl: `${server.url}/v1`,
      model: 'tiny',
      contextWindow: 2048,
    })
    const aider = await run('aider')
    expect(aider.argv.slice(0, 2)).toEqual(['--model', 'openai/tiny'])
    expect(aider.env).toMatchObject({ AIDER_OPENAI_API_BASE: `${server.url}/v1`, AIDER_OPENAI_API_KEY: server.apiKey })
    expect(JSON.parse(readFileSync(join(agentsDir, 'aider.model.metadata.json'), 'utf8'))['openai/tiny']).toMatchObject({
      max_input_tokens: 2048,
      max_output_tokens: 2048,
    })
    expect(aider.argv.join(' ')).not.toContain(server.apiKey) // the key stays out of the process list
  })

  it('starts a server for the agent when none runs, and stops it when the agent exits', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'hearth-launch-data-'))
    mkdirSync(join(dataDir, 'models'))
    writeTinyLlama(join(dataDir, 'models', 'own.gguf'), { contextLength: 1024 })
    const free = await freePort()
    const { code, stdout, stderr } = await launch(['claude', '--port', String(free), '--data-dir', dataDir], `${agentsBin}:${systemPath}`)
    expect(code, stderr).toBe(0)
    expect(stdout).toMatch(new RegExp(`started Hearth at http://127.0.0.1:${free} for this session`))
    const got = printed(stdout)
    expect(got.env.ANTHROPIC_BASE_URL).toBe(`http://127.0.0.1:${free}`)
    expect(got.env.ANTHROPIC_AUTH_TOKEN).toBe(readFileSync(join(dataDir, 'api-key'), 'utf8').trim())
    expect(got.env.ANTHROPIC_MODEL).toBe('own')
    await expect(fetch(`http://127.0.0.1:${free}/health`)).rejects.toThrow()
  })
})

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number }
      probe.close(() => resolve(port))
    })
  })
}
