/**
 * The coding agents the agent suites run (Claude Code, Codex, OpenCode, Qwen Code, Continue, Kilo,
 * Cline from npm; Aider from PyPI), pinned in test/agents/package.json and its lockfile (and
 * AIDER_VERSION here), apart from the app's dependencies: together they weigh over a gigabyte. They
 * are installed once per pin into a cache outside the clone (beside the engines), by the engines
 * project's setup, and found there by the suites. OpenAI's, Anthropic's and Ollama's Python clients
 * come with them, in a virtualenv of their own (Aider pins an older openai).
 */
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { PROJECT_ROOT } from './server-process.ts'

const AGENTS_DIR = join(PROJECT_ROOT, 'test/agents')

/** The agents' programs by the name their packages install. */
export type AgentProgram = 'claude' | 'codex' | 'opencode' | 'qwen' | 'cn' | 'kilo' | 'cline' | 'aider'

/** Aider comes from PyPI, into a virtualenv of its own beside the npm agents. */
export const AIDER_VERSION = '0.86.2'

/** The Python clients a program written today gets: OpenAI's (its 3.x moved to httpx2), Anthropic's and Ollama's. */
export const OPENAI_PYTHON_VERSION = '3.57.0'
export const ANTHROPIC_PYTHON_VERSION = '2.14.0'
export const OLLAMA_PYTHON_VERSION = '0.6.3'

const PYTHON_PACKAGES = [
  { venv: 'aider-venv', requirements: [`aider-chat==${AIDER_VERSION}`] },
  { venv: 'python-clients', requirements: [`openai==${OPENAI_PYTHON_VERSION}`, `anthropic==${ANTHROPIC_PYTHON_VERSION}`, `ollama==${OLLAMA_PYTHON_VERSION}`] },
]

/** Where this lockfile's agents are (or will be) installed. */
export function agentsInstallDir(env: NodeJS.ProcessEnv = process.env): string {
  const lock = readFileSync(join(AGENTS_DIR, 'package-lock.json'))
  const key = createHash('sha256')
    .update(lock)
    .update(PYTHON_PACKAGES.flatMap((p) => p.requirements).join(' '))
    .digest('hex')
    .slice(0, 16)
  const cache = env.HEARTH_AGENTS_CACHE ?? join(env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'hearth/agents')
  return join(cache, key)
}

/** The Python interpreter that has OpenAI's, Anthropic's and Ollama's clients, or undefined where they are not installed. */
export function pythonClients(): string | undefined {
  const path = join(agentsInstallDir(), 'python-clients/bin/python')
  return existsSync(path) ? path : undefined
}

/** The path of an installed agent's program, or undefined (the suites then skip, loudly). */
export function agentProgram(name: AgentProgram): string | undefined {
  const path = name === 'aider' ? join(agentsInstallDir(), 'aider-venv/bin/aider') : join(agentsInstallDir(), 'node_modules/.bin', name)
  return existsSync(path) ? path : undefined
}

/**
 * Installs the pinned agents into the cache, unless they are there already; returns an error
 * message when the registry cannot be reached, so the suites can say why they skip. `npm install`
 * from the lockfile, as `npm ci` refuses it: some agents name optional packages the registry lacks.
 */
export function installAgents(log: (line: string) => void = console.log): string | undefined {
  const dir = agentsInstallDir()
  if (existsSync(join(dir, '.complete'))) return undefined
  const partial = `${dir}.partial-${process.pid}`
  rmSync(partial, { recursive: true, force: true })
  mkdirSync(partial, { recursive: true })
  copyFileSync(join(AGENTS_DIR, 'package.json'), join(partial, 'package.json'))
  copyFileSync(join(AGENTS_DIR, 'package-lock.json'), join(partial, 'package-lock.json'))
  log(`installing the coding agents for the agent suites into ${dir} (about 1 GB, once per lockfile)`)
  const started = performance.now()
  try {
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: partial, stdio: ['ignore', 'ignore', 'pipe'] })
  } catch (e) {
    rmSync(partial, { recursive: true, force: true })
    return `npm install of test/agents failed: ${(e as { stderr?: Buffer }).stderr?.toString().trim().slice(-400) ?? String(e)}`
  }
  rmSync(dir, { recursive: true, force: true })
  renameSync(partial, dir)
  // In its final place: a virtualenv's scripts name its interpreter by absolute path.
  for (const { venv, requirements } of PYTHON_PACKAGES) {
    try {
      execFileSync('python3', ['-m', 'venv', join(dir, venv)], { stdio: ['ignore', 'ignore', 'pipe'] })
      execFileSync(join(dir, venv, 'bin/pip'), ['install', '--quiet', '--disable-pip-version-check', '--only-binary=:all:', ...requirements], {
        stdio: ['ignore', 'ignore', 'pipe'],
      })
    } catch (e) {
      rmSync(dir, { recursive: true, force: true })
      return `pip install of ${requirements.join(' ')} failed: ${(e as { stderr?: Buffer }).stderr?.toString().trim().slice(-400) || (e as Error).message}`
    }
  }
  execFileSync('touch', [join(dir, '.complete')])
  log(`coding agents installed in ${Math.round((performance.now() - started) / 1000)} s`)
  removeEarlierInstalls(dir)
  return undefined
}

/** An earlier lockfile's agents (1 to 3 GB) go once this one's are in: a full disk failed CI. */
function removeEarlierInstalls(current: string): void {
  const cache = dirname(current)
  for (const name of readdirSync(cache)) {
    const other = join(cache, name)
    if (other !== current && existsSync(join(other, '.complete'))) rmSync(other, { recursive: true, force: true })
  }
}
