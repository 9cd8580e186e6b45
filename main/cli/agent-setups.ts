/**
 * How each coding agent is pointed at Hearth: the program, how to install it, and what it is
 * given: environment variables and command-line flags, or a config file written inside Hearth's
 * data folder. A user's own config files are never touched.
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/** What a launch knows: where the server is, its key, and the model with its limits. */
export interface LaunchTarget {
  /** The server's root URL (`http://127.0.0.1:8181`). */
  url: string
  key: string
  model: string
  contextLength: number
  maxCompletionTokens: number
  /** Where a config file for the agent may be written (inside the data folder). */
  configDir: string
}

export interface AgentLaunch {
  env: Record<string, string>
  /** Environment variables the agent must not see (a key of the user's own that would win). */
  unset: string[]
  args: string[]
}

export interface AgentSetup {
  id: string
  name: string
  /** The program on PATH. */
  program: string
  install: string
  /** Which of Hearth's APIs it speaks. */
  api: 'Anthropic Messages' | 'OpenAI Responses' | 'OpenAI chat completions'
  launch(target: LaunchTarget): AgentLaunch
}

/** Claude Code compacts at 100k tokens at the earliest; a smaller window setting is raised to that. */
const CLAUDE_MIN_COMPACT_WINDOW = 100_000
/** The variable Codex reads the key from (not HEARTH_API_KEY: that one sets a server's keys). */
const CODEX_KEY_VARIABLE = 'HEARTH_AGENT_KEY'

export const AGENTS: readonly AgentSetup[] = [
  {
    id: 'claude',
    name: 'Claude Code',
    program: 'claude',
    install: 'npm install -g @anthropic-ai/claude-code',
    api: 'Anthropic Messages',
    launch: (t) => ({
      env: {
        ANTHROPIC_BASE_URL: t.url,
        ANTHROPIC_AUTH_TOKEN: t.key,
        ANTHROPIC_MODEL: t.model,
        // Side requests (titles, summaries) and sub-agents ask for these; the one local model serves them all.
        ANTHROPIC_DEFAULT_OPUS_MODEL: t.model,
        ANTHROPIC_DEFAULT_SONNET_MODEL: t.model,
        ANTHROPIC_DEFAULT_HAIKU_MODEL: t.model,
        ANTHROPIC_SMALL_FAST_MODEL: t.model,
        CLAUDE_CODE_SUBAGENT_MODEL: t.model,
        CLAUDE_CODE_MAX_OUTPUT_TOKENS: String(t.maxCompletionTokens),
        // Offline: no telemetry, update checks or error reports to Anthropic.
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        ...(t.contextLength >= CLAUDE_MIN_COMPACT_WINDOW ? { CLAUDE_CODE_AUTO_COMPACT_WINDOW: String(t.contextLength) } : {}),
      },
      unset: ['ANTHROPIC_API_KEY'],
      args: ['--model', t.model],
    }),
  },
  {
    id: 'codex',
    name: 'Codex',
    program: 'codex',
    install: 'npm install -g @openai/codex',
    api: 'OpenAI Responses',
    launch: (t) => ({
      env: { [CODEX_KEY_VARIABLE]: t.key },
      unset: [],
      // `-c` overrides Codex's config for this run only; ~/.codex/config.toml stays as it is.
      args: [
        '-c', 'model_provider="hearth"',
        '-c', `model_providers.hearth={ name = "Hearth", base_url = "${t.url}/v1", env_key = "${CODEX_KEY_VARIABLE}", wire_api = "responses" }`,
        '-c', `model_context_window=${t.contextLength}`,
        '-c', `model_max_output_tokens=${t.maxCompletionTokens}`,
        '-m', t.model,
      ],
    }),
  },
  {
    id: 'opencode',
    name: 'OpenCode',
    program: 'opencode',
    install: 'npm install -g opencode-ai',
    api: 'OpenAI chat completions',
    launch: (t) => {
      const file = join(t.configDir, 'opencode.json')
      mkdirSync(t.configDir, { recursive: true })
      const config = {
        $schema: 'https://opencode.ai/config.json',
        provider: {
          hearth: {
            npm: '@ai-sdk/openai-compatible',
            name: 'Hearth',
            options: { baseURL: `${t.url}/v1`, apiKey: '{env:HEARTH_AGENT_KEY}' },
            models: { [t.model]: { name: t.model, tool_call: true, limit: { context: t.contextLength, output: t.maxCompletionTokens } } },
          },
        },
        model: `hearth/${t.model}`,
        small_model: `hearth/${t.model}`,
      }
      writeFileSync(file, JSON.stringify(config, null, 2), { mode: 0o600 })
      return { env: { OPENCODE_CONFIG: file, HEARTH_AGENT_KEY: t.key }, unset: [], args: [] }
    },
  },
  {
    id: 'qwen',
    name: 'Qwen Code',
    program: 'qwen',
    install: 'npm install -g @qwen-code/qwen-code',
    api: 'OpenAI chat completions',
    launch: (t) => ({
      env: { OPENAI_BASE_URL: `${t.url}/v1`, OPENAI_API_KEY: t.key, OPENAI_MODEL: t.model },
      unset: [],
      args: ['--auth-type', 'openai', '--model', t.model],
    }),
  },
]

export function agentById(id: string): AgentSetup | undefined {
  return AGENTS.find((a) => a.id === id)
}
