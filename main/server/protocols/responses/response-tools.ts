/**
 * The Responses API's tools as a chat model sees them, and the model's calls named back the way the
 * client declared them:
 * - function tools as they are;
 * - a namespace's tools flattened to `namespace__name` (Codex's own flat spelling), their calls
 *   returned with `namespace` and `name` apart;
 * - custom (free-form) tools as a function of one string, `input`, their calls returned as
 *   `custom_tool_call`s (a grammar the tool declares is shown to the model, not enforced);
 * - `mcp` tools (servers the user configured) as their tools' own names, `label__tool` only where
 *   two tools share a name (services/mcp/mcp-tools.ts); Hearth runs their calls itself (services/pipeline/mcp-tool-loop.ts);
 * - hosted tools (web search, file search, …) left out, with a notice, as Hearth cannot run them;
 * - tools the client runs but whose schema is OpenAI's own (local shell, computer use) refused by
 *   name.
 */
import { z } from 'zod'
import type { ToolCall } from '../../../../engines/engine-jobs.ts'
import { invalidRequest, unsupportedParameter } from '../../services/api-error.ts'
import { functionName, type ChatRequest } from '../../services/chat/chat-request-schema.ts'
import type { Notices } from '../../services/pipeline/request-notices.ts'
import { parseMcpTool } from './response-mcp-tools.ts'
import { McpFunctions, type ListedMcpTool, type McpServerTools, type McpToolRequest } from '../../services/mcp/mcp-tools.ts'

const functionTool = z.object({
  type: z.literal('function'),
  name: functionName,
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
  defer_loading: z.boolean().nullish(),
})
const customTool = z.object({
  type: z.literal('custom'),
  name: functionName,
  description: z.string().nullish(),
  format: z.looseObject({ type: z.string(), syntax: z.string().optional(), definition: z.string().optional() }).nullish(),
  defer_loading: z.boolean().nullish(),
})
const namespaceTool = z.object({
  type: z.literal('namespace'),
  name: z.string().min(1),
  description: z.string().nullish(),
  tools: z.array(z.discriminatedUnion('type', [functionTool, customTool])).min(1),
})
const otherTool = z.looseObject({ type: z.string().min(1) })

export const toolSchema = z.union([functionTool, customTool, namespaceTool, otherTool])
export type ResponseTool = z.infer<typeof functionTool> | z.infer<typeof customTool> | z.infer<typeof namespaceTool> | { type: string; [key: string]: unknown }

/** OpenAI's hosted tools: it runs them on its side; Hearth leaves them out. */
const HOSTED = /^(web_search(_preview)?(_\d{4}_\d{2}_\d{2})?|file_search|code_interpreter|image_generation|tool_search)$/
/** Client-run tools whose schema is OpenAI's own. */
const REFUSED: Record<string, string> = {
  local_shell: "the local shell tool's schema is OpenAI's own; send it as a function tool",
  shell: "the shell tool's schema is OpenAI's own; send it as a function tool",
  apply_patch: "the apply_patch tool's schema is OpenAI's own; send it as a function or custom tool",
  computer_use_preview: 'computer use is not supported',
}

/** How a flat name the model calls is declared by the client. */
interface Declared {
  name: string
  namespace?: string
  custom: boolean
}

export class ResponseTools {
  /** What the chat model is offered, in chat completions' shape. */
  readonly visible: Array<{ type: 'function'; function: { name: string; description?: string; parameters: Record<string, unknown> } }> = []
  /** The request's `mcp` tools, checked, in order. */
  readonly mcpRequests: McpToolRequest[] = []
  private readonly declared = new Map<string, Declared>()
  private readonly mcp: McpFunctions

  /** `mcp`: the servers its `mcp` tools name, once connected; until then the model is offered none of their tools. */
  constructor(tools: readonly ResponseTool[], notices: Notices, mcp: readonly McpServerTools[] = []) {
    tools.forEach((tool, i) => {
      if (tool.type === 'function' || tool.type === 'custom') this.add(tool as z.infer<typeof functionTool> | z.infer<typeof customTool>)
      else if (tool.type === 'namespace') {
        const ns = tool as z.infer<typeof namespaceTool>
        for (const inner of ns.tools) this.add(inner, ns)
      } else if (tool.type === 'mcp') this.addMcpRequest(parseMcpTool(tool, i))
      else if (HOSTED.test(tool.type)) notices.add(`tools[${i}] (${tool.type}) was left out: Hearth runs no hosted tools`)
      else throw unsupportedParameter(`tools[${i}].type`, REFUSED[tool.type] ?? `'${tool.type}' tools are not supported; send function tools`)
    })
    this.mcp = new McpFunctions(mcp, this.declared.keys())
    this.visible.push(...this.mcp.functions)
  }

  /** The MCP server and tool a flat name the model calls stands for; undefined for the client's own tools. */
  mcpTarget(flatName: string): { server: McpServerTools; tool: ListedMcpTool } | undefined {
    return this.mcp.target(flatName)
  }

  /** The name the model knows an MCP server's tool by (also for calls in earlier turns). */
  mcpFlatName(serverLabel: string, name: string): string {
    return this.mcp.nameOf(serverLabel, name)
  }

  /** The name the model knows a client's tool by. */
  flatName(name: string, namespace?: string | null): string {
    return namespace ? `${namespace.replace(/_+$/, '')}__${name.replace(/^_+/, '')}` : name
  }

  /** A call the model made, as the output item the client expects. */
  outputItem(call: ToolCall, id: string, status: 'completed' | 'in_progress' = 'completed'): FunctionCallOutput | CustomCallOutput {
    const declared = this.declared.get(call.function.name) ?? { name: call.function.name, custom: false }
    const namespace = declared.namespace ? { namespace: declared.namespace } : {}
    if (declared.custom)
      return { type: 'custom_tool_call', id, call_id: call.id, ...namespace, name: declared.name, input: customInput(call.function.arguments), status }
    return { type: 'function_call', id, call_id: call.id, ...namespace, name: declared.name, arguments: call.function.arguments, status }
  }

  /** Whether calls to this flat name come back as custom tool calls. */
  isCustom(flatName: string): boolean {
    return this.declared.get(flatName)?.custom === true
  }

  /** `tools`, `tool_choice` and `parallel_tool_calls` for the chat request. */
  chatFields(choice: unknown, parallel: boolean | null | undefined): Pick<ChatRequest, 'tools' | 'tool_choice' | 'parallel_tool_calls'> {
    let tools = this.visible
    let toolChoice: ChatRequest['tool_choice']
    // The Responses schema let only these through (responses-request.ts).
    if (typeof choice === 'string') toolChoice = choice as 'none' | 'auto' | 'required'
    else if (choice && typeof choice === 'object') {
      const c = choice as { type: string; name?: string; mode?: 'auto' | 'required'; tools?: Array<{ type: string; name?: string }> }
      if ((c.type === 'function' || c.type === 'custom') && c.name) toolChoice = { type: 'function', function: { name: this.flatNameOf(c.name) } }
      else if (c.type === 'mcp' && this.mcp.functions.length > 0) {
        // `{type: "mcp", server_label, name?}`: that tool, or any of that server's (once connected).
        const m = c as { server_label?: string; name?: string }
        if (m.name && m.server_label) toolChoice = { type: 'function', function: { name: this.mcpFlatName(m.server_label, m.name) } }
        else {
          tools = tools.filter((t) => this.mcpTarget(t.function.name)?.server.request.serverLabel === m.server_label)
          toolChoice = 'required'
        }
      } else if (c.type === 'allowed_tools') {
        const allowed = new Set((c.tools ?? []).map((t) => (t.name ? this.flatNameOf(t.name) : '')))
        // `{type: "mcp", server_label}` allows all of that server's tools.
        const servers = new Set((c.tools ?? []).filter((t) => t.type === 'mcp').map((t) => (t as { server_label?: string }).server_label))
        tools = tools.filter((t) => allowed.has(t.function.name) || servers.has(this.mcpTarget(t.function.name)?.server.request.serverLabel))
        toolChoice = c.mode
      }
      // A hosted tool named as the choice was left out with its tool: the model chooses freely.
    }
    if (tools.length === 0) return {}
    return { tools, ...(toolChoice !== undefined ? { tool_choice: toolChoice } : {}), ...(parallel != null ? { parallel_tool_calls: parallel } : {}) }
  }

  private flatNameOf(name: string): string {
    if (this.declared.has(name)) return name
    for (const [flat, declared] of this.declared) if (declared.name === name) return flat
    return name
  }

  private addMcpRequest(request: McpToolRequest): void {
    const twice = this.mcpRequests.find((r) => r.serverLabel === request.serverLabel)
    if (twice)
      throw invalidRequest(
        `The MCP server '${request.serverLabel}' is named by two tools (${twice.at} and this one); name each server once`,
        `${request.at}.server_label`,
      )
    this.mcpRequests.push(request)
  }

  private add(tool: z.infer<typeof functionTool> | z.infer<typeof customTool>, namespace?: z.infer<typeof namespaceTool>): void {
    const flat = this.flatName(tool.name, namespace?.name)
    const about = [namespace?.description, tool.description].filter((d): d is string => !!d).join('\n\n')
    const custom = tool.type === 'custom'
    this.declared.set(flat, { name: tool.name, ...(namespace ? { namespace: namespace.name } : {}), custom })
    const parameters = custom ? customParameters(tool) : (tool.parameters ?? { type: 'object', properties: {} })
    this.visible.push({ type: 'function', function: { name: flat, ...(about ? { description: about } : {}), parameters } })
  }
}

export interface FunctionCallOutput {
  type: 'function_call'
  id: string
  call_id: string
  namespace?: string
  name: string
  arguments: string
  status: 'completed' | 'in_progress'
}

export interface CustomCallOutput {
  type: 'custom_tool_call'
  id: string
  call_id: string
  namespace?: string
  name: string
  input: string
  status: 'completed' | 'in_progress'
}

/** A free-form tool as a function of one string; its grammar, if any, told to the model. */
function customParameters(tool: z.infer<typeof customTool>): Record<string, unknown> {
  const format = tool.format
  const grammar =
    format?.type === 'grammar' && format.definition ? `The input must follow this ${format.syntax ?? ''} grammar:\n${format.definition}` : undefined
  return {
    type: 'object',
    properties: { input: { type: 'string', ...(grammar ? { description: grammar } : {}) } },
    required: ['input'],
    additionalProperties: false,
  }
}

/** The `input` of a custom call from the function arguments the model wrote. */
export function customInput(args: string): string {
  try {
    const value = JSON.parse(args) as { input?: unknown }
    return typeof value.input === 'string' ? value.input : args
  } catch {
    return args
  }
}
