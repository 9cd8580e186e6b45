/**
 * Where the server's settings come from, strongest first: command-line flags, environment
 * variables, the settings file, defaults. Every value is checked once here, so the rest of the
 * server can trust its config.
 */
import { readFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { z } from 'zod'
import { durationMs } from './protocols/ollama/ollama-keep-alive.ts'
import { defaultModelSources, type ModelSourceDirs } from '../../models/sources/default-source-dirs.ts'
import type { ModelSourceKind } from '../../models/catalog/model-record.ts'
import { RETRIEVAL_METHODS, type RetrievalMethod } from './services/documents/document-retrieval.ts'

export interface ServerSettings {
  host: string
  port: number
  dataDir: string
  modelsDir: string
  /** Keys given explicitly; when empty (and auth is on) a key is generated and kept in dataDir. */
  apiKeys: string[]
  auth: boolean
  threads: number
  /** Layers to offload to a GPU; -1 offloads all llama.cpp can. */
  gpuLayers: number
  /**
   * cpu keeps every layer off the GPU; auto uses the GPU the llama.cpp build was made for, if any.
   * cuda and vulkan (which once chose a prebuilt build) now mean the same as auto.
   */
  backend: 'auto' | 'cpu' | 'cuda' | 'vulkan'
  /** Requests a chat model decodes together; undefined = 4 with a GPU, 2 on the CPU. */
  parallel: number | undefined
  requestTimeoutMs: number
  maxQueuePerModel: number
  /** A loaded model idle this long is unloaded; 0 keeps models loaded. Catalog `ttl` overrides it. */
  idleTtlMs: number
  /** Bytes the loaded models may use together; undefined = 90 % of free RAM plus what they use. */
  memoryBudgetBytes: number | undefined
  bodyLimitBytes: number
  /** Host names besides loopback and the bound address that requests may use (DNS rebinding defence). */
  allowedHosts: string[]
  settingsFile: string
  /**
   * Page origins allowed to call the API from another origin (exact, or patterns with `*` such as
   * `chrome-extension://*`); the desktop app adds its own `app://hearth`.
   */
  corsOrigins?: string[]
  /** GET /metrics without a key (for a local Prometheus that cannot send one). */
  metricsPublic?: boolean
  /** Speech skips silence unless a request says otherwise (needs a voice-activity model in the folder). */
  vad?: boolean
  /** The longest audio taken, decoded; longer uploads get 400. Default 3 hours. */
  maxAudioSeconds?: number
  /** How often remote models' servers are checked. Default 10 s. */
  remoteCheckMs?: number
  /**
   * How old a folder listing a request may use without checking its model's file; default 1 s.
   * Only tests change it (HEARTH_LISTING_MAX_AGE_MS, left out of the usage): 0 checks the file on every request.
   */
  listingMaxAgeMs?: number
  /**
   * A second port, on loopback only, that speaks what Ollama's does (11434 for the clients that
   * assume Ollama's), where a program without a key gets in; undefined = off.
   */
  ollamaPort?: number
  /** The port is Ollama's default, taken only where nothing holds it (Ollama itself, say): not an error when it cannot be had. */
  ollamaPortIfFree?: boolean
  /** Page origins the Ollama port lets in besides Ollama's defaults (`OLLAMA_ORIGINS`). */
  ollamaOrigins?: string[]
  /** How long a model stays loaded after an Ollama API request that does not say (`OLLAMA_KEEP_ALIVE`). */
  ollamaKeepAliveMs?: number
  /** The context a model gets where models.json sets none (`OLLAMA_CONTEXT_LENGTH`), up to what it was trained with. */
  defaultContextLength?: number
  /** The other programs' model stores served in place (read only), each where it keeps its models. */
  modelSources: ModelSourceDirs
  /** How the parts of a long document are found: by words and meaning together (default), or one alone. */
  retrieval: RetrievalMethod
  /** Lend this machine's memory to other Hearths' pooled models (docs/pool.md); off by default. */
  lend?: boolean
  /** The most memory lent, in MiB; undefined lends what the device has free. */
  lendMemoryMiB?: number
}

const SOURCE_KINDS: readonly ModelSourceKind[] = ['ollama', 'lmstudio', 'huggingface', 'llama.cpp']

/** Three hours: about 700 MB of decoded samples on disk while whisper works through them. */
export const DEFAULT_MAX_AUDIO_SECONDS = 3 * 60 * 60

const settingsFileSchema = z.looseObject({
  host: z.string().min(1).optional(),
  port: z.int().min(0).max(65535).optional(),
  models_dir: z.string().min(1).optional(),
  api_keys: z.array(z.string().min(8)).optional(),
  auth: z.boolean().optional(),
  threads: z.int().min(1).max(256).optional(),
  gpu_layers: z.int().min(-1).optional(),
  parallel: z.int().min(1).max(64).optional(),
  backend: z.enum(['auto', 'cpu', 'cuda', 'vulkan']).optional(),
  request_timeout_seconds: z.number().positive().optional(),
  max_queue_per_model: z.int().min(0).optional(),
  idle_ttl_seconds: z.number().min(0).optional(),
  memory_budget_mb: z.number().positive().optional(),
  body_limit_mb: z.number().positive().optional(),
  allowed_hosts: z.array(z.string().min(1)).optional(),
  cors_origins: z.array(z.string().min(1)).optional(),
  metrics_public: z.boolean().optional(),
  vad: z.boolean().optional(),
  max_audio_minutes: z.number().positive().optional(),
  remote_check_seconds: z.number().min(0.1).max(3600).optional(),
  ollama_port: z.int().min(0).max(65535).nullable().optional(),
  retrieval: z.enum(RETRIEVAL_METHODS).optional(),
  lend: z.boolean().optional(),
  lend_memory_mb: z.int().min(1).optional(),
  /** Per store: false turns it off, a folder (or folders) replaces where it is looked for. */
  model_sources: z
    .partialRecord(z.enum(['ollama', 'lmstudio', 'huggingface', 'llama.cpp']), z.union([z.boolean(), z.string().min(1), z.array(z.string().min(1))]))
    .optional(),
})

const FLAGS = {
  host: { type: 'string' },
  port: { type: 'string' },
  'models-dir': { type: 'string' },
  'data-dir': { type: 'string' },
  settings: { type: 'string' },
  'api-key': { type: 'string', multiple: true },
  'no-auth': { type: 'boolean' },
  threads: { type: 'string' },
  'gpu-layers': { type: 'string' },
  parallel: { type: 'string' },
  backend: { type: 'string' },
  'request-timeout': { type: 'string' },
  'max-queue': { type: 'string' },
  'idle-ttl': { type: 'string' },
  'memory-budget': { type: 'string' },
  vad: { type: 'boolean' },
  'max-audio-minutes': { type: 'string' },
  'ollama-port': { type: 'string' },
  'model-sources': { type: 'string' },
  lend: { type: 'boolean' },
  'lend-memory': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const

export const USAGE = `Usage: npm run serve -- [flags]

  --host HOST            address to bind (default 127.0.0.1)              HEARTH_HOST
  --port PORT            port, 0 picks a free one (default 8181)          HEARTH_PORT
  --models-dir DIR       the models folder (default <data-dir>/models)    HEARTH_MODELS_DIR
  --data-dir DIR         settings, API key (default ~/.hearth)            HEARTH_DATA_DIR
  --settings FILE        settings file (default <data-dir>/settings.json) HEARTH_SETTINGS
  --api-key KEY          accept this key; repeat for more                 HEARTH_API_KEY (comma-separated)
  --no-auth              accept requests without a key (logged)           HEARTH_NO_AUTH=1
  --threads N            inference threads per model                      HEARTH_THREADS
  --gpu-layers N         layers on the GPU, -1 = all (default)            HEARTH_GPU_LAYERS
  --backend B            auto, cpu, cuda or vulkan (default auto)         HEARTH_BACKEND
  --parallel N           requests a chat model decodes at once            HEARTH_PARALLEL
                         (default 4 with a GPU, 2 on the CPU)
  --request-timeout S    seconds before a request gets 408 (default 600)  HEARTH_REQUEST_TIMEOUT
  --max-queue N          requests waiting per model (default 16)          HEARTH_MAX_QUEUE
  --idle-ttl S           unload a model idle this long, 0 = never (600)   HEARTH_IDLE_TTL
  --memory-budget MB     memory for loaded models (default: 90 % free)    HEARTH_MEMORY_BUDGET
  --vad                  speech skips silence (needs a Silero VAD model)  HEARTH_VAD=1
  --max-audio-minutes M  longest audio taken (default 180)                HEARTH_MAX_AUDIO_MINUTES
  --ollama-port PORT     serve what Ollama serves on 127.0.0.1:PORT, where  HEARTH_OLLAMA_PORT
                         programs may come without a key (default 11434,
                         Ollama's own, where it is free; off turns it off)
  --model-sources LIST   the other programs' model folders to serve in    HEARTH_MODEL_SOURCES
                         place: ollama,lmstudio,huggingface,llama.cpp
                         (default all of them), or none
  --lend                 lend this machine's memory to other Hearths'     HEARTH_LEND=1
                         pooled models, through this port and keys that
                         may lend (docs/pool.md)
  --lend-memory MB       the most memory lent (default: all free)         HEARTH_LEND_MEMORY
`

export class SettingsError extends Error {
  override name = 'SettingsError'
}

export function defaultThreads(cpuCount: number): number {
  // Leave a core for the server and the OS; llama.cpp gains little past the physical cores.
  return Math.max(1, Math.min(8, cpuCount - 1))
}

export function resolveSettings(argv: string[], env: NodeJS.ProcessEnv, cpuCount: number): { settings: ServerSettings; help: boolean } {
  let flags
  try {
    flags = parseArgs({ args: argv, options: FLAGS, strict: true, allowPositionals: false }).values
  } catch (e) {
    throw new SettingsError(`${(e as Error).message}\n\n${USAGE}`)
  }
  const dataDir = resolve(flags['data-dir'] ?? env.HEARTH_DATA_DIR ?? join(homedir(), '.hearth'))
  const settingsFile = resolve(flags.settings ?? env.HEARTH_SETTINGS ?? join(dataDir, 'settings.json'))
  const file = readSettingsFile(settingsFile)

  const envKeys = env.HEARTH_API_KEY?.split(',')
    .map((k) => k.trim())
    .filter(Boolean)
  const settings: ServerSettings = {
    host: flags.host ?? env.HEARTH_HOST ?? file.host ?? '127.0.0.1',
    port: integer('port', flags.port ?? env.HEARTH_PORT, 0, 65535) ?? file.port ?? 8181,
    dataDir,
    modelsDir: resolve(flags['models-dir'] ?? env.HEARTH_MODELS_DIR ?? file.models_dir ?? join(dataDir, 'models')),
    apiKeys: flags['api-key'] ?? envKeys ?? file.api_keys ?? [],
    auth: !(flags['no-auth'] ?? isTrue(env.HEARTH_NO_AUTH) ?? file.auth === false),
    threads: integer('threads', flags.threads ?? env.HEARTH_THREADS, 1, 256) ?? file.threads ?? defaultThreads(cpuCount),
    gpuLayers: integer('gpu-layers', flags['gpu-layers'] ?? env.HEARTH_GPU_LAYERS, -1, 100_000) ?? file.gpu_layers ?? -1,
    parallel:
      integer('parallel', flags.parallel ?? env.HEARTH_PARALLEL, 1, 64) ?? file.parallel ?? integer('parallel', nonEmpty(env.OLLAMA_NUM_PARALLEL), 1, 64),
    backend: backendName(flags.backend ?? env.HEARTH_BACKEND) ?? file.backend ?? 'auto',
    requestTimeoutMs: 1000 * (positive('request-timeout', flags['request-timeout'] ?? env.HEARTH_REQUEST_TIMEOUT) ?? file.request_timeout_seconds ?? 600),
    maxQueuePerModel:
      integer('max-queue', flags['max-queue'] ?? env.HEARTH_MAX_QUEUE, 0, 100_000) ??
      file.max_queue_per_model ??
      integer('max-queue', nonEmpty(env.OLLAMA_MAX_QUEUE), 0, 100_000) ??
      16,
    idleTtlMs: 1000 * (nonNegative('idle-ttl', flags['idle-ttl'] ?? env.HEARTH_IDLE_TTL) ?? file.idle_ttl_seconds ?? 600),
    memoryBudgetBytes: mebibytes(positive('memory-budget', flags['memory-budget'] ?? env.HEARTH_MEMORY_BUDGET) ?? file.memory_budget_mb),
    bodyLimitBytes: Math.round((file.body_limit_mb ?? 30) * 1024 * 1024),
    allowedHosts:
      env.HEARTH_ALLOWED_HOSTS?.split(',')
        .map((h) => h.trim())
        .filter(Boolean) ??
      file.allowed_hosts ??
      [],
    corsOrigins:
      env.HEARTH_CORS_ORIGINS?.split(',')
        .map((o) => o.trim())
        .filter(Boolean) ??
      file.cors_origins ??
      [],
    metricsPublic: isTrue(env.HEARTH_METRICS_PUBLIC) ?? file.metrics_public ?? false,
    vad: flags.vad ?? isTrue(env.HEARTH_VAD) ?? file.vad ?? false,
    remoteCheckMs: 1000 * (positive('remote-check-seconds', env.HEARTH_REMOTE_CHECK_SECONDS) ?? file.remote_check_seconds ?? 10),
    listingMaxAgeMs: nonNegative('listing-max-age-ms', env.HEARTH_LISTING_MAX_AGE_MS),
    maxAudioSeconds:
      60 *
      (positive('max-audio-minutes', flags['max-audio-minutes'] ?? env.HEARTH_MAX_AUDIO_MINUTES) ?? file.max_audio_minutes ?? DEFAULT_MAX_AUDIO_SECONDS / 60),
    ...ollamaPortOf(flags['ollama-port'] ?? env.HEARTH_OLLAMA_PORT, file.ollama_port, env.OLLAMA_HOST),
    ...ollamaEnvironment(env),
    modelSources: modelSources(flags['model-sources'] ?? env.HEARTH_MODEL_SOURCES, file.model_sources, env),
    retrieval: retrievalMethod(env.HEARTH_RETRIEVAL) ?? file.retrieval ?? 'hybrid',
    lend: flags.lend ?? isTrue(env.HEARTH_LEND) ?? file.lend ?? false,
    lendMemoryMiB: integer('lend-memory', flags['lend-memory'] ?? env.HEARTH_LEND_MEMORY, 1, 1 << 30) ?? file.lend_memory_mb,
    settingsFile,
  }
  if (settings.lend && !settings.auth) {
    // rpc-server trusts whoever reaches it; only a key may open the way.
    throw new SettingsError('--lend needs keys: a borrower must bring a key that may lend. Drop --no-auth')
  }
  if (!settings.auth && !isLoopback(settings.host)) {
    throw new SettingsError(
      `refusing to serve ${settings.host} without an API key: anyone on the network could use it. ` + 'Drop --no-auth (a key is generated), or bind 127.0.0.1',
    )
  }
  for (const key of settings.apiKeys) {
    if (key.length < 8) throw new SettingsError('an API key must be at least 8 characters long')
  }
  return { settings, help: flags.help ?? false }
}

/** Ollama's own default port, where the programs written for it look. */
export const OLLAMA_DEFAULT_PORT = 11434

/**
 * The Ollama port: a flag or HEARTH_OLLAMA_PORT (a port, or `off`), the settings file's
 * `ollama_port` (null is off), the port of OLLAMA_HOST, or Ollama's own where it is free.
 */
function ollamaPortOf(
  asked: string | undefined,
  file: number | null | undefined,
  ollamaHost: string | undefined,
): Pick<ServerSettings, 'ollamaPort' | 'ollamaPortIfFree'> {
  if (asked !== undefined && /^(off|none|false|no)$/i.test(asked.trim())) return {}
  const port = integer('ollama-port', asked, 0, 65535)
  if (port !== undefined) return { ollamaPort: port }
  if (file === null) return {}
  if (file !== undefined) return { ollamaPort: file }
  const host = nonEmpty(ollamaHost)
  if (host !== undefined) {
    // OLLAMA_HOST: [scheme://]host[:port]; its address is not taken (the port stays on loopback, keyless).
    const match = /^(?:\w+:\/\/)?(?:\[[^\]]*\]|[^:/]*)(?::(\d+))?\/?$/.exec(host.trim())
    if (!match) throw new SettingsError(`OLLAMA_HOST must be host[:port], got "${host}"`)
    return { ollamaPort: integer('ollama-port', match[1], 0, 65535) ?? OLLAMA_DEFAULT_PORT }
  }
  return { ollamaPort: OLLAMA_DEFAULT_PORT, ollamaPortIfFree: true }
}

/** The OLLAMA_* settings a person who used Ollama already has, where Hearth has their like (docs/ollama.md has the table). */
function ollamaEnvironment(env: NodeJS.ProcessEnv): Pick<ServerSettings, 'ollamaOrigins' | 'ollamaKeepAliveMs' | 'defaultContextLength'> {
  const origins = nonEmpty(env.OLLAMA_ORIGINS)
    ?.split(',')
    .map((o) => o.trim())
    .filter(Boolean)
  const keepAlive = nonEmpty(env.OLLAMA_KEEP_ALIVE)
  const context = integer('OLLAMA_CONTEXT_LENGTH', nonEmpty(env.OLLAMA_CONTEXT_LENGTH), 16, 1 << 24)
  return {
    ...(origins?.length ? { ollamaOrigins: origins } : {}),
    ...(keepAlive !== undefined ? { ollamaKeepAliveMs: keepAliveSetting(keepAlive) } : {}),
    ...(context !== undefined ? { defaultContextLength: context } : {}),
  }
}

function keepAliveSetting(raw: string): number {
  const ms = durationMs(raw)
  if (ms === undefined) throw new SettingsError(`OLLAMA_KEEP_ALIVE must be a duration such as 5m, 1h, 300 (seconds) or -1 (for ever), got "${raw}"`)
  return ms
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value
}

function retrievalMethod(value: string | undefined): RetrievalMethod | undefined {
  if (value === undefined || value === '') return undefined
  if (!(RETRIEVAL_METHODS as readonly string[]).includes(value))
    throw new SettingsError(`HEARTH_RETRIEVAL must be one of ${RETRIEVAL_METHODS.join(', ')}; got '${value}'`)
  return value as RetrievalMethod
}

/**
 * Which stores are read, and where: all of them where the programs keep their models by default;
 * a list (`--model-sources ollama,huggingface`, or `none`) keeps only those; the settings file turns
 * one off (`false`) or names its folder.
 */
function modelSources(list: string | undefined, file: z.infer<typeof settingsFileSchema>['model_sources'], env: NodeJS.ProcessEnv): ModelSourceDirs {
  const wanted = list === undefined ? SOURCE_KINDS : list.trim() === 'none' || list.trim() === '' ? [] : list.split(',').map((s) => s.trim())
  for (const kind of wanted) {
    if (!SOURCE_KINDS.includes(kind as ModelSourceKind)) throw new SettingsError(`--model-sources takes ${SOURCE_KINDS.join(', ')} or none, got "${kind}"`)
  }
  const defaults = defaultModelSources(env)
  const dirs: ModelSourceDirs = {}
  for (const kind of wanted as ModelSourceKind[]) {
    const setting = file?.[kind]
    if (setting === false) continue
    dirs[kind] = typeof setting === 'string' ? [setting] : Array.isArray(setting) ? setting : (defaults[kind] ?? [])
  }
  return dirs
}

function readSettingsFile(path: string): z.infer<typeof settingsFileSchema> {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return {}
    throw new SettingsError(`cannot read the settings file ${path}: ${(e as Error).message}`)
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    throw new SettingsError(`the settings file ${path} is not valid JSON: ${(e as Error).message}`)
  }
  const parsed = settingsFileSchema.safeParse(json)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    throw new SettingsError(`the settings file ${path} has a bad value at "${issue?.path.join('.')}": ${issue?.message}`)
  }
  return parsed.data
}

function integer(name: string, raw: string | undefined, min: number, max: number): number | undefined {
  if (raw === undefined) return undefined
  const n = Number(raw)
  if (!Number.isInteger(n) || n < min || n > max) throw new SettingsError(`--${name} must be an integer from ${min} to ${max}, got "${raw}"`)
  return n
}

function positive(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined
  const n = Number(raw)
  if (!Number.isFinite(n) || n <= 0) throw new SettingsError(`--${name} must be a positive number, got "${raw}"`)
  return n
}

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || host.startsWith('127.')
}

function backendName(raw: string | undefined): ServerSettings['backend'] | undefined {
  if (raw === undefined) return undefined
  if (raw === 'auto' || raw === 'cpu' || raw === 'cuda' || raw === 'vulkan') return raw
  throw new SettingsError(`--backend must be auto, cpu, cuda or vulkan, got "${raw}"`)
}

function nonNegative(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined
  const n = Number(raw)
  if (!Number.isFinite(n) || n < 0) throw new SettingsError(`--${name} must be a number ≥ 0, got "${raw}"`)
  return n
}

function mebibytes(mb: number | undefined): number | undefined {
  return mb === undefined ? undefined : Math.round(mb * 1024 * 1024)
}

function isTrue(raw: string | undefined): boolean | undefined {
  if (raw === undefined || raw === '') return undefined
  return raw === '1' || raw.toLowerCase() === 'true'
}
