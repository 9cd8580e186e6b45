/**
 * An Anthropic Messages request as the chat completions request Hearth already checks and plans
 * (roles, tools, images and context rules are the same ones). What has no chat completions
 * equivalent is mapped to the nearest faithful one here:
 * - Claude Code's billing stamp leaves the system prompt (it is a header for Anthropic's billing,
 *   not words for the model, and it changes per session, which would defeat the prompt cache);
 * - thinking in the history is read back from its signature where Hearth sealed it;
 * - deferred tools reach the model once a tool search has named them, hosted tools never do;
 * - effort and adaptive thinking become reasoning effort, `output_config.format` a JSON schema.
 */
import { invalidRequest, unsupportedParameter } from '../../services/api-error.ts'
import { checkChatRequest, type ChatRequest } from '../../services/chat/chat-request.ts'
import type { ChatRequestMessage } from '../../services/chat/chat-request-schema.ts'
import type { ReasoningSeal } from '../../services/reasoning-seal.ts'
import { ClientParams } from '../client-params.ts'
import { McpFunctions } from '../../services/mcp/mcp-tools.ts'
import type { Notices } from '../../services/pipeline/request-notices.ts'
import { applyContextEdits, type AppliedEdit } from './context-edits.ts'
import { HOSTED_TOOL_TYPES, type AnthropicMessage, type AnthropicTool, type ContentBlock, type MessagesRequest } from './messages-request.ts'

type OpenAiMessage = ChatRequestMessage
type OpenAiPart = Exclude<Extract<ChatRequestMessage, { role: 'user' }>['content'], string>[number]
type OpenAiTool = NonNullable<ChatRequest['tools']>[number]
type ToolResultPart = Extract<ContentBlock, { type: 'tool_result' }>

export interface ConvertedMessages {
  chat: ChatRequest
  /** Context edits applied to the conversation, for the answer's `context_management`. */
  appliedEdits: AppliedEdit[]
  /** Where each document read by the documents pipeline came from, for errors and citations. */
  documents: DocumentBlocks
}

/**
 * The request's `document` blocks that became file parts of the chat (PDFs, files by id, text with
 * citations asked for): Anthropic numbers them in the order they stand in the request, and its
 * citations name a document by that number.
 */
export class DocumentBlocks {
  /** The Anthropic field each chat file part came from. */
  readonly params = new ClientParams()
  /** For each file part, in order: its document's number and title, and whether it wants citations. */
  readonly blocks: Array<{ documentIndex: number; title: string | null; citations: boolean }> = []
  private count = 0

  /** Every document block counts, read as text or not (Anthropic's `document_index`). */
  next(): number {
    return this.count++
  }

  get citations(): boolean {
    return this.blocks.some((b) => b.citations)
  }
}

/** Anthropic's effort levels as reasoning effort (`max` is past OpenAI's top level). */
const EFFORT = { low: 'low', medium: 'medium', high: 'high', xhigh: 'xhigh', max: 'xhigh' } as const

const BILLING_STAMP = /^x-anthropic-billing-header:(?:\s*[\w-]+=[^;\n]*;)*[ \t]*\n?/

/**
 * `mcp`: the request's MCP servers' tools, once connected (their calls in the history are named as
 * the model knows them); `produced`: what this answer has made so far, as the assistant's turn the
 * conversation goes on from (the MCP tool loop's later turns).
 */
export function toChatRequest(
  request: MessagesRequest,
  seal: ReasoningSeal,
  notices: Notices,
  options: { mcp?: McpFunctions; produced?: ContentBlock[] } = {},
): ConvertedMessages {
  checkToolPairs(request.messages)
  const { messages: edited, applied } = applyContextEdits(request.messages, request.context_management?.edits ?? [])
  const messages: OpenAiMessage[] = []
  const system = systemText(request.system)
  if (system) messages.push({ role: 'system', content: system })
  const documents = new DocumentBlocks()
  const mcp = options.mcp ?? new McpFunctions([])
  edited.forEach((m, i) => messages.push(...chatMessages(m, i, seal, { documents, at: messages.length }, mcp)))
  if (options.produced?.length) messages.push(...assistantMessages(options.produced, edited.length, seal, mcp))

  const tools = [...visibleTools(request.tools ?? [], edited, notices, new Set((request.mcp_servers ?? []).map((s) => s.name))), ...mcp.functions]
  const choice = request.tool_choice
  const format = request.output_config?.format ?? request.output_format
  const effort = request.output_config?.effort
  const thinking = request.thinking
  // Built typed from what the Messages schema checked: only the checks across fields remain.
  const body: ChatRequest = {
    model: request.model,
    messages,
    max_tokens: request.max_tokens,
    // Anthropic's sampling default is temperature 1; Hearth's contract keeps its own (0) unless asked.
    temperature: request.temperature,
    top_p: request.top_p,
    top_k: request.top_k,
    stop: request.stop_sequences?.length ? request.stop_sequences : undefined,
    ...(tools.length ? { tools } : {}),
    ...(tools.length && choice ? { tool_choice: openAiToolChoice(choice) } : {}),
    ...(tools.length && choice && 'disable_parallel_tool_use' in choice && choice.disable_parallel_tool_use ? { parallel_tool_calls: false } : {}),
    ...(format ? { response_format: { type: 'json_schema', json_schema: { name: 'output', schema: format.schema } } } : {}),
    ...(thinking?.type === 'disabled' ? { reasoning_effort: 'none' } : effort ? { reasoning_effort: EFFORT[effort] } : {}),
    ...(thinking?.type === 'enabled' ? { thinking_budget_tokens: thinking.budget_tokens } : {}),
    ...(request.speculative === false ? { speculative: false } : {}),
  }
  return { chat: checkChatRequest(body, notices), appliedEdits: applied, documents }
}

/**
 * Each tool result answers a tool use made before it, and the conversation does not end on tool
 * uses whose results never came: a 400 naming the block, in Anthropic's terms.
 */
function checkToolPairs(messages: readonly AnthropicMessage[]): void {
  const uses = new Set<string>()
  messages.forEach((m, i) => {
    if (typeof m.content === 'string') return
    m.content.forEach((block, j) => {
      if (block.type === 'tool_use') uses.add(block.id)
      if (block.type === 'tool_result' && !uses.has(block.tool_use_id)) {
        throw invalidRequest(
          `This tool_result answers no tool_use before it: no tool_use has the id '${block.tool_use_id}'`,
          `messages[${i}].content[${j}].tool_use_id`,
        )
      }
    })
  })
  const i = messages.length - 1
  const last = messages[i]!
  const open = typeof last.content === 'string' || last.role !== 'assistant' ? -1 : last.content.findIndex((b) => b.type === 'tool_use')
  if (open >= 0) {
    throw invalidRequest(
      'The conversation ends with tool_use blocks that have no results; send their tool_result blocks in a user message after them',
      `messages[${i}].content[${open}]`,
    )
  }
}

/** The system prompt as one text, without Claude Code's billing stamp. */
function systemText(system: MessagesRequest['system']): string {
  const blocks = system === undefined ? [] : typeof system === 'string' ? [system] : system.map((b) => b.text)
  return blocks
    .map((text) => text.replace(BILLING_STAMP, ''))
    .filter((text) => text.length > 0)
    .join('\n')
}

/**
 * One Anthropic message as chat messages: a user turn's tool results come first, as `tool` messages.
 * `documents.at` is where its messages begin in the chat's.
 */
function chatMessages(
  m: AnthropicMessage,
  i: number,
  seal: ReasoningSeal,
  documents: { documents: DocumentBlocks; at: number },
  mcp: McpFunctions,
): OpenAiMessage[] {
  const blocks: ContentBlock[] = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content
  if (m.role === 'assistant') return assistantMessages(blocks, i, seal, mcp)
  const out: OpenAiMessage[] = []
  const parts: OpenAiPart[] = []
  const fileParts: Array<{ part: number; where: string }> = []
  blocks.forEach((block, j) => {
    const where = `messages[${i}].content[${j}]`
    switch (block.type) {
      case 'document': {
        const file = documentFile(block, where, documents.documents)
        if (!file) {
          parts.push({ type: 'text', text: documentText(block, where) })
          break
        }
        if (m.role === 'system') throw invalidRequest("A system message cannot hold a PDF or file 'document' block; send it in a user message", `${where}.type`)
        if (block.context) parts.push({ type: 'text', text: block.context })
        fileParts.push({ part: parts.length, where })
        parts.push(file)
        break
      }
      case 'tool_result': {
        if (m.role === 'system') throw invalidRequest("A system message cannot hold a 'tool_result' block", `${where}.type`)
        const { text, images } = toolResultContent(block, where)
        out.push({ role: 'tool', tool_call_id: block.tool_use_id, content: text })
        // Chat templates take pictures in user turns only: a tool's picture follows its result there.
        parts.push(...images)
        break
      }
      case 'image':
        parts.push(imagePart(block, where))
        break
      default: {
        const text = plainText(block, where)
        if (text === undefined) throw invalidRequest(`A ${m.role} message cannot hold a '${block.type}' block`, `${where}.type`)
        parts.push({ type: 'text', text })
      }
    }
  })
  if (parts.length > 0) {
    const chatIndex = documents.at + out.length
    for (const { part, where } of fileParts) documents.documents.params.set(`messages[${chatIndex}].content[${part}].file`, `${where}.source`)
    const texts = parts.flatMap((p) => (p.type === 'text' ? [p.text] : []))
    const content = texts.length === parts.length ? texts.join('\n') : parts
    out.push(m.role === 'system' ? { role: 'system', content } : { role: 'user', content })
  }
  return out
}

/**
 * Tool uses become the assistant's `tool_calls`; thinking becomes `reasoning_content`. A call
 * Hearth ran on an MCP server (`mcp_tool_use`) is a call too, and its `mcp_tool_result` the tool's
 * answer after it, the assistant's turn going on from there.
 */
function assistantMessages(blocks: readonly ContentBlock[], i: number, seal: ReasoningSeal, mcp: McpFunctions): OpenAiMessage[] {
  const out: OpenAiMessage[] = []
  let text: string[] = []
  let calls: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }> = []
  let reasoning = ''
  const flush = () => {
    if (!text.length && !calls.length && !reasoning) return
    out.push({
      role: 'assistant',
      content: text.length ? text.join('') : calls.length ? null : '',
      ...(calls.length ? { tool_calls: calls } : {}),
      ...(reasoning ? { reasoning_content: reasoning } : {}),
    })
    ;[text, calls, reasoning] = [[], [], '']
  }
  blocks.forEach((block, j) => {
    switch (block.type) {
      case 'text':
        text.push(block.text)
        break
      case 'tool_use':
        calls.push({ id: block.id, type: 'function', function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) } })
        break
      case 'mcp_tool_use':
        calls.push({
          id: block.id,
          type: 'function',
          function: { name: mcp.nameOf(block.server_name, block.name), arguments: JSON.stringify(block.input ?? {}) },
        })
        break
      case 'mcp_tool_result': {
        flush()
        const content = typeof block.content === 'string' ? block.content : (block.content ?? []).map((c) => c.text).join('\n')
        out.push({ role: 'tool', tool_call_id: block.tool_use_id, content: block.is_error ? `Error: ${content}` : content })
        break
      }
      case 'thinking':
        // Hearth's own signature holds the thinking even when its text was omitted; another
        // model's signature means nothing here, and its visible text is all there is.
        reasoning += seal.open(block.signature) ?? block.thinking
        break
      case 'redacted_thinking':
        break // opaque to every model but the one that wrote it
      default:
        throw invalidRequest(`An assistant message cannot hold a '${block.type}' block`, `messages[${i}].content[${j}].type`)
    }
  })
  flush()
  return out.length ? out : [{ role: 'assistant', content: '' }]
}

/** A block that reads as text (text, a text document, a search result), or undefined. */
function plainText(block: ContentBlock, where: string): string | undefined {
  switch (block.type) {
    case 'text':
      return block.text
    case 'search_result':
      return [`${block.title} (${block.source})`, ...block.content.map((c) => c.text)].join('\n')
    case 'document':
      return documentText(block, where)
    default:
      return undefined
  }
}

type DocumentBlock = Extract<ContentBlock, { type: 'document' }>

/**
 * A document the documents pipeline reads (a PDF, a file uploaded to `/v1/files`, or any document
 * whose citations are asked for), as a chat file part; undefined for a text document read as it is.
 * Every document block takes its number, whichever way it is read.
 */
function documentFile(block: DocumentBlock, where: string, documents: DocumentBlocks): OpenAiPart | undefined {
  const documentIndex = documents.next()
  const source = block.source
  const citations = (block.citations as { enabled?: unknown } | undefined)?.enabled === true
  const title = block.title ?? null
  if (citations && source.type === 'content')
    throw unsupportedParameter(`${where}.citations`, 'citations are given for PDF, text and file documents, not for custom content')
  let file: { file_id?: string; file_data?: string; filename?: string }
  if (source.type === 'file' && typeof source.file_id === 'string' && source.file_id) file = { file_id: source.file_id }
  else if (source.type === 'base64' && typeof source.data === 'string') {
    if (source.media_type !== 'application/pdf')
      throw unsupportedParameter(`${where}.source.media_type`, `base64 documents must be PDFs (application/pdf), not ${source.media_type ?? 'unnamed'}`)
    file = { file_data: `data:application/pdf;base64,${source.data}`, filename: fileNameOf(title, 'document.pdf') }
  } else if (source.type === 'url') {
    throw invalidRequest(
      'Documents must be sent as base64 data, as text, or as a file id; this server fetches nothing from the network',
      `${where}.source.type`,
    )
  } else if (citations && source.type === 'text' && typeof source.data === 'string') {
    file = { file_data: `data:text/plain;base64,${Buffer.from(source.data, 'utf8').toString('base64')}`, filename: fileNameOf(title, 'document.txt') }
  } else return undefined
  documents.blocks.push({ documentIndex, title, citations })
  return { type: 'file', file }
}

/** A title as a file name the store takes (the extension says how the file is read). */
function fileNameOf(title: string | null, fallback: string): string {
  const base = title
    ?.replace(/[\\/\u0000-\u001f]/g, ' ')
    .trim()
    .slice(0, 200)
  if (!base) return fallback
  const extension = fallback.slice(fallback.lastIndexOf('.'))
  return base.toLowerCase().endsWith(extension) ? base : `${base}${extension}`
}

function documentText(block: DocumentBlock, where: string): string {
  const source = block.source
  let body: string
  if (source.type === 'text' && typeof source.data === 'string') body = source.data
  else if (source.type === 'content' && Array.isArray(source.content)) {
    body = (source.content as Array<{ type?: string; text?: string }>).map((c) => (c.type === 'text' ? (c.text ?? '') : '')).join('\n')
  } else throw unsupportedParameter(`${where}.source`, `only text documents are supported (${source.media_type ?? source.type} is not); send its text`)
  return [block.title, block.context, body].filter((part) => part).join('\n\n')
}

function toolResultContent(block: ToolResultPart, where: string): { text: string; images: OpenAiPart[] } {
  const content = block.content ?? ''
  if (typeof content === 'string') return { text: block.is_error ? `Error: ${content}` : content, images: [] }
  const texts: string[] = []
  const images: OpenAiPart[] = []
  content.forEach((part, k) => {
    const at = `${where}.content[${k}]`
    if (part.type === 'image') {
      images.push(imagePart(part, at))
      texts.push('(the picture follows)')
    } else if (part.type === 'tool_reference') texts.push(`Tool loaded: ${part.tool_name}`)
    else texts.push(plainText(part, at) ?? '')
  })
  const text = texts.join('\n')
  return { text: block.is_error ? `Error: ${text}` : text, images }
}

function imagePart(block: Extract<ContentBlock, { type: 'image' }>, where: string): OpenAiPart {
  const source = block.source
  if (source.type !== 'base64') {
    throw invalidRequest('Images must be sent as base64 data; this server fetches nothing from the network and keeps no files', `${where}.source.type`)
  }
  return { type: 'image_url', image_url: { url: `data:${source.media_type};base64,${source.data}` } }
}

/**
 * The tools the model sees: custom tools, less the deferred ones no tool search has named yet.
 * Hosted tools are left out (and said so); Anthropic's client tools with schemas of its own are
 * refused, as Hearth cannot write their schemas for them.
 */
function visibleTools(tools: readonly AnthropicTool[], messages: readonly AnthropicMessage[], notices: Notices, mcpServers: ReadonlySet<string>): OpenAiTool[] {
  const loaded = referencedTools(messages)
  const visible: OpenAiTool[] = []
  tools.forEach((t, i) => {
    if (t.type !== undefined && /^mcp_toolset/.test(t.type) && mcpServers.has(String((t as { mcp_server_name?: unknown }).mcp_server_name))) {
      // Its tools run here (mcp_servers): a per-tool choice it makes would otherwise go unheard.
      throw unsupportedParameter(
        `tools[${i}]`,
        "an 'mcp_toolset' for a server of 'mcp_servers' is not supported; choose its tools with that server's 'tool_configuration.allowed_tools'",
      )
    }
    if (t.type !== undefined && t.type !== 'custom') {
      if (HOSTED_TOOL_TYPES.test(t.type)) {
        notices.add(`tools[${i}] (${t.type}) was left out: Hearth cannot run Anthropic's hosted tools`)
        return
      }
      throw unsupportedParameter(`tools[${i}].type`, `'${t.type}' has a schema of Anthropic's own; send it as a custom tool with an input_schema`)
    }
    if (!('input_schema' in t)) return
    // A custom tool, as its schema read it (the typed tools' loose shape also "has" any field).
    const custom = t as Extract<AnthropicTool, { input_schema: Record<string, unknown> }>
    if (typeof custom.input_schema !== 'object' || custom.input_schema === null || Array.isArray(custom.input_schema)) {
      throw invalidRequest("A tool's 'input_schema' must be a JSON Schema object", `tools[${i}].input_schema`)
    }
    if (custom.defer_loading && !loaded.has(custom.name)) return
    visible.push({
      type: 'function',
      function: { name: custom.name, ...(custom.description !== undefined ? { description: custom.description } : {}), parameters: custom.input_schema },
    })
  })
  return visible
}

/** Tools a tool search has loaded: those named by `tool_reference` blocks in tool results. */
function referencedTools(messages: readonly AnthropicMessage[]): Set<string> {
  const names = new Set<string>()
  for (const m of messages) {
    if (!Array.isArray(m.content)) continue
    for (const block of m.content) {
      if (block.type !== 'tool_result' || !Array.isArray(block.content)) continue
      for (const part of block.content) if (part.type === 'tool_reference') names.add(part.tool_name)
    }
  }
  return names
}

function openAiToolChoice(choice: NonNullable<MessagesRequest['tool_choice']>): ChatRequest['tool_choice'] {
  switch (choice.type) {
    case 'auto':
      return 'auto'
    case 'any':
      return 'required'
    case 'none':
      return 'none'
    case 'tool':
      return { type: 'function', function: { name: choice.name } }
  }
}
