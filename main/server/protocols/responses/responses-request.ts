/**
 * OpenAI's Responses request (`POST /v1/responses`): its schema, its input items, and their
 * conversion (after any earlier response's items) into the chat completions request Hearth already
 * checks and plans. Errors name the Responses fields (`input[2].call_id`). What each field becomes
 * is in docs/agents.md ("Which fields are honoured").
 */
import { z } from 'zod'
import { ClientParams } from '../client-params.ts'
import { refuseRefusedFields, setAsideFields, setAsideWarnings } from '../field-decisions.ts'
import { invalidRequest, unsupportedParameter } from '../../services/api-error.ts'
import { checkChatRequest, type ChatRequest } from '../../services/chat/chat-request.ts'
import type { ChatRequestMessage } from '../../services/chat/chat-request-schema.ts'

type ChatContentPart = Exclude<Extract<ChatRequestMessage, { role: 'user' }>['content'], string>[number]
import { parseOrThrow } from '../../services/chat/validation.ts'
import type { ReasoningSeal } from '../../services/reasoning-seal.ts'
import type { Notices } from '../../services/pipeline/request-notices.ts'
import type { McpServerTools } from '../../services/mcp/mcp-tools.ts'
import { ResponseTools, toolSchema, type ResponseTool } from './response-tools.ts'

const SET_ASIDE = setAsideFields('responses')

/** `include` values: what Hearth can add to the answer, and what it never has to add. */
const INCLUDABLE = {
  /**
   * Reasoning items carry their thinking sealed, to be sent back with `store: false`; the documents'
   * texts the model was given come as a `file_search_call` item with its results; each output
   * token's log probability comes with the text (and `top_logprobs` alternatives).
   */
  honoured: ['reasoning.encrypted_content', 'file_search_call.results', 'message.output_text.logprobs'],
  /** Outputs of hosted tools and stored inputs, which a local answer never has: nothing to include. */
  nothingToInclude: [
    'web_search_call.action.sources',
    'web_search_call.results',
    'code_interpreter_call.outputs',
    'computer_call_output.output.image_url',
    'message.input_image.image_url',
  ],
}

const inputText = z.object({ type: z.literal('input_text'), text: z.string() })
const outputText = z.object({
  type: z.literal('output_text'),
  text: z.string(),
  annotations: z.array(z.unknown()).optional(),
  logprobs: z.array(z.unknown()).optional(),
})
const inputImage = z.object({ type: z.literal('input_image'), image_url: z.string(), detail: z.enum(['auto', 'low', 'high']).optional() })
/** A document: a `/v1/files` id, or the file as base64 (`file_data`); read on the server (documents/document-inputs.ts). */
const inputFile = z.object({
  type: z.literal('input_file'),
  file_id: z.string().min(1).nullish(),
  file_data: z.string().min(1).nullish(),
  filename: z.string().max(255).nullish(),
  file_url: z.string().nullish(),
})
const refusal = z.object({ type: z.literal('refusal'), refusal: z.string() })
const contentPart = z.discriminatedUnion('type', [inputText, outputText, inputImage, inputFile, refusal])

const messageItem = z.object({
  type: z.literal('message').optional(),
  id: z.string().optional(),
  status: z.string().optional(),
  role: z.enum(['user', 'assistant', 'system', 'developer']),
  content: z.union([z.string(), z.array(contentPart)]),
  phase: z.string().nullish(),
})
const functionCallItem = z.object({
  type: z.literal('function_call'),
  id: z.string().optional(),
  call_id: z.string().min(1),
  name: z.string().min(1),
  namespace: z.string().nullish(),
  arguments: z.string(),
  status: z.string().optional(),
})
const functionCallOutputItem = z.object({
  type: z.literal('function_call_output'),
  id: z.string().optional(),
  call_id: z.string().min(1),
  output: z.union([z.string(), z.array(z.union([inputText, outputText, inputImage]))]),
  status: z.string().optional(),
})
const customToolCallItem = z.object({
  type: z.literal('custom_tool_call'),
  id: z.string().optional(),
  call_id: z.string().min(1),
  name: z.string().min(1),
  namespace: z.string().nullish(),
  input: z.string(),
  status: z.string().optional(),
})
const customToolCallOutputItem = z.object({
  type: z.literal('custom_tool_call_output'),
  id: z.string().optional(),
  call_id: z.string().min(1),
  output: z.union([z.string(), z.array(z.union([inputText, outputText, inputImage]))]),
})
const reasoningItem = z.object({
  type: z.literal('reasoning'),
  id: z.string().optional(),
  summary: z.array(z.object({ type: z.string(), text: z.string() })).optional(),
  content: z.array(z.object({ type: z.string(), text: z.string() })).nullish(),
  encrypted_content: z.string().nullish(),
  status: z.string().optional(),
})
/** A hosted tool's call from an earlier turn (web search, …): nothing the model can read again. */
const hostedCallItem = z.looseObject({
  type: z.enum(['web_search_call', 'file_search_call', 'code_interpreter_call', 'image_generation_call', 'tool_search_call', 'tool_search_output']),
})

/** MCP items (response-mcp-tools.ts): the tools listed, a call waiting for approval, the client's answer, a call run. */
const mcpListToolsItem = z.looseObject({ type: z.literal('mcp_list_tools'), id: z.string().optional(), server_label: z.string(), tools: z.array(z.unknown()) })
const mcpApprovalRequestItem = z.object({
  type: z.literal('mcp_approval_request'),
  id: z.string().min(1),
  server_label: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
})
const mcpApprovalResponseItem = z.object({
  type: z.literal('mcp_approval_response'),
  id: z.string().nullish(),
  approval_request_id: z.string().min(1),
  approve: z.boolean(),
  reason: z.string().nullish(),
})
const mcpCallItem = z.object({
  type: z.literal('mcp_call'),
  id: z.string().min(1),
  server_label: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
  output: z.string().nullish(),
  error: z.union([z.string(), z.looseObject({})]).nullish(),
  approval_request_id: z.string().nullish(),
  status: z.string().optional(),
})
export type McpApprovalRequestItem = z.infer<typeof mcpApprovalRequestItem>

export const inputItem = z.union([
  mcpListToolsItem,
  mcpApprovalRequestItem,
  mcpApprovalResponseItem,
  mcpCallItem,
  functionCallItem,
  functionCallOutputItem,
  customToolCallItem,
  customToolCallOutputItem,
  reasoningItem,
  hostedCallItem,
  messageItem,
])
export type InputItem = z.infer<typeof inputItem>

const format = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text') }),
  z.object({ type: z.literal('json_object') }),
  z.object({
    type: z.literal('json_schema'),
    name: z.string().min(1).max(64),
    schema: z.record(z.string(), z.unknown()),
    description: z.string().optional(),
    strict: z.boolean().nullish(),
  }),
])

const toolChoice = z.union([
  z.enum(['none', 'auto', 'required']),
  z.object({ type: z.enum(['function', 'custom']), name: z.string() }),
  z.object({
    type: z.literal('allowed_tools'),
    mode: z.enum(['auto', 'required']),
    tools: z.array(z.looseObject({ type: z.string(), name: z.string().optional() })),
  }),
  // A hosted tool: there is none to choose here (the tool was left out).
  z.looseObject({ type: z.string() }),
])

export const responsesRequestSchema = z.object({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(inputItem).min(1)]),
  instructions: z.string().nullish(),
  tools: z.array(toolSchema).max(512).nullish(),
  tool_choice: toolChoice.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  text: z.object({ format: format.optional(), verbosity: z.string().nullish() }).nullish(),
  max_output_tokens: z.int().min(1).nullish(),
  max_tool_calls: z.int().min(1).nullish(),
  // [0, 1], as the contract has it for chat completions (OpenAI's APIs take up to 2).
  temperature: z.number().min(0).max(1).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  /** Hearth's own, as in its chat completions (llama.cpp's samplers): the web UI's parameters. */
  top_k: z.int().min(0).nullish(),
  stop: z.union([z.string(), z.array(z.string()).max(4)]).nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_obfuscation: z.boolean().optional() }).nullish(),
  store: z.boolean().nullish(),
  include: z.array(z.string()).nullish(),
  top_logprobs: z.int().min(0).max(20).nullish(),
  previous_response_id: z.string().nullish(),
  reasoning: z
    .object({
      effort: z.enum(['none', 'minimal', 'low', 'medium', 'high', 'xhigh']).nullish(),
      summary: z.string().nullish(),
      generate_summary: z.string().nullish(),
    })
    .nullish(),
  metadata: z.record(z.string(), z.string()).nullish(),
  client_metadata: z.record(z.string(), z.unknown()).nullish(),
  user: z.string().nullish(),
  safety_identifier: z.string().nullish(),
  prompt_cache_key: z.string().nullish(),
  speculative: z.boolean().nullish(),
  prompt_cache_retention: z.string().nullish(),
  service_tier: z.string().nullish(),
  prompt_cache_options: z.looseObject({ prewarm: z.boolean().nullish() }).nullish(),
  image: z.looseObject({}).nullish(),
  access_programs: z.looseObject({}).nullish(),
  background_options: z.looseObject({}).nullish(),
  truncation: z.enum(['disabled', 'auto']).nullish(),
})

export type ResponsesRequest = z.infer<typeof responsesRequestSchema>

export function parseResponsesRequest(body: unknown, notices: Notices): ResponsesRequest {
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const fields = body as Record<string, unknown>
    refuseRefusedFields('responses', fields)
    for (const warning of setAsideWarnings('responses', fields)) notices.add(warning)
  }
  const request = parseOrThrow(responsesRequestSchema, body)
  request.include?.forEach((value, i) => {
    if (!INCLUDABLE.honoured.includes(value) && !INCLUDABLE.nothingToInclude.includes(value))
      throw invalidRequest(`'${value}' is not a value 'include' takes`, `include[${i}]`)
  })
  if (request.reasoning?.summary != null) notices.add(SET_ASIDE['reasoning.summary']!)
  if (request.text?.verbosity != null) notices.add(SET_ASIDE['text.verbosity']!)
  if (request.truncation === 'auto') notices.add(SET_ASIDE['truncation: auto']!)
  if (request.prompt_cache_options?.prewarm === true) notices.add(SET_ASIDE['prompt_cache_options.prewarm']!)
  return request
}

/** The request's input as items: a string is one user message. */
export function inputItemsOf(request: ResponsesRequest): InputItem[] {
  return typeof request.input === 'string' ? [{ role: 'user', content: request.input }] : request.input
}

/** Whether the answer shows the documents' texts the model was given, as a `file_search_call` with results. */
export function includesFileResults(request: ResponsesRequest): boolean {
  return request.include?.includes('file_search_call.results') === true
}

/** Whether reasoning items in the answer carry `encrypted_content`. */
/** `include: ["message.output_text.logprobs"]` (or `top_logprobs` asked for): each output token's log probability. */
export function includesLogprobs(request: ResponsesRequest): boolean {
  return request.include?.includes('message.output_text.logprobs') === true || request.top_logprobs != null
}

export function includesEncryptedReasoning(request: ResponsesRequest): boolean {
  return request.include?.includes('reasoning.encrypted_content') === true
}

/** What the conversion needs beyond the request, once the loop (mcp-tool-loop.ts) has it. */
export interface ConversionExtras {
  /** The `mcp` tools' servers, connected; without them the model is offered none of their tools. */
  mcp?: readonly McpServerTools[]
  /** Items this response has made so far (tool calls run between model turns), after the input. */
  produced?: readonly InputItem[]
}

export interface ConvertedResponse {
  chat: ChatRequest
  /** The tools as the model sees them, and how its calls are named back to the client. */
  tools: ResponseTools
  /** The request's own names for the chat's fields, for the 400s found once it is a chat. */
  params: ClientParams
  /** The items' messages, open for the items an answer adds (the MCP loop's rounds). */
  conversation: ChatConversation
}

/** Chat's names for the fields a Responses request names otherwise. */
const RESPONSES_FIELDS = {
  max_tokens: 'max_output_tokens',
  response_format: 'text.format',
  reasoning_effort: 'reasoning.effort',
  logprobs: 'include',
  top_logprobs: 'top_logprobs',
}

/**
 * The conversation as a chat completions request: `instructions` as the system message, then the
 * earlier turns' items (from `previous_response_id`), then this request's input. Consecutive
 * function calls join one assistant message; thinking joins the assistant message after it.
 */
export function toChatRequest(
  request: ResponsesRequest,
  earlier: readonly InputItem[],
  seal: ReasoningSeal,
  notices: Notices,
  extras: ConversionExtras = {},
): ConvertedResponse {
  const tools = new ResponseTools((request.tools ?? []) as ResponseTool[], notices, extras.mcp)
  const params = new ClientParams()
  for (const [chat, responses] of Object.entries(RESPONSES_FIELDS)) params.set(chat, responses)
  const items = [...earlier, ...inputItemsOf(request), ...(extras.produced ?? [])]
  const offset = earlier.length
  checkCallPairs(items, offset)
  checkApprovals(items, offset)
  const conversation = new ChatConversation(tools, params, seal, answeredApprovals(items))
  if (request.instructions) conversation.push({ role: 'system', content: request.instructions }, 'instructions')
  items.forEach((item, n) => conversation.add(item, `input[${n - offset}]`))
  conversation.flush()

  // Built typed from what the Responses schema checked: only the checks across fields remain.
  const textFormat = request.text?.format
  const chat = checkedAs(params, () =>
    checkChatRequest(
      {
        model: request.model,
        messages: [...conversation.messages],
        max_tokens: request.max_output_tokens ?? undefined,
        temperature: request.temperature ?? undefined,
        top_p: request.top_p ?? undefined,
        top_k: request.top_k ?? undefined,
        stop: request.stop ?? undefined,
        ...tools.chatFields(request.tool_choice, request.parallel_tool_calls),
        ...(textFormat?.type === 'json_object' ? { response_format: { type: 'json_object' } } : {}),
        ...(textFormat?.type === 'json_schema' ? { response_format: { type: 'json_schema', json_schema: { name: 'output', schema: textFormat.schema } } } : {}),
        ...(request.reasoning?.effort ? { reasoning_effort: request.reasoning.effort } : {}),
        ...(includesLogprobs(request) ? { logprobs: true, top_logprobs: request.top_logprobs ?? 0 } : {}),
        ...(request.speculative === false ? { speculative: false } : {}),
      },
      notices,
    ),
  )
  return { chat, tools, params, conversation }
}

/**
 * Items into chat messages, in order, kept open: the MCP loop (mcp-tool-loop.ts) adds each
 * round's items to the conversation it converted once, so a turn's messages are those a later
 * request converting the same items gets, and no earlier turn is converted again.
 */
export class ChatConversation {
  readonly messages: ChatRequestMessage[] = []
  /** The assistant message being gathered (its text, then its calls), the item it began with, and the item of each call. */
  private assistant: Extract<ChatRequestMessage, { role: 'assistant' }> | undefined
  private assistantItem = ''
  private callItems: string[] = []
  /** Thinking read since the last assistant message, for the next one. */
  private reasoning = ''

  constructor(
    private readonly tools: ResponseTools,
    private readonly params: ClientParams,
    private readonly seal: ReasoningSeal,
    /** Approval requests the conversation has answered: an unanswered one the model never sees. */
    private readonly answered: ReadonlySet<string>,
  ) {}

  /** The chat's name for the message pushed next. */
  private next(): string {
    return `messages[${this.messages.length}]`
  }

  /** A chat message, and the input item it came from. */
  push(message: ChatRequestMessage, where: string): void {
    this.params.set(this.next(), where)
    this.messages.push(message)
  }

  /** Ends the assistant message being gathered. */
  flush(): void {
    if (this.assistant) {
      this.callItems.forEach((where, j) => {
        // chat's `function: {name, arguments}` is the call item itself
        this.params.set(`${this.next()}.tool_calls[${j}]`, where)
        this.params.set(`${this.next()}.tool_calls[${j}].function`, where)
      })
      this.push(this.assistant, this.assistantItem)
    }
    this.assistant = undefined
    this.callItems = []
  }

  private call(id: string, name: string, args: string, where: string): void {
    if (!this.assistant) this.assistantItem = where
    this.assistant ??= { role: 'assistant', content: null, ...(this.reasoning ? { reasoning_content: this.reasoning } : {}) }
    this.reasoning = ''
    ;(this.assistant.tool_calls ??= []).push({ id, type: 'function', function: { name, arguments: args } })
    this.callItems.push(where)
  }

  private toolResult(callId: string, content: string, where: string): void {
    this.flush()
    this.params.set(`${this.next()}.tool_call_id`, `${where}.call_id`)
    this.params.set(`${this.next()}.content`, `${where}.output`)
    this.push({ role: 'tool', tool_call_id: callId, content }, where)
  }

  /** One item, `where` naming it for errors (`input[3]`). */
  add(item: InputItem, where: string): void {
    const { tools } = this
    const type = 'type' in item ? item.type : undefined
    switch (type) {
      case 'reasoning': {
        const r = item as z.infer<typeof reasoningItem>
        // Hearth's own sealed reasoning reads back whole; another server's is opaque.
        this.reasoning += this.seal.open(r.encrypted_content) ?? (r.content ?? r.summary ?? []).map((p) => p.text).join('')
        return
      }
      case 'function_call': {
        const c = item as z.infer<typeof functionCallItem>
        this.call(c.call_id, tools.flatName(c.name, c.namespace), c.arguments, where)
        return
      }
      case 'custom_tool_call': {
        const c = item as z.infer<typeof customToolCallItem>
        this.call(c.call_id, tools.flatName(c.name, c.namespace), JSON.stringify({ input: c.input }), where)
        return
      }
      case 'function_call_output':
      case 'custom_tool_call_output': {
        const o = item as z.infer<typeof functionCallOutputItem>
        const output = typeof o.output === 'string' ? o.output : o.output.map((p) => ('text' in p ? p.text : '(a picture)')).join('\n')
        this.toolResult(o.call_id, output, where)
        return
      }
      case 'mcp_list_tools':
        return // the tools themselves are in this request's `tools`
      case 'mcp_approval_request': {
        const r = item as McpApprovalRequestItem
        if (this.answered.has(r.id)) this.call(r.id, tools.mcpFlatName(r.server_label, r.name), r.arguments, where)
        return
      }
      case 'mcp_approval_response': {
        const a = item as z.infer<typeof mcpApprovalResponseItem>
        // An approved call's result comes as the `mcp_call` that ran it.
        if (!a.approve) this.toolResult(a.approval_request_id, deniedCallText(a.reason), where)
        return
      }
      case 'mcp_call': {
        const c = item as z.infer<typeof mcpCallItem>
        const callId = c.approval_request_id ?? c.id
        if (!c.approval_request_id || !this.answered.has(c.approval_request_id))
          this.call(callId, tools.mcpFlatName(c.server_label, c.name), c.arguments, where)
        this.toolResult(callId, mcpCallText(c), where)
        return
      }
      case 'web_search_call':
      case 'file_search_call':
      case 'code_interpreter_call':
      case 'image_generation_call':
      case 'tool_search_call':
      case 'tool_search_output':
        return // a hosted tool's turn: Hearth never ran it and the model cannot read it
    }
    const message = item as z.infer<typeof messageItem>
    this.flush()
    if (message.role === 'assistant') {
      const text =
        typeof message.content === 'string' ? message.content : message.content.map((p) => ('text' in p ? p.text : 'refusal' in p ? p.refusal : '')).join('')
      this.assistant = { role: 'assistant', content: text, ...(this.reasoning ? { reasoning_content: this.reasoning } : {}) }
      this.assistantItem = where
      this.reasoning = ''
      return
    }
    if (typeof message.content !== 'string') {
      message.content.forEach((part, k) => {
        const chatPart = `${this.next()}.content[${k}]`
        // chat's `image_url: {url}` is Responses' `image_url`; its `file: {…}` the part itself
        if (part.type === 'input_image') this.params.set(`${chatPart}.image_url.url`, `${where}.content[${k}].image_url`)
        if (part.type === 'input_file') this.params.set(`${chatPart}.file`, `${where}.content[${k}]`)
      })
    }
    this.push({ role: message.role, content: chatContent(message.content, where) }, where)
  }
}

/**
 * The chat for a later turn of the same answer: the conversation's messages as they now stand
 * (the items added since it was converted, appended), with the request's tool choice for it.
 */
export function continuedChat(converted: ConvertedResponse, request: ResponsesRequest, notices: Notices): ChatRequest {
  const { chat, conversation, tools, params } = converted
  return checkedAs(params, () =>
    checkChatRequest({ ...chat, messages: [...conversation.messages], ...tools.chatFields(request.tool_choice, request.parallel_tool_calls) }, notices),
  )
}

/** What `check` returns, or its error naming the client's field. */
function checkedAs<T>(params: ClientParams, check: () => T): T {
  try {
    return check()
  } catch (e) {
    throw params.renamed(e)
  }
}

/**
 * Each output answers a call made before it, and the input does not end on calls whose outputs
 * never came: a 400 naming the item (`input[n]`, counted in this request's input).
 */
function checkCallPairs(items: readonly InputItem[], offset: number): void {
  const calls = new Set<string>()
  let pending: number | undefined
  items.forEach((item, n) => {
    const type = 'type' in item ? item.type : undefined
    if (type === 'function_call' || type === 'custom_tool_call') {
      calls.add((item as { call_id: string }).call_id)
      pending ??= n
    } else if (type === 'function_call_output' || type === 'custom_tool_call_output') {
      const id = (item as { call_id: string }).call_id
      if (!calls.has(id))
        throw invalidRequest(`This output answers no call before it: no function call has the call_id '${id}'`, `input[${n - offset}].call_id`)
      pending = undefined
    } else if (type !== 'reasoning' && !type?.startsWith('mcp_')) pending = undefined
  })
  if (pending !== undefined) {
    throw invalidRequest(
      "The input ends with function calls that have no outputs; send a 'function_call_output' for each after them",
      `input[${pending - offset}]`,
    )
  }
}

/** Approval requests the conversation has answered: denied, or run (an `mcp_call` names them). */
function answeredApprovals(items: readonly InputItem[]): Set<string> {
  const answered = new Set<string>()
  const requested = new Set<string>()
  for (const item of items) {
    const type = 'type' in item ? item.type : undefined
    if (type === 'mcp_approval_request') requested.add((item as McpApprovalRequestItem).id)
    else if (type === 'mcp_approval_response' && !(item as z.infer<typeof mcpApprovalResponseItem>).approve)
      answered.add((item as z.infer<typeof mcpApprovalResponseItem>).approval_request_id)
    else if (type === 'mcp_call') {
      const id = (item as z.infer<typeof mcpCallItem>).approval_request_id
      if (id && requested.has(id)) answered.add(id)
    }
  }
  return answered
}

/** Each approval response answers an approval request before it, once. */
function checkApprovals(items: readonly InputItem[], offset: number): void {
  const requested = new Set<string>()
  const responded = new Set<string>()
  items.forEach((item, n) => {
    const type = 'type' in item ? item.type : undefined
    if (type === 'mcp_approval_request') requested.add((item as McpApprovalRequestItem).id)
    if (type !== 'mcp_approval_response') return
    const id = (item as z.infer<typeof mcpApprovalResponseItem>).approval_request_id
    const param = `input[${n - offset}].approval_request_id`
    if (!requested.has(id)) throw invalidRequest(`This approval answers no request before it: no 'mcp_approval_request' has the id '${id}'`, param)
    if (responded.has(id)) throw invalidRequest(`The approval request '${id}' was already answered`, param)
    responded.add(id)
  })
}

/**
 * The approvals in this request's input that let a call run: each with the request it answers and
 * where it sits in the input (`input[n]`). Calls already run (an `mcp_call` names them) are not run again.
 */
export function approvedCalls(request: ResponsesRequest, earlier: readonly InputItem[]): Array<{ call: McpApprovalRequestItem; at: number }> {
  const items = [...earlier, ...inputItemsOf(request)]
  const requests = new Map<string, McpApprovalRequestItem>()
  const ran = new Set<string>()
  for (const item of items) {
    const type = 'type' in item ? item.type : undefined
    if (type === 'mcp_approval_request') requests.set((item as McpApprovalRequestItem).id, item as McpApprovalRequestItem)
    if (type === 'mcp_call' && (item as z.infer<typeof mcpCallItem>).approval_request_id) ran.add((item as z.infer<typeof mcpCallItem>).approval_request_id!)
  }
  const approved: Array<{ call: McpApprovalRequestItem; at: number }> = []
  inputItemsOf(request).forEach((item, at) => {
    if (!('type' in item) || item.type !== 'mcp_approval_response') return
    const answer = item as z.infer<typeof mcpApprovalResponseItem>
    const call = requests.get(answer.approval_request_id)
    if (answer.approve && call && !ran.has(call.id)) approved.push({ call, at })
  })
  return approved
}

/**
 * What the model reads of a call the client denied. Made from the `mcp_approval_response` alone, so
 * every later request that carries the denial (sent back, or after `previous_response_id`) words it
 * the same and the engine's cached prompt still fits.
 */
function deniedCallText(reason: string | null | undefined): string {
  return `The user did not approve this call, so it did not run${reason ? `: ${reason}` : '.'}`
}

/** What the model reads of a call that ran: its output, or what went wrong. */
function mcpCallText(c: z.infer<typeof mcpCallItem>): string {
  if (c.error != null) return `Error: ${typeof c.error === 'string' ? c.error : JSON.stringify(c.error)}`
  return c.output || '(the tool returned nothing)'
}

function chatContent(content: string | z.infer<typeof contentPart>[], where: string): string | ChatContentPart[] {
  if (typeof content === 'string') return content
  if (content.length === 0) throw invalidRequest('A message needs content: a string, or at least one part', `${where}.content`)
  return content.map((part, k): ChatContentPart => {
    switch (part.type) {
      case 'input_text':
      case 'output_text':
        return { type: 'text', text: part.text }
      case 'refusal':
        throw invalidRequest(`A '${part.type}' part cannot be input`, `${where}.content[${k}].type`)
      case 'input_image':
        return { type: 'image_url', image_url: { url: part.image_url } }
      case 'input_file':
        if (part.file_url != null) {
          throw unsupportedParameter(
            `${where}.content[${k}].file_url`,
            "Hearth does not fetch files from the network; upload the file to /v1/files and send its 'file_id', or send it as 'file_data'",
          )
        }
        return {
          type: 'file',
          file: {
            ...(part.file_id != null ? { file_id: part.file_id } : {}),
            ...(part.file_data != null ? { file_data: part.file_data } : {}),
            ...(part.filename != null ? { filename: part.filename } : {}),
          },
        }
    }
  })
}
