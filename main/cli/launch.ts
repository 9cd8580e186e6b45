/**
 * `npm run launch -- <agent> [--model ID]`: starts a coding agent against Hearth, the way
 * `ollama launch` does. It uses the server already running at the configured address, or starts
 * one in this process (its log goes to a file) and stops it when the agent exits. The agent gets
 * the address, key and model in its environment, its command line, or a config file inside
 * Hearth's data folder (agent-setups.ts); a user's own config files are never edited.
 */
import { spawn, spawnSync } from 'node:child_process'
import { appendFileSync, mkdirSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { loadOrCreateStoredKey } from '../server/services/keys/api-keys.ts'
import { startServer, type RunningServer } from '../server/server.ts'
import { resolveSettings, SettingsError, type ServerSettings } from '../server/settings.ts'
import { AGENTS, agentById, type AgentSetup, type LaunchTarget } from './agent-setups.ts'

const USAGE = `Usage: npm run launch -- <agent> [--model ID] [server flags] [-- agent arguments]
       npm run launch -- --list

Starts a coding agent against Hearth: the running server, or one started for it.
Agents: ${AGENTS.map((a) => a.id).join(', ')}

  --model ID       the model the agent uses (default: the first chat model)
  --list           the agents this command knows, and whether each is installed
  --host, --port, --data-dir, --models-dir, --settings, --api-key: as for \`npm run serve\`
`

class LaunchError extends Error {}

async function main(): Promise<number> {
  const argv = process.argv.slice(2)
  const split = argv.indexOf('--')
  const own = split < 0 ? argv : argv.slice(0, split)
  const agentArgs = split < 0 ? [] : argv.slice(split + 1)
  const { values, positionals } = parseArgs({
    args: own,
    allowPositionals: true,
    strict: true,
    options: {
      model: { type: 'string' },
      list: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
      host: { type: 'string' },
      port: { type: 'string' },
      'data-dir': { type: 'string' },
      'models-dir': { type: 'string' },
      settings: { type: 'string' },
      'api-key': { type: 'string' },
    },
  })
  if (values.list) {
    for (const agent of AGENTS) {
      const where = programPath(agent.program)
      console.log(`${agent.id.padEnd(9)} ${agent.name.padEnd(12)} ${agent.api.padEnd(24)} ${where ? `installed: ${where}` : `not installed: ${agent.install}`}`)
    }
    return 0
  }
  const [id] = positionals
  if (values.help || !id) {
    console.log(USAGE)
    return values.help ? 0 : 2
  }
  const agent = agentById(id)
  if (!agent) throw new LaunchError(`no agent called '${id}'; the agents are ${AGENTS.map((a) => a.id).join(', ')}`)
  const program = programPath(agent.program)
  if (!program) throw new LaunchError(`${agent.name} is not installed. Install it with:\n\n  ${agent.install}\n`)

  const serverFlags = (['host', 'port', 'data-dir', 'models-dir', 'settings', 'api-key'] as const).flatMap((k) =>
    values[k] === undefined ? [] : [`--${k}`, values[k]!],
  )
  const { settings } = resolveSettings(serverFlags, process.env, availableParallelism())
  const { url, started } = await serverFor(settings)
  try {
    const key = settings.apiKeys[0] ?? (settings.auth ? (await loadOrCreateStoredKey(settings.dataDir)).key : 'no-key-needed')
    const target = await launchTarget(url, key, values.model, join(settings.dataDir, 'agents'))
    console.log(`${agent.name} → Hearth at ${url}, model ${target.model} (${target.contextLength} tokens of context)`)
    return await run(agent, program, target, agentArgs)
  } finally {
    await started?.close()
  }
}

/** The server at the configured address, or one started here (logging to a file) when none answers. */
async function serverFor(settings: ServerSettings): Promise<{ url: string; started: RunningServer | undefined }> {
  const host = settings.host.includes(':') ? `[${settings.host}]` : settings.host
  const url = `http://${host}:${settings.port}`
  const running = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) }).then(
    (r) => r.ok,
    () => false,
  )
  if (running) return { url, started: undefined }
  mkdirSync(settings.dataDir, { recursive: true })
  const logFile = join(settings.dataDir, 'launch-server.log')
  const started = await startServer(settings, (line) => appendFileSync(logFile, `${line}\n`))
  console.log(`started Hearth at ${started.url} for this session (log: ${logFile})`)
  return { url: started.url, started }
}

/** The model the agent gets: the one asked for, or the first chat model; with its limits. */
async function launchTarget(url: string, key: string, wanted: string | undefined, configDir: string): Promise<LaunchTarget> {
  const res = await fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${key}` } })
  if (!res.ok) throw new LaunchError(`the server at ${url} refused the key (${res.status}); pass the key it uses with --api-key`)
  const { data } = (await res.json()) as { data: Array<{ id: string; capabilities: string[]; context_length: number; max_completion_tokens: number }> }
  const chat = data.filter((m) => m.capabilities.includes('chat'))
  const model = wanted === undefined ? chat[0] : data.find((m) => m.id === wanted)
  if (!model) {
    if (wanted !== undefined) throw new LaunchError(`no model '${wanted}'; the chat models are: ${chat.map((m) => m.id).join(', ') || 'none'}`)
    throw new LaunchError('the server has no chat model yet: put a .gguf file in its models folder, or see `npm run models -- recommended`')
  }
  if (!model.capabilities.includes('chat')) throw new LaunchError(`'${model.id}' is not a chat model`)
  return { url, key, model: model.id, contextLength: model.context_length, maxCompletionTokens: model.max_completion_tokens, configDir }
}

/** Runs the agent in this terminal; resolves with its exit code. */
function run(agent: AgentSetup, program: string, target: LaunchTarget, extraArgs: string[]): Promise<number> {
  const launch = agent.launch(target)
  const env: NodeJS.ProcessEnv = { ...process.env, ...launch.env }
  for (const name of launch.unset) delete env[name]
  const child = spawn(program, [...launch.args, ...extraArgs], { stdio: 'inherit', env })
  // Ctrl-C reaches the agent through the terminal; this process waits for it to finish.
  const ignore = () => undefined
  process.on('SIGINT', ignore)
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code, signal) => {
      process.off('SIGINT', ignore)
      resolve(code ?? (signal ? 128 : 1))
    })
  })
}

/** Where a program is on PATH, or undefined. */
function programPath(program: string): string | undefined {
  const found = spawnSync(process.platform === 'win32' ? 'where' : 'which', [program], { encoding: 'utf8' })
  return found.status === 0 ? found.stdout.split('\n')[0]!.trim() || undefined : undefined
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    if (e instanceof LaunchError || e instanceof SettingsError) console.error(`hearth launch: ${e.message}`)
    else if ((e as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') console.error(`hearth launch: ${(e as Error).message}\n\n${USAGE}`)
    else console.error('hearth launch: failed:', e)
    process.exit(1)
  },
)
