/**
 * One answer turn by turn, whatever protocol asked: the model answers; calls to MCP tools that need
 * no approval run here and the model goes on with their results; a call that needs approval, or a
 * call to the client's own functions, ends the answer. Approved calls the client sent run first.
 * What each step becomes (Responses' `mcp_call` items, Anthropic's `mcp_tool_use` blocks) and how
 * the conversation goes on are the protocol's, through the sink and the conversation it gives.
 */
import type { Response } from 'express'
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import type { ChatResult, JobProgress } from '../../../../engines/engine-jobs.ts'
import type { ChatPlan } from '../chat/chat-request.ts'
import type { McpHub } from '../mcp/mcp-hub.ts'
import { needsApproval, type ListedMcpTool, type McpServerTools } from '../mcp/mcp-tools.ts'
import type { AnswerPipeline } from './answer-pipeline.ts'

/** Tool rounds (model -> tools -> model) one answer may take, where the request sets no `max_tool_calls`. */
export const MAX_TOOL_ROUNDS = 8

/** One call to an MCP tool: about to run (`in_progress`), then done, failed, or not run. */
export interface McpCall {
  serverLabel: string
  name: string
  /** The arguments as the model wrote them (JSON text). */
  arguments: string
  /** The approval request it answers, for a call the client approved. */
  approvalRequestId: string | null
  status: 'in_progress' | 'completed' | 'failed' | 'incomplete'
  output?: string
  error?: string
}

/** A call the client approved, with the server and tool that will run it. */
export interface ApprovedMcpCall {
  server: McpServerTools
  tool: ListedMcpTool
  arguments: string
  approvalRequestId: string
}

/** Where the answer's steps go, in the protocol's shapes (collected for one JSON answer, or streamed). */
export interface ToolLoopSink {
  onProgress?: (p: JobProgress) => void
  /** The model's turn is over; `last` when no MCP step follows it. */
  turnEnded(result: ChatResult, last: boolean): void
  /** A call that waits for the client's approval ends the answer with a request for it. */
  approvalRequested(serverLabel: string, name: string, args: string): void
  callStarted(call: McpCall): void
  callEnded(call: McpCall): void
  /** A call past the answer's limit, never run (`incomplete`, its error saying why). */
  notRun(call: McpCall): void
}

/** How the conversation goes on: the next turn's job, with everything this answer made so far. */
export interface ToolLoopConversation {
  /** `rounds`: how many rounds of tools have run (a forced tool choice is let go after the first). */
  plan(rounds: number): Promise<ChatPlan>
}

export type IncompleteReason = 'max_output_tokens' | 'max_tool_calls'

export interface ToolLoopOutcome {
  /** The model's last turn, with the tokens of all its turns added up. */
  result: ChatResult
  stoppedAt?: IncompleteReason
}

export interface ToolLoopOptions {
  pipeline: AnswerPipeline
  mcp: McpHub | undefined
  res: Response
  model: ModelRecord
  signal: AbortSignal
  /** The MCP server and tool a name the model calls stands for; undefined for the client's own functions. */
  target(name: string): { server: McpServerTools; tool: ListedMcpTool } | undefined
  approved: readonly ApprovedMcpCall[]
  /** The most calls one answer may run (Responses' `max_tool_calls`); without it, MAX_TOOL_ROUNDS rounds. */
  maxToolCalls?: number | undefined
  /** The most tokens the whole answer may write, across its turns (each turn gets what is left). */
  maxOutputTokens?: number | undefined
}

export class McpToolLoop {
  /** "label/tool" for every call run, for the request log. */
  private readonly runs: string[] = []
  private rounds = 0

  constructor(private readonly o: ToolLoopOptions) {}

  async run(sink: ToolLoopSink, conversation: ToolLoopConversation): Promise<ToolLoopOutcome> {
    const { maxToolCalls: limit, maxOutputTokens: budget } = this.o
    if (this.o.approved.length) {
      for (const call of this.o.approved) await this.runCall(sink, call.server, call.tool, call.arguments, call.approvalRequestId)
      this.rounds++
    }
    let total: ChatResult | undefined
    while (true) {
      const plan = await conversation.plan(this.rounds)
      if (budget !== undefined && total) plan.job.maxTokens = Math.min(plan.job.maxTokens ?? Infinity, budget - total.completionTokens)
      const result = await this.o.pipeline.run(this.o.res, this.o.model, plan.job, this.o.signal, sink.onProgress ? { onProgress: sink.onProgress } : {})
      total = added(total, result)
      // A turn cut at its token limit keeps the calls it finished writing (a cut one is noise).
      const cut = result.finishReason === 'length'
      const mcpCalls = result.toolCalls.filter((c) => this.o.target(c.function.name) && (!cut || typeof argumentsObject(c.function.arguments) !== 'string'))
      sink.turnEnded(result, mcpCalls.length === 0)
      if (mcpCalls.length === 0) return { result: total }

      let stoppedAt: IncompleteReason | undefined
      let waits = result.toolCalls.length > mcpCalls.length // the client's own functions
      let ran = false
      for (const call of mcpCalls) {
        const { server, tool } = this.o.target(call.function.name)!
        const label = server.request.serverLabel
        if (needsApproval(server.request, tool)) {
          sink.approvalRequested(label, tool.name, call.function.arguments)
          waits = true
        } else if (limit === undefined ? this.rounds >= MAX_TOOL_ROUNDS : this.runs.length >= limit) {
          const why = limit !== undefined ? `its 'max_tool_calls' (${limit})` : `${MAX_TOOL_ROUNDS} rounds of tool calls`
          const notRun: McpCall = {
            serverLabel: label,
            name: tool.name,
            arguments: call.function.arguments,
            approvalRequestId: null,
            status: 'incomplete',
            error: `Not run: this answer reached ${why}`,
          }
          sink.notRun(notRun)
          stoppedAt = 'max_tool_calls'
        } else {
          await this.runCall(sink, server, tool, call.function.arguments, null)
          ran = true
        }
      }
      if (ran) this.rounds++
      // The model has no tokens left to read the results: they are the client's to see.
      if (cut && !waits) stoppedAt ??= 'max_output_tokens'
      if (!waits && !stoppedAt && budget !== undefined && total.completionTokens >= budget) stoppedAt = 'max_output_tokens'
      if (waits || stoppedAt) return { result: total, ...(stoppedAt ? { stoppedAt } : {}) }
    }
  }

  private async runCall(sink: ToolLoopSink, server: McpServerTools, tool: ListedMcpTool, args: string, approvalRequestId: string | null): Promise<void> {
    const label = server.request.serverLabel
    const call: McpCall = { serverLabel: label, name: tool.name, arguments: args, approvalRequestId, status: 'in_progress' }
    sink.callStarted(call)
    const parsed = argumentsObject(args)
    if (typeof parsed === 'string') {
      sink.callEnded({ ...call, status: 'failed', error: parsed })
      return
    }
    this.runs.push(`${label}/${tool.name}`)
    this.o.res.locals.tool = this.runs.join(',')
    let ended: McpCall
    try {
      const result = await this.o.mcp!.call(label, tool.name, parsed, this.o.signal)
      ended = result.isError
        ? { ...call, status: 'failed', error: result.text || 'the tool reported an error without saying what' }
        : { ...call, status: 'completed', output: result.text }
    } catch (e) {
      if (this.o.signal.aborted) throw e
      // A tool that fails, hangs past its timeout or takes its server down is the model's to hear about, not the end of the answer.
      ended = { ...call, status: 'failed', error: e instanceof Error ? e.message : String(e) }
    }
    sink.callEnded(ended)
  }
}

/** The arguments the model wrote, as the object a tool takes; a string says why they are not one. */
function argumentsObject(args: string): Record<string, unknown> | string {
  try {
    const value: unknown = JSON.parse(args || '{}')
    if (value && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>
  } catch {
    // falls through
  }
  return `Not run: the arguments are not a JSON object: ${args.slice(0, 200)}`
}

/** The last turn's result with every turn's tokens added up. */
function added(total: ChatResult | undefined, result: ChatResult): ChatResult {
  if (!total) return result
  return {
    ...result,
    promptTokens: total.promptTokens + result.promptTokens,
    completionTokens: total.completionTokens + result.completionTokens,
    reasoningTokens: total.reasoningTokens + result.reasoningTokens,
    cachedTokens: (total.cachedTokens ?? 0) + (result.cachedTokens ?? 0),
  }
}
