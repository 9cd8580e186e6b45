/**
 * The chat's tool loop, apart from HTTP and runes so it can be tested with fakes: ask the model,
 * run the MCP tools it called (each once the person allows it), give it the results, ask again,
 * until it answers without calls, the round limit is reached, or the person stops it.
 */
import type { ChatTurn, ToolCallView } from './chat-messages.ts'
import type { OfferedTool } from './mcp-tools.ts'

export const MAX_TOOL_ROUNDS = 10

export type Approval = 'once' | 'always' | 'deny'

export interface ToolResult {
  text: string
  isError: boolean
  durationMs?: number
}

export interface ToolLoopSteps {
  /** The conversation's turns; tool turns are pushed here. */
  turns: ChatTurn[]
  /** The MCP tools offered, by the function name the model sees. */
  offered: ReadonlyMap<string, OfferedTool>
  signal: AbortSignal
  /** Streams one answer of the model into a new assistant turn and returns that turn. */
  answer(): Promise<ChatTurn>
  /** Resolves when the person chose; a remembered "always" answers at once. */
  approve(call: ToolCallView, tool: OfferedTool): Promise<Approval>
  /** Runs the tool; throws when it could not run (the message is then the result). */
  run(tool: OfferedTool, args: Record<string, unknown>, signal: AbortSignal): Promise<ToolResult>
  newId(): string
  /** The call being approved or run, for the view; undefined once its result is in the turns. */
  onRunning?(callId: string | undefined): void
}

export class Stopped extends Error {
  override name = 'AbortError'
}

/** Resolves as `promise` does, or rejects at once when the signal fires (Stop while waiting). */
export function untilStopped<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new Stopped('stopped'))
  return new Promise<T>((resolve, reject) => {
    const stop = () => reject(new Stopped('stopped'))
    signal.addEventListener('abort', stop, { once: true })
    promise.then(
      (value) => {
        signal.removeEventListener('abort', stop)
        resolve(value)
      },
      (error: unknown) => {
        signal.removeEventListener('abort', stop)
        reject(error as Error)
      },
    )
  })
}

/** A call's arguments as an object; the model may write nothing, or something that is not JSON. */
export function parseArguments(text: string): { args?: Record<string, unknown>; error?: string } {
  if (!text.trim()) return { args: {} }
  try {
    const value: unknown = JSON.parse(text)
    if (value && typeof value === 'object' && !Array.isArray(value)) return { args: value as Record<string, unknown> }
    return { error: 'The arguments must be a JSON object' }
  } catch (e) {
    return { error: `The arguments are not valid JSON: ${(e as Error).message}` }
  }
}

export const DENIED_TEXT = 'The person did not allow this tool call.'
export const STOPPED_TEXT = 'The person stopped the chat before this tool call finished.'
/**
 * A result is kept, shown and sent up to this many characters: conversations live in the
 * browser's storage (about 5 MB), and a longer result would not fit a local model's context anyway.
 */
export const MAX_RESULT_CHARACTERS = 40_000

/** The result as kept: a longer one is cut, saying how much was left out. */
export function boundedResult(text: string): string {
  if (text.length <= MAX_RESULT_CHARACTERS) return text
  return `${text.slice(0, MAX_RESULT_CHARACTERS)}\n… (the tool's result was cut here: ${text.length - MAX_RESULT_CHARACTERS} more characters)`
}

/** The turn that answers a call, as the conversation keeps it. */
export function toolTurn(id: string, call: ToolCallView, tool: OfferedTool | undefined, result: ToolResult): ChatTurn {
  return {
    id,
    role: 'tool',
    toolCallId: call.id,
    name: tool?.tool ?? call.name,
    ...(tool ? { server: tool.server } : {}),
    text: boundedResult(result.text),
    isError: result.isError,
    ...(result.durationMs !== undefined ? { durationMs: result.durationMs } : {}),
  }
}

/**
 * Runs the loop. Returns when the model answered without calling an MCP tool, at the round limit
 * (the last answer's `toolRoundLimit` says so), after an error, or as soon as the signal fires.
 */
export async function runToolLoop(steps: ToolLoopSteps): Promise<void> {
  for (let round = 1; ; round++) {
    const answer = await steps.answer()
    if (steps.signal.aborted || answer.error) return
    const calls = answer.toolCalls ?? []
    // Calls to functions typed in the parameters are only shown; the loop is for MCP tools.
    if (!calls.some((c) => steps.offered.has(c.name))) return
    // Every call needs an id to be answered; a template that gives none still gets one.
    for (const call of calls) if (!call.id) call.id = `call_${steps.newId()}`
    for (const [i, call] of calls.entries()) {
      const tool = steps.offered.get(call.name)
      let result: ToolResult
      try {
        result = await runOne(steps, call, tool)
      } catch (e) {
        if (!steps.signal.aborted) throw e
        result = { text: STOPPED_TEXT, isError: true }
      }
      if (steps.signal.aborted) {
        // Every call gets an answer, even a stopped one: APIs refuse calls left without results.
        for (const rest of calls.slice(i)) steps.turns.push(toolTurn(steps.newId(), rest, steps.offered.get(rest.name), { text: STOPPED_TEXT, isError: true }))
        steps.onRunning?.(undefined)
        return
      }
      steps.turns.push(toolTurn(steps.newId(), call, tool, result))
      steps.onRunning?.(undefined)
    }
    if (round >= MAX_TOOL_ROUNDS) {
      answer.toolRoundLimit = MAX_TOOL_ROUNDS
      return
    }
  }
}

async function runOne(steps: ToolLoopSteps, call: ToolCallView, tool: OfferedTool | undefined): Promise<ToolResult> {
  if (!tool) return { text: `There is no tool named "${call.name}".`, isError: true }
  const { args, error } = parseArguments(call.arguments)
  if (!args) return { text: error!, isError: true }
  steps.onRunning?.(call.id)
  const approval = await untilStopped(steps.approve(call, tool), steps.signal)
  if (approval === 'deny') return { text: DENIED_TEXT, isError: true }
  try {
    return await untilStopped(steps.run(tool, args, steps.signal), steps.signal)
  } catch (e) {
    if (steps.signal.aborted) throw e
    // The model is told why, and can go on without it.
    return { text: (e as Error).message, isError: true }
  }
}
