/**
 * The JSON the web UI reads, declared in one place. The server's builders are typed against these
 * declarations, and the renderer imports this module with `import type` only, so both sides are
 * checked against the same shapes and no server code reaches the browser bundle. Imports here are
 * types from below (engines, models, media) or pure response modules, never routes, so nothing cycles.
 */
import type { Capability, ModelKind } from '../../models/catalog/model-kinds.ts'
import type { ModelSourceKind } from '../../models/catalog/model-record.ts'
import type { RecommendedModel } from '../../models/catalog/recommended-models.ts'
import type { DownloadFileSnapshot, DownloadState } from '../../models/downloads/managed-download.ts'
import type { RemoteHealth } from '../../engines/remote/remote-pool.ts'

export type { Capability, DownloadState, ModelKind, ModelSourceKind, RecommendedModel, RemoteHealth }
export type { ChatChunk } from './protocols/openai/chat-response.ts'
export type { TimedWord, TranscriptEvent } from './protocols/openai/speech-response.ts'
export type { RequestRecord } from './http/request-history.ts'

/** A model in `GET /v1/models`: OpenAI's fields, the contract's limits and pricing, our additions. */
export interface ModelObject {
  id: string
  object: 'model'
  created: number
  owned_by: string
  context_length: number
  max_completion_tokens: number
  pricing: { prompt: string; completion: string }
  capabilities: Capability[]
  state: 'loaded' | 'available'
  /** Only on models served by other machines: whether any copy answers. */
  remote?: { health: RemoteHealth }
  /** Only on models another program downloaded (served where they lie, read only): which one. */
  source?: ModelSourceKind
}

/** One copy of a remote model, as `GET /api/models` shows it (never its key). */
export interface ReplicaObject {
  base_url: string
  model: string
  health: RemoteHealth
  problem: string | null
  busy: number
}

/** A model in `GET /api/models` (and what an import answers with): the /v1 object and more. */
export interface ManagedModel extends ModelObject {
  /** The model file; null for remote models. */
  file: string | null
  /** The folder of the other program's store the file lies in; absent for Hearth's own folder. */
  source_dir?: string
  /** The file has no chat template: the format Hearth chose from its architecture and vocabulary (`gemma`, `llama3`, `phi3`, `chatml`). */
  template_guessed?: string
  replicas?: ReplicaObject[]
  /** A pooled model: the machines that lend it memory (docs/pool.md); `devices` says where its parts run once loaded. */
  pool?: string[]
  /** Why a pooled model cannot run now (a lender dropped off, refused or cannot be reached), as its last load found it; null once it loads. */
  pool_problem?: string | null
  mmproj: string | null
  kind: ModelKind
  architecture: string | null
  size_bytes: number
  devices: string[]
}

/** A file in the models folder (or another program's store) that cannot be served, and why. */
export interface ModelProblem {
  id: string
  file: string
  problem: string
  source?: ModelSourceKind
}

/** `GET /api/lend`: what this machine lends to pooled models, and to whom. */
export interface LendStatus {
  object: 'lend'
  /** A borrower must run the same llama.cpp: the RPC protocol changes with it. */
  llama_cpp_commit: string
  rpc_protocol: string
  running: boolean
  /** `restarting`: its rpc-server died and starts again in a moment; `stopped`: it died in a loop, `problem` says how. */
  state: 'running' | 'restarting' | 'stopped'
  /** Times its rpc-server died without being asked to, and times it was started again after. */
  crashes: number
  restarts: number
  /** How its rpc-server last died (unix seconds), and who was borrowing then; null: it never has. */
  last_exit: { at: number; reason: string; borrowers: string[] } | null
  /** Why it stopped lending; null while it lends. */
  problem: string | null
  memory_cap_mib: number | null
  devices: Array<{ name: string; description: string; total_mib: number; free_mib: number }>
  borrowers: Array<{ address: string; key: string; since: number }>
}

/** `GET /api/models`. */
export interface ModelFolderListing {
  models_dir: string
  catalog_problem: string | null
  models: ManagedModel[]
  problems: ModelProblem[]
}

/** An entry of `GET /api/recommended`; `installed` when the folder already has it (by id or file). */
export type RecommendedEntry = RecommendedModel & { installed: boolean }

/** A download on the wire. `bytes` and `total` cover the model and its projector. */
export interface DownloadObject {
  id: string
  /** `file`: files from Hugging Face or a URL; `registry`: a model pulled by its Ollama name (`source`, served as `model_id`). */
  kind: 'file' | 'registry'
  /** The registry a pull by name comes from (`registry.ollama.ai` is Ollama's library); null for files. */
  registry: string | null
  source: string
  file: string
  state: DownloadState
  bytes: number
  total: number | null
  rate_bps: number
  eta_seconds: number | null
  error: string | null
  error_code: string | null
  /** The id the model will have in the folder. */
  model_id: string
  mmproj: string | null
  mmproj_source: string | null
  /** A pull by name lists its blobs (`source` the digest; `layer` for the template, system prompt, config …). */
  files: DownloadFileSnapshot[]
  /** Unix seconds. */
  created: number
  finished: number | null
}

/** `GET /api/server`: where the server listens and whether it wants a key. */
export interface ServerInfo {
  /** The base URL programs on this computer use. */
  address: string
  host: string
  port: number
  /** True when other computers can reach the server (it listens beyond loopback). */
  lan: boolean
  /** Addresses other computers would use, when lan is on. */
  lan_addresses: string[]
  auth: boolean
  key_file: string | null
  /** Where Ollama's API is served keyless for this computer's programs (`--ollama-port`); null when off. */
  ollama_url: string | null
  /** Why Ollama's API is not served where it was asked for (Ollama itself holds its port, say); null otherwise. */
  ollama_note: string | null
  /** What this computer lends to other Hearths' pooled models (`--lend`); null when it lends nothing. */
  lending: { memory_cap_mib: number | null; borrowers: number } | null
}

/**
 * What runs chat and embeddings: llama.cpp built here (commit, CPU features, GPU toolkit), or
 * nothing yet; `not_built` says, one sentence per engine, what cannot run until `npm run
 * build:engines` has built it (the words a request for such a model gets with its 503).
 */
export type EngineInfo = {
  not_built: string[]
  /**
   * Install's self-test of each engine built here (every weight type run at 1 and 2 threads), in
   * one line, and what a build was made without because the test crashed with it (AMX, AVX512, …).
   */
  self_tests: Array<{ engine: 'llama.cpp' | 'whisper.cpp'; passed: boolean | null; verdict: string; withheld: string[] }>
  /** Models that crashed llama.cpp on this CPU while loading or on their first batch, and what Hearth did about it. */
  cpu_fallbacks: Array<{
    model: string
    weight_type: string
    signal: string
    phase: 'loading' | 'first batch'
    without: string
    recovered: boolean
    at: string
  }>
} & (
  | { name: 'llama-server'; commit: string; cpu_features: string[]; gpu_backend: string }
  | { name: 'not-built'; commit: null; cpu_features: string[]; gpu_backend: 'none' }
)

/** `GET /api/system`: devices, memory and its budget, and what is loaded at what real cost. */
export interface SystemInfo {
  backend: string
  engine: EngineInfo
  devices: Array<{ name: string; type: string; backend: string; memory_bytes: number | null }>
  memory: { total_bytes: number; free_bytes: number; budget_bytes: number; budget_source: 'free memory' | 'settings' }
  threads: number | undefined
  loaded: Array<{
    id: string
    pid: number | null
    devices: string[]
    engine: 'llama-server' | 'whisper-server' | 'remote'
    estimate_bytes: number
    rss_bytes: number
    busy: boolean
    waiting: number
  }>
}

/** `GET /health`: answered without a key. */
export interface HealthBody {
  status: 'ok'
  loaded_models: string[]
  auth_required: boolean
}

/** A segment of `verbose_json` (with `timestamp_granularities[]=segment`), as the UI times subtitles. */
export interface TimedSegment {
  /** Seconds from the start of the recording. */
  start: number
  end: number
  text: string
}

/** What an attached document was read as: plain text, Markdown, a PDF's text layer, a Word document's text. */
export type DocumentFormat = 'text' | 'markdown' | 'pdf' | 'docx'

/** `POST /v1/files` (200) and `GET /v1/files/:id`: OpenAI's file object, for a document read and kept for chats. */
export interface FileObject {
  id: string
  object: 'file'
  /** Size of the uploaded file. */
  bytes: number
  /** Unix seconds. */
  created_at: number
  expires_at: null
  /** The file's name as uploaded. */
  filename: string
  purpose: string
  status: 'processed'
  status_details: null
}

/** `GET /v1/files`. */
export interface FileList {
  object: 'list'
  data: FileObject[]
  first_id: string | null
  last_id: string | null
  has_more: boolean
}

/** What a key may do with MCP servers (docs/mcp.md). */
export type McpPermissionName = 'none' | 'use' | 'manage'

/** A tool of an MCP server; `read_only` from the tool's annotations (readOnlyHint). */
export interface McpToolView {
  name: string
  title?: string
  description?: string
  input_schema: Record<string, unknown>
  read_only?: boolean
}

/** An MCP server of mcp.json, as /api/mcp shows it: env and header names, never their values. */
export interface McpServerView {
  name: string
  transport: 'stdio' | 'http'
  command?: string
  args?: string[]
  env_names?: string[]
  cwd?: string
  url?: string
  header_names?: string[]
  enabled: boolean
  timeout_seconds: number
  /** `off`: disabled; `stopped`: enabled, not started (it starts on first need). */
  state: 'off' | 'stopped' | 'starting' | 'ready' | 'failed'
  error: string | null
  tools: McpToolView[]
  /** The last lines the server wrote to stderr (or its connection's errors), oldest first. */
  log_tail: string[]
}

/** `GET /api/mcp/servers`; with permission "none" the list is empty. */
export interface McpServersListing {
  servers: McpServerView[]
  permission: McpPermissionName
  config_file: string
  config_error: string | null
}

/** `POST /api/mcp/call`: the tool's MCP content blocks, and their text for a model to read. */
export interface McpCallResponse {
  server: string
  tool: string
  content: unknown[]
  text: string
  is_error: boolean
  duration_ms: number
}

/** An MCP tool call the Responses API's loop ran (or could not run). */
export interface McpCallItem {
  type: 'mcp_call'
  id: string
  server_label: string
  name: string
  arguments: string
  output: string | null
  /** What went wrong, as a sentence (openai-node reads it as a string). */
  error: string | null
  approval_request_id: string | null
  status: 'in_progress' | 'calling' | 'completed' | 'failed' | 'incomplete'
}

/**
 * An output item of a `/v1/responses` stream, as far as the web UI reads it. The UI keeps the items
 * whole, with the fields not named here, and sends them back as the conversation.
 */
export type ResponseItem =
  | { type: 'message'; id: string; role?: 'assistant'; status?: string; content: Array<{ type: 'output_text'; text: string }> }
  | { type: 'reasoning'; id: string; content?: Array<{ type: 'reasoning_text'; text: string }> }
  | { type: 'function_call'; id: string; call_id: string; name: string; arguments: string }
  | { type: 'mcp_list_tools'; id: string }
  | { type: 'mcp_approval_request'; id: string; server_label: string; name: string; arguments: string }
  | McpCallItem
  | {
      type: 'file_search_call'
      id: string
      results: Array<{ file_id: string; filename: string; text: string; score: number | null; attributes: { citation: number } }> | null
    }

/** A `/v1/responses` stream event, as far as the web UI reads it. */
export interface ResponseEvent {
  type: string
  item?: ResponseItem
  item_id?: string
  delta?: string
  /** `response.output_text.annotation.added`: a file citation, at `index` in the answer's text. */
  annotation?: { type: string; index: number; file_id?: string; quote?: string }
  response?: {
    status: string
    incomplete_details: { reason: string } | null
    usage: { input_tokens: number; output_tokens: number } | null
  }
}
