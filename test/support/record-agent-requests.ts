/**
 * Records what each coding agent really sends: runs it headless against a small recording server
 * that answers like the real APIs (the first answer of a session calls a tool that reads a file,
 * the next ones say "OK"), and writes every request to test/fixtures/agents/<agent>.json. The
 * fast suite replays these bodies (agent-replay.test.ts). Run it again when an agent is updated:
 *
 *   npx tsx test/support/record-agent-requests.ts [claude|codex|opencode|qwen|continue|kilo|cline|aider ...]
 *
 * Keys are left out, and the run's temporary paths and ids are replaced by stable ones.
 */
import { execFile, spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { AGENTS } from '../../main/cli/agent-setups.ts'
import { agentProgram, installAgents, type AgentProgram } from './agent-programs.ts'
import { PROJECT_ROOT } from './server-process.ts'

const MODEL = 'qwen25-tiny'
const KEY = 'recording-key-0123'
const PROMPT = 'What does notes.txt say?'
const HEADERS_KEPT = /^(anthropic-|x-claude-code-|x-app$|session-id$|thread-id$|x-session-|x-codex-|originator$|user-agent$|content-type$|accept$)/

interface Recorded {
  method: string
  path: string
  headers: Record<string, string>
  body: unknown
}

async function main(): Promise<void> {
  const problem = installAgents()
  if (problem) throw new Error(problem)
  const wanted = process.argv.slice(2)
  const outDir = join(PROJECT_ROOT, 'test/fixtures/agents')
  mkdirSync(outDir, { recursive: true })
  for (const agent of AGENTS.filter((a) => wanted.length === 0 || wanted.includes(a.id))) {
    const program = agentProgram(agent.program as AgentProgram)
    if (!program) throw new Error(`${agent.name} is not installed`)
    const work = mkdtempSync(join(tmpdir(), 'hearth-record-'))
    const project = join(work, 'project')
    mkdirSync(project)
    writeFileSync(join(project, 'notes.txt'), 'The meeting is on Tuesday.\n')
    const recorder = await startRecorder(join(project, 'notes.txt'))
    const launch = manualSetup(agent.id, recorder.url, join(work, 'config'))
    mkdirSync(join(work, 'home'))
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: join(work, 'home'), ...launch.env }
    const args = [...launch.args, ...headlessArgs(agent.id)]
    const { stdout } = await runHeadless(program, args, { cwd: project, env }, agent.id === 'cline' ? CLINE_STOP_MS : undefined).catch((e: Error) => {
      throw new Error(`${agent.name} failed: ${e.message}`)
    })
    await recorder.close()
    const version = (await promisify(execFile)(program, ['--version'])).stdout.trim()
    // Cline's turns after the first ask the same again: its first few are kept.
    const kept = agent.id === 'cline' ? recorder.requests.slice(0, 4) : recorder.requests
    const requests = kept.map((r) => JSON.parse(JSON.stringify(r).replaceAll(work, '/home/user/work')) as Recorded)
    writeFileSync(
      join(outDir, `${agent.id}.json`),
      `${JSON.stringify({ agent: agent.name, version, recorded: new Date().toISOString().slice(0, 10), requests }, null, 1)}\n`,
    )
    console.log(`${agent.name} ${version}: ${requests.length} requests; it said: ${stdout.trim().split('\n').at(-1)}`)
  }
}

/**
 * Cline ends a task only by a tool of its own, and asks again after an answer without one: its run
 * is ended with Ctrl-C once it has answered (agents.test.ts says more).
 */
const CLINE_STOP_MS = 15_000

/** Runs a program with nothing on its stdin (Codex reads a prompt from an open stdin), or until Ctrl-C after `stopAfterMs`. */
function runHeadless(program: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }, stopAfterMs?: number): Promise<{ stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
    if (stopAfterMs !== undefined) setTimeout(() => process.kill(-child.pid!, 'SIGINT'), stopAfterMs).unref()
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => (stdout += d))
    child.stderr.on('data', (d: Buffer) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), 180_000)
    child.once('exit', (code) => {
      clearTimeout(timer)
      if (code === 0) resolve({ stdout })
      else reject(new Error(`exit ${code}: ${stderr.slice(-2000)} ${stdout.slice(-2000)}`))
    })
  })
}

/**
 * Each agent set up by hand, as docs/agents.md shows: only the address, key and model, so the
 * requests carry the agent's own defaults (`max_tokens: 32000` and the like), not `npm run
 * launch`'s tuning for the model.
 */
function manualSetup(agent: string, url: string, configDir: string): { env: Record<string, string>; args: string[] } {
  // The agents set up from files only (Continue, Kilo, Cline, Aider) are set up as the launch does, for a 32k model.
  const launch = AGENTS.find((a) => a.id === agent)!.launch({ url, key: KEY, model: MODEL, contextLength: 32768, maxCompletionTokens: 8192, configDir })
  switch (agent) {
    case 'claude':
      return { env: { ANTHROPIC_BASE_URL: url, ANTHROPIC_AUTH_TOKEN: KEY }, args: ['--model', MODEL] }
    case 'codex':
      return {
        env: launch.env,
        args: launch.args.filter(
          (a, i, all) => !/^model_(context_window|max_output_tokens)=/.test(a) && !/^model_(context_window|max_output_tokens)=/.test(all[i + 1] ?? ''),
        ),
      }
    case 'opencode': {
      const file = join(configDir, 'opencode.json')
      const models = { [MODEL]: { name: MODEL } }
      writeFileSync(
        file,
        JSON.stringify({
          provider: { hearth: { npm: '@ai-sdk/openai-compatible', options: { baseURL: `${url}/v1`, apiKey: KEY }, models } },
          model: `hearth/${MODEL}`,
        }),
      )
      return { env: { OPENCODE_CONFIG: file }, args: [] }
    }
    default:
      return launch
  }
}

/** How each agent runs one prompt without asking anything. */
function headlessArgs(agent: string): string[] {
  switch (agent) {
    case 'claude':
      return ['-p', PROMPT, '--allowedTools', 'Read']
    case 'codex':
      return ['exec', '--skip-git-repo-check', PROMPT]
    case 'opencode':
      return ['run', PROMPT]
    case 'continue':
      return ['-p', '--auto', PROMPT]
    case 'kilo':
      return ['run', '--auto', PROMPT]
    case 'cline':
      return ['-y', '--json', PROMPT]
    case 'aider':
      return ['--yes-always', '--no-git', '--no-analytics', '--no-pretty', '--no-fancy-input', '--no-show-release-notes', '--message', PROMPT, 'notes.txt']
    default:
      return ['--yolo', PROMPT]
  }
}

/** A server that records every request and answers as Anthropic's or OpenAI's API would, briefly. */
async function startRecorder(notesPath: string): Promise<{ url: string; requests: Recorded[]; close(): Promise<void> }> {
  const requests: Recorded[] = []
  const server = createServer((req, res) => {
    let text = ''
    req.on('data', (d: Buffer) => (text += d))
    req.on('end', () => {
      const body: unknown = text ? JSON.parse(text) : undefined
      requests.push({ method: req.method!, path: req.url!.split('?')[0]!, headers: keptHeaders(req), body })
      answer(req, res, body as Record<string, unknown> | undefined, notesPath)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return { url: `http://127.0.0.1:${port}`, requests, close: () => new Promise((resolve) => server.close(() => resolve())) }
}

function keptHeaders(req: IncomingMessage): Record<string, string> {
  return Object.fromEntries(Object.entries(req.headers).filter(([name]) => HEADERS_KEPT.test(name)) as Array<[string, string]>)
}

/** The tool that reads a file, by each agent's name for it, and how to call it. */
function readCall(tools: Array<Record<string, unknown>>, path: string): { name: string; args: Record<string, unknown> } | undefined {
  const names = new Set(tools.map((t) => String(t.name ?? (t.function as { name?: string } | undefined)?.name)))
  if (names.has('Read')) return { name: 'Read', args: { file_path: path } }
  if (names.has('read')) return { name: 'read', args: { filePath: path } }
  if (names.has('read_file')) return { name: 'read_file', args: { absolute_path: path, filepath: path, path } }
  if (names.has('read_files')) return { name: 'read_files', args: { paths: [path] } }
  if (names.has('exec_command')) return { name: 'exec_command', args: { cmd: `cat ${path}` } }
  return undefined
}

function answer(req: IncomingMessage, res: ServerResponse, body: Record<string, unknown> | undefined, notesPath: string): void {
  const sse = (events: Array<[string | undefined, unknown]>) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    for (const [name, data] of events) res.write(`${name ? `event: ${name}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`)
    res.end()
  }
  const json = (status: number, data: unknown) => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(data))
  const history = JSON.stringify(body?.messages ?? body?.input ?? '')
  const resulted = /tool_result|function_call_output|"role":"tool"/.test(history)
  const call = !resulted && Array.isArray(body?.tools) ? readCall(body.tools as Array<Record<string, unknown>>, notesPath) : undefined
  const path = req.url!.split('?')[0]
  if (req.method === 'HEAD') return void res.writeHead(200).end()
  if (path === '/v1/messages/count_tokens') return json(200, { input_tokens: 100 })
  if (path === '/v1/messages') {
    const message = {
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      model: MODEL,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 100, output_tokens: 0 },
    }
    const block = call ? { type: 'tool_use', id: `toolu_${requests()}`, name: call.name, input: {} } : { type: 'text', text: '' }
    const delta = call ? { type: 'input_json_delta', partial_json: JSON.stringify(call.args) } : { type: 'text_delta', text: 'OK' }
    return sse([
      ['message_start', { type: 'message_start', message }],
      ['content_block_start', { type: 'content_block_start', index: 0, content_block: block }],
      ['content_block_delta', { type: 'content_block_delta', index: 0, delta }],
      ['content_block_stop', { type: 'content_block_stop', index: 0 }],
      ['message_delta', { type: 'message_delta', delta: { stop_reason: call ? 'tool_use' : 'end_turn' }, usage: { output_tokens: 5 } }],
      ['message_stop', { type: 'message_stop' }],
    ])
  }
  if (path === '/v1/responses') {
    const response = { id: 'resp_1', object: 'response', created_at: 1, status: 'in_progress', model: MODEL, output: [] as unknown[] }
    const item = call
      ? { type: 'function_call', id: 'fc_1', call_id: `call_${requests()}`, name: call.name, arguments: JSON.stringify(call.args), status: 'completed' }
      : { type: 'message', id: 'msg_1', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'OK', annotations: [] }] }
    const usage = {
      input_tokens: 100,
      output_tokens: 5,
      total_tokens: 105,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens_details: { reasoning_tokens: 0 },
    }
    return sse([
      [undefined, { type: 'response.created', response, sequence_number: 0 }],
      [undefined, { type: 'response.output_item.done', output_index: 0, item, sequence_number: 1 }],
      [undefined, { type: 'response.completed', response: { ...response, status: 'completed', output: [item], usage }, sequence_number: 2 }],
    ])
  }
  if (path === '/v1/chat/completions') {
    const chunk = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: MODEL }
    const delta = call
      ? {
          role: 'assistant',
          tool_calls: [{ index: 0, id: `call_${requests()}`, type: 'function', function: { name: call.name, arguments: JSON.stringify(call.args) } }],
        }
      : { role: 'assistant', content: 'OK' }
    const usage = { prompt_tokens: 100, completion_tokens: 5, total_tokens: 105 }
    if (body?.stream !== true)
      return json(200, { ...chunk, object: 'chat.completion', choices: [{ index: 0, message: delta, finish_reason: call ? 'tool_calls' : 'stop' }], usage })
    return sse([
      [undefined, { ...chunk, choices: [{ index: 0, delta, finish_reason: null }] }],
      [undefined, { ...chunk, choices: [{ index: 0, delta: {}, finish_reason: call ? 'tool_calls' : 'stop' }], usage }],
      [undefined, '[DONE]'],
    ])
  }
  if (path === '/v1/models') return json(200, { object: 'list', data: [{ id: MODEL, object: 'model', created: 1, owned_by: 'local' }] })
  json(404, { error: { message: `no route ${path}`, type: 'invalid_request_error' } })
}

let count = 0
function requests(): number {
  return ++count
}

await main()
