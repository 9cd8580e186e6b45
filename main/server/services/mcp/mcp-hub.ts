/**
 * The MCP servers of mcp.json and their lifecycle: each starts on first need (a start, a tool
 * list, a call), keeps its last 50 log lines, and is marked failed when it exits or its connection
 * breaks; the next need starts it again, so a crash never takes Hearth down. Failures leave as
 * ApiErrors (404/409/502/504) for the routes. Permissions are the routes' business, not this one's.
 */
import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { ApiError, invalidRequest } from '../api-error.ts'
import { LineRing } from './line-ring.ts'
import {
  configStamp,
  ENTRY_FIELDS,
  entryProblem,
  mcpConfigPath,
  readMcpConfig,
  SERVER_NAME,
  SERVER_NAME_RULE,
  writeMcpConfig,
  type McpConfigState,
  type McpServerConfig,
} from './mcp-config.ts'
import { describeError, McpConnection, startSeconds, type McpToolDefinition } from './mcp-connection.ts'
import { callCancelled, configBroken, serverDisabled, serverFailed, serverNotFound, shuttingDown, toolNotFound, toolTimeout } from './mcp-errors.ts'
import { summarizeContent } from './mcp-content.ts'

export type { McpToolDefinition } from './mcp-connection.ts'
export type { McpServerConfig } from './mcp-config.ts'

export interface McpCallResult {
  content: unknown[]
  text: string
  isError: boolean
  durationMs: number
}

export type McpServerState = 'off' | 'stopped' | 'starting' | 'ready' | 'failed'

/** A server as the routes show it: its settings (with env and header values) and how it runs. */
export interface McpServerStatus {
  config: McpServerConfig
  state: McpServerState
  error: string | null
  tools: McpToolDefinition[]
  logTail: string[]
}

/** What an entry may be given, by the API or a hand edit: the fields of mcp.json (null removes one). */
export type McpEntryChanges = Partial<Record<(typeof ENTRY_FIELDS)[number], unknown>>

/** One configured server's life: kept across restarts, so the log tail explains the last failure. */
interface Runtime {
  log: LineRing
  connection?: McpConnection
  starting?: Promise<McpConnection>
  error: string | null
  /** Bumped by every stop, so a start or a loss from before it changes nothing. */
  generation: number
}

export class McpHub {
  private state: McpConfigState
  private readonly runtimes = new Map<string, Runtime>()
  private changing: Promise<unknown> = Promise.resolve()
  private closed = false

  private constructor(
    initial: McpConfigState,
    private readonly log: (line: string) => void,
  ) {
    this.state = initial
  }

  /** Reads `<dataDir>/mcp.json`; a broken file is reported (configError), never thrown. Starts nothing. */
  static async open(dataDir: string, log: (line: string) => void): Promise<McpHub> {
    const hub = new McpHub(await readMcpConfig(mcpConfigPath(dataDir)), log)
    if (hub.state.error) log(`warning: MCP servers are off until the settings file is fixed: ${hub.state.error}`)
    return hub
  }

  get configFile(): string {
    return this.state.path
  }

  /** What is wrong with mcp.json (naming the file and the field), or null. */
  configError(): string | null {
    return this.state.error
  }

  configured(name: string): { enabled: boolean; url?: string; transport: 'stdio' | 'http' } | undefined {
    const config = this.state.servers.get(name)
    if (!config) return undefined
    return { enabled: config.enabled, transport: config.transport, ...(config.url !== undefined ? { url: config.url } : {}) }
  }

  names(): string[] {
    return [...this.state.servers.keys()]
  }

  /** Every configured server, after picking up edits made to the file by hand. */
  async statuses(): Promise<McpServerStatus[]> {
    await this.refresh()
    return this.names().map((name) => this.status(name)!)
  }

  status(name: string): McpServerStatus | undefined {
    const config = this.state.servers.get(name)
    if (!config) return undefined
    const runtime = this.runtimes.get(name)
    const state: McpServerState = !config.enabled
      ? 'off'
      : runtime?.starting
        ? 'starting'
        : runtime?.connection
          ? 'ready'
          : runtime?.error
            ? 'failed'
            : 'stopped'
    return {
      config,
      state,
      error: state === 'failed' ? runtime!.error : null,
      tools: state === 'ready' ? runtime!.connection!.tools : [],
      logTail: runtime?.log.list() ?? [],
    }
  }

  /** The server's tools, starting it if needed. */
  async tools(name: string, signal?: AbortSignal): Promise<McpToolDefinition[]> {
    const config = await this.requireEnabled(name)
    return (await untilAborted(this.connect(config), signal)).tools
  }

  /** Starts the server if needed; a failure to start is its state (failed, with the error), not a throw. */
  async start(name: string, signal?: AbortSignal): Promise<McpServerStatus> {
    const config = await this.requireEnabled(name, 'name')
    try {
      await untilAborted(this.connect(config), signal)
    } catch (e) {
      if (!(e instanceof ApiError) || e.code !== 'mcp_server_failed') throw e
    }
    return this.status(name)!
  }

  async stop(name: string): Promise<McpServerStatus> {
    await this.refresh()
    if (!this.state.servers.has(name)) throw serverNotFound(name, 'name')
    await this.stopRuntime(name)
    return this.status(name)!
  }

  /** Runs a tool, starting the server if needed; `signal` (the client going away) cancels the call. */
  async call(name: string, tool: string, args: Record<string, unknown>, signal?: AbortSignal): Promise<McpCallResult> {
    const config = await this.requireEnabled(name)
    const started = performance.now()
    const connection = await untilAborted(this.connect(config), signal)
    if (!connection.tools.some((t) => t.name === tool))
      throw toolNotFound(
        name,
        tool,
        connection.tools.map((t) => t.name),
      )
    let result: CallToolResult
    try {
      result = await connection.call(tool, args, { signal, timeoutMs: config.timeoutSeconds * 1000 })
    } catch (e) {
      if (signal?.aborted) throw callCancelled()
      if (e instanceof McpError && e.code === ErrorCode.RequestTimeout) throw toolTimeout(name, tool, config.timeoutSeconds)
      if (e instanceof McpError && e.code !== ErrorCode.ConnectionClosed) {
        // The server answered with a JSON-RPC error: an error result the model can read, the server still up.
        return { content: [{ type: 'text', text: e.message }], text: e.message, isError: true, durationMs: elapsed(started) }
      }
      const why = await this.lose(name, connection, e)
      throw serverFailed(`The MCP server '${name}' stopped during the call to '${tool}': ${why}. It will be started again on the next call.`)
    }
    const content = Array.isArray(result.content) ? result.content : []
    return { content, text: summarizeContent(content, result.structuredContent), isError: result.isError === true, durationMs: elapsed(started) }
  }

  /** Adds a server to mcp.json; refused by field when the entry is wrong, 409 while the file is broken. */
  async add(name: string, entry: McpEntryChanges): Promise<McpServerStatus> {
    return this.change(async () => {
      if (!SERVER_NAME.test(name)) throw invalidRequest(`Invalid value for 'name': a server name is ${SERVER_NAME_RULE}`, 'name')
      if (this.state.servers.has(name)) {
        throw new ApiError(
          409,
          'invalid_request_error',
          'mcp_server_exists',
          `An MCP server named '${name}' already exists; change it with PATCH or pick another name`,
          'name',
        )
      }
      const written = withoutNulls(entry)
      checkEntry(written)
      await this.write({ ...this.entries(), [name]: written })
      this.log(`MCP server '${name}' was added`)
      return this.status(name)!
    })
  }

  /** Changes fields of a server's entry (null removes one; fields Hearth does not know are kept) and stops it. */
  async update(name: string, changes: McpEntryChanges): Promise<McpServerStatus> {
    return this.change(async () => {
      const entries = this.entries()
      // Own entries only: `constructor` is a fine server name, and no entry of a plain object.
      if (!Object.hasOwn(entries, name)) throw serverNotFound(name, 'name')
      const current = entries[name]
      const written = withoutNulls({ ...(current as Record<string, unknown>), ...changes })
      checkEntry(written)
      await this.stopRuntime(name)
      await this.write({ ...entries, [name]: written })
      this.log(`MCP server '${name}' was changed`)
      return this.status(name)!
    })
  }

  async remove(name: string): Promise<void> {
    await this.change(async () => {
      const entries = this.entries()
      if (!Object.hasOwn(entries, name)) throw serverNotFound(name, 'name')
      delete entries[name]
      await this.stopRuntime(name)
      this.runtimes.delete(name)
      await this.write(entries)
      this.log(`MCP server '${name}' was removed`)
    })
  }

  /** Stops every server (at shutdown); nothing starts afterwards. */
  async close(): Promise<void> {
    this.closed = true
    await Promise.all([...this.runtimes.keys()].map((name) => this.stopRuntime(name)))
  }

  /** Picks up edits made to mcp.json by hand: a server whose entry changed or went is stopped. */
  private async refresh(): Promise<void> {
    if ((await configStamp(this.state.path)) === this.state.stamp) return
    await this.reload()
  }

  private async reload(): Promise<void> {
    const before = this.state.servers
    this.state = await readMcpConfig(this.state.path)
    for (const name of [...this.runtimes.keys()]) {
      const now = this.state.servers.get(name)
      if (!now || JSON.stringify(now) !== JSON.stringify(before.get(name))) await this.stopRuntime(name)
      if (!now) this.runtimes.delete(name)
    }
  }

  /** Changes to the file, one at a time, each from the file as it is now. */
  private change<T>(work: () => Promise<T>): Promise<T> {
    const next = this.changing.then(async () => {
      await this.refresh()
      if (this.state.error) throw configBroken(this.state.error)
      return work()
    })
    this.changing = next.catch(() => undefined)
    return next
  }

  /** A copy of the raw entries, as the file has them. */
  private entries(): Record<string, unknown> {
    return { ...((this.state.raw.mcpServers as Record<string, unknown> | undefined) ?? {}) }
  }

  private async write(entries: Record<string, unknown>): Promise<void> {
    await writeMcpConfig(this.state.path, { ...this.state.raw, mcpServers: entries })
    await this.reload()
  }

  private async requireEnabled(name: string, param = 'server'): Promise<McpServerConfig> {
    await this.refresh()
    const config = this.state.servers.get(name)
    if (!config) throw serverNotFound(name, param)
    if (!config.enabled) throw serverDisabled(name, param)
    return config
  }

  private runtime(name: string): Runtime {
    let runtime = this.runtimes.get(name)
    if (!runtime) this.runtimes.set(name, (runtime = { log: new LineRing(50), error: null, generation: 0 }))
    return runtime
  }

  /** The running connection, or the start under way, or a new start; throws 502 when it cannot start. */
  private connect(config: McpServerConfig): Promise<McpConnection> {
    if (this.closed) return Promise.reject(shuttingDown())
    const { name } = config
    const runtime = this.runtime(name)
    if (runtime.connection) return Promise.resolve(runtime.connection)
    if (runtime.starting) return runtime.starting
    const generation = ++runtime.generation
    runtime.error = null
    const stale = () => runtime.generation !== generation || this.closed
    runtime.starting = McpConnection.open(config, runtime.log, (why) => void this.lost(name, generation, why)).then(
      async (connection) => {
        if (stale()) {
          await connection.close()
          throw serverFailed(`The MCP server '${name}' was stopped while it started`)
        }
        runtime.starting = undefined
        runtime.connection = connection
        this.log(`MCP server '${name}' is ready (${connection.tools.length} tool${connection.tools.length === 1 ? '' : 's'})`)
        return connection
      },
      async (e) => {
        const why = `The MCP server '${name}' could not start: ${await withLastLogLine(startFailure(config, e), runtime.log)}`
        if (!stale()) {
          runtime.starting = undefined
          runtime.error = why
          this.log(why)
        }
        throw serverFailed(why)
      },
    )
    return runtime.starting
  }

  /** The server went away by itself (its process exited, its connection closed). */
  private async lost(name: string, generation: number, why: string): Promise<void> {
    const runtime = this.runtimes.get(name)
    if (!runtime || runtime.generation !== generation || !runtime.connection) return
    runtime.connection = undefined
    runtime.error = why
    const explained = await withLastLogLine(why, runtime.log)
    if (runtime.generation === generation && runtime.error === why) runtime.error = explained
    this.log(`MCP server '${name}' stopped unexpectedly: ${explained}`)
  }

  /** A call broke the connection: the server is marked failed (the next need restarts it). Returns why. */
  private async lose(name: string, connection: McpConnection, e: unknown): Promise<string> {
    const runtime = this.runtime(name)
    const exited = e instanceof McpError && e.code === ErrorCode.ConnectionClosed
    const why = exited
      ? this.status(name)?.config.transport === 'http'
        ? 'the connection to the server closed'
        : 'the server process exited'
      : describeError(e)
    if (runtime.connection === connection) {
      const generation = runtime.generation
      runtime.connection = undefined
      runtime.error = why
      if (!exited) runtime.log.push(`error: ${why}`)
      void connection.close()
      const explained = await withLastLogLine(why, runtime.log)
      // Unless it was stopped or started again meanwhile.
      if (runtime.generation === generation) runtime.error = explained
      this.log(`MCP server '${name}' stopped unexpectedly: ${explained}`)
      return explained
    }
    // Marked failed already (the process's exit came first): explained the same way.
    return withLastLogLine(why, runtime.log)
  }

  private async stopRuntime(name: string): Promise<void> {
    const runtime = this.runtimes.get(name)
    if (!runtime) return
    runtime.generation++
    runtime.starting = undefined
    runtime.error = null
    const connection = runtime.connection
    runtime.connection = undefined
    if (connection) {
      await connection.close()
      this.log(`MCP server '${name}' was stopped`)
    }
  }
}

/** Throws the first problem of an entry as a 400 naming its field. */
function checkEntry(entry: Record<string, unknown>): void {
  const problem = entryProblem(entry)
  if (!problem) return
  if (problem.message.startsWith('is missing'))
    throw invalidRequest(
      `Missing required parameter: '${problem.field}': ${problem.message.replace(/^is missing: /, '')}`,
      problem.field,
      'missing_required_parameter',
    )
  throw invalidRequest(`Invalid value for '${problem.field}': it ${problem.message}`, problem.field || null)
}

function withoutNulls(entry: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(entry).filter(([, value]) => value !== null && value !== undefined))
}

function startFailure(config: McpServerConfig, e: unknown): string {
  const code = (e as NodeJS.ErrnoException).code
  if (code === 'ENOENT' && config.transport === 'stdio') return `the command '${config.command}' was not found (is it installed and on the PATH?)`
  if (e instanceof McpError && e.code === ErrorCode.RequestTimeout) return `it did not finish the MCP handshake within ${startSeconds(config)} s`
  if (e instanceof McpError && e.code === ErrorCode.ConnectionClosed) {
    return config.transport === 'stdio' ? 'the server process exited during the MCP handshake' : 'the connection closed during the MCP handshake'
  }
  const reason = describeError(e)
  return config.transport === 'http' ? `${config.url} could not be reached: ${reason}` : reason
}

/** `why. Its last log line: "…"`, once the stderr that came with an exit has been read (and unless it says the same). */
async function withLastLogLine(why: string, log: LineRing): Promise<string> {
  await new Promise((resolve) => setTimeout(resolve, 20))
  const last = log.last()
  if (!last || why.includes(last.replace(/^error: /, ''))) return why
  return `${why}. Its last log line: ${JSON.stringify(last)}`
}

function elapsed(started: number): number {
  return Math.round(performance.now() - started)
}

/** The promise, or a 499 as soon as the client goes away (the work itself goes on for others). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise
  if (signal.aborted) return Promise.reject(callCancelled())
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(callCancelled())
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort)
        resolve(value)
      },
      (e) => {
        signal.removeEventListener('abort', onAbort)
        reject(e)
      },
    )
  })
}
