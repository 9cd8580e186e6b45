/**
 * How each coding agent is pointed at Hearth: the program, how to install it, and what it is
 * given: environment variables and command-line flags, or a config file written inside Hearth's
 * data folder. A user's own config files are never touched.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
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

/**
 * A config file written for one launch inside Hearth's data folder (readable by its owner only:
 * some hold the key). JSON, which YAML readers take as it is.
 */
function writeConfig(dir: string, name: string, content: unknown): string {
  mkdirSync(dir, { recursive: true })
  const file = join(dir, name)
  writeFileSync(file, `${JSON.stringify(content, null, 2)}\n`, { mode: 0o600 })
  return file
}

/** Kilo sends at most 32,000 tokens of output unless told more (its OUTPUT_TOKEN_MAX). */
/** Hearth as an OpenCode-style provider and default model (OpenCode's config, and Kilo's, its fork). */
function openCodeProvider(t: LaunchTarget) {
  return {
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
}

const KILO_OUTPUT_MAX = 32_000

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
        // The model's true window: Claude Code assumes a million tokens for a model it does not
        // know (and warns so at every start), and would plan its compaction for that.
        CLAUDE_CODE_MAX_CONTEXT_TOKENS: String(t.contextLength),
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
        '-c',
        'model_provider="hearth"',
        '-c',
        `model_providers.hearth={ name = "Hearth", base_url = "${t.url}/v1", env_key = "${CODEX_KEY_VARIABLE}", wire_api = "responses" }`,
        // Codex reads the window (for its compaction) but has no output limit to set: it sends none,
        // and the model's max_completion_tokens caps its turns.
        '-c',
        `model_context_window=${t.contextLength}`,
        '-m',
        t.model,
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
        ...openCodeProvider(t),
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
  {
    id: 'continue',
    name: 'Continue',
    program: 'cn',
    install: 'npm install -g @continuedev/cli',
    api: 'OpenAI chat completions',
    launch: (t) => {
      // name and version are required; the CLI reads the window and the output limit from
      // defaultCompletionOptions only (a top-level contextLength is ignored: it assumes 200k). It
      // keeps the output limit free twice (the answer, and as much again before it compacts), and
      // refuses to start where that leaves no room ("max_tokens is larger than context_length"):
      // an 8k model's whole-window limit did. A quarter of the window leaves half for the prompt.
      const file = writeConfig(t.configDir, 'continue.yaml', {
        name: 'Hearth',
        version: '1.0.0',
        schema: 'v1',
        models: [
          {
            name: `Hearth ${t.model}`,
            provider: 'openai',
            model: t.model,
            apiBase: `${t.url}/v1`,
            apiKey: t.key,
            roles: ['chat', 'edit', 'apply', 'summarize'],
            capabilities: ['tool_use'],
            defaultCompletionOptions: { contextLength: t.contextLength, maxTokens: Math.min(t.maxCompletionTokens, Math.floor(t.contextLength / 4)) },
          },
        ],
      })
      return { env: {}, unset: [], args: ['--config', file] }
    },
  },
  {
    id: 'kilo',
    name: 'Kilo',
    program: 'kilo',
    // 7.8.1 names platform binaries the registry does not have; 7.7.7's are there.
    install: 'npm install -g @kilocode/cli@7.7.7',
    api: 'OpenAI chat completions',
    launch: (t) => {
      // Inline, in the environment: a KILO_CONFIG file would be rewritten by Kilo, and without
      // either Kilo writes ~/.config/kilo/kilo.json.
      const config = {
        $schema: 'https://app.kilo.ai/config.json',
        ...openCodeProvider(t),
        enabled_providers: ['hearth'],
        share: 'disabled',
        autoupdate: false,
      }
      // Kept as a file too, for the record (Kilo reads the variable, never the file).
      const file = writeConfig(t.configDir, 'kilo.json', config)
      const env: Record<string, string> = {
        KILO_CONFIG_CONTENT: readFileSync(file, 'utf8'),
        HEARTH_AGENT_KEY: t.key,
        KILO_DISABLE_MODELS_FETCH: '1',
        KILO_DISABLE_AUTOUPDATE: '1',
      }
      if (t.maxCompletionTokens > KILO_OUTPUT_MAX) env.KILO_EXPERIMENTAL_OUTPUT_TOKEN_MAX = String(t.maxCompletionTokens)
      return { env, unset: [], args: [] }
    },
  },
  {
    id: 'cline',
    name: 'Cline',
    program: 'cline',
    install: 'npm install -g cline',
    api: 'OpenAI chat completions',
    launch: (t) => {
      // Cline takes its provider from files only (no variable names a base URL): a data folder of
      // its own, in Hearth's, holds them (and its sessions), and --data-dir keeps it off ~/.cline.
      const dataDir = join(t.configDir, 'cline')
      const settings = join(dataDir, 'settings')
      const provider = {
        provider: 'openai-compatible',
        apiKey: t.key,
        model: t.model,
        baseUrl: `${t.url}/v1`,
        contextWindow: t.contextLength,
        maxTokens: t.maxCompletionTokens,
      }
      writeConfig(settings, 'providers.json', {
        version: 1,
        lastUsedProvider: 'openai-compatible',
        modes: {},
        providers: { 'openai-compatible': { tokenSource: 'manual', updatedAt: new Date(0).toISOString(), settings: provider } },
      })
      // The model's limits, where Cline reads them (it caps its own request at 32,000 at most).
      writeConfig(settings, 'models.json', {
        version: 1,
        providers: {
          'openai-compatible': {
            models: {
              [t.model]: {
                id: t.model,
                name: t.model,
                contextWindow: t.contextLength,
                maxInputTokens: t.contextLength,
                maxTokens: t.maxCompletionTokens,
                capabilities: ['tools', 'streaming'],
              },
            },
          },
        },
      })
      writeConfig(settings, 'global-settings.json', { telemetryOptOut: true, autoUpdateEnabled: false })
      return { env: {}, unset: [], args: ['--data-dir', dataDir, '-P', 'openai-compatible', '-m', t.model] }
    },
  },
  {
    id: 'aider',
    name: 'Aider',
    program: 'aider',
    install: 'python3 -m pip install aider-chat   (or: pipx install aider-chat)',
    api: 'OpenAI chat completions',
    launch: (t) => {
      const model = `openai/${t.model}`
      // The window and output for its budgeting (litellm's format), and the output limit sent:
      // Aider sends none of its own.
      const metadata = writeConfig(t.configDir, 'aider.model.metadata.json', {
        [model]: {
          max_input_tokens: t.contextLength,
          max_tokens: t.maxCompletionTokens,
          max_output_tokens: t.maxCompletionTokens,
          input_cost_per_token: 0,
          output_cost_per_token: 0,
          litellm_provider: 'openai',
          mode: 'chat',
        },
      })
      const settings = writeConfig(t.configDir, 'aider.model.settings.yml', [
        { name: model, edit_format: 'diff', extra_params: { max_tokens: t.maxCompletionTokens } },
      ])
      return {
        // AIDER_* variables are its flags: the key stays out of the process list.
        env: { AIDER_OPENAI_API_BASE: `${t.url}/v1`, AIDER_OPENAI_API_KEY: t.key },
        unset: [],
        args: ['--model', model, '--model-metadata-file', metadata, '--model-settings-file', settings, '--no-show-model-warnings', '--no-check-update'],
      }
    },
  },
]

export function agentById(id: string): AgentSetup | undefined {
  return AGENTS.find((a) => a.id === id)
}
