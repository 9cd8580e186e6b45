/**
 * Conversations, the one picture waiting to be sent, the sampling parameters, and the answer being
 * streamed. The server's Responses API does the work: it runs the MCP tools (each once the person
 * allows it) and reads the documents; the page sends the conversation (each answer as the items it
 * came as), shows what comes back, and answers approvals with `mcp_approval_response` items.
 * Conversations are saved when an answer or a tool call ends (not per token), parameters as they
 * change.
 */
import { BROKEN_OFF_TEXT, finishCalls, STOPPED_TEXT } from '../services/answer-items.ts'
import { readResponse } from '../services/answer-stream.ts'
import {
  buildResponsesRequest,
  conversationTitle,
  DEFAULT_PARAMETERS,
  DENIED_TEXT,
  type ChatParameters,
  type ChatTurn,
  type ToolCallView,
} from '../services/chat-messages.ts'
import { loadConversations, saveConversations, type Conversation } from '../services/conversation-storage.ts'
import { conversationDocuments } from '../services/document-files.ts'
import { readImage, type ImageAttachment } from '../services/image-attachment.ts'
import { ApprovalMemory, type Approval } from '../services/mcp-tools.ts'
import { api } from './connection.svelte.ts'
import { documents } from './documents.svelte.ts'
import { mcp } from './mcp.svelte.ts'
import { models } from './models.svelte.ts'
import type { ResponseEvent } from '../../../../main/server/wire-types.ts'

/** Resolves as `promise` does, or rejects at once when the signal fires (Stop while the person decides). */
function untilStopped<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const stop = () => reject(new DOMException('stopped', 'AbortError'))
    if (signal.aborted) return stop()
    signal.addEventListener('abort', stop, { once: true })
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', stop))
  })
}

const PARAMETERS_KEY = 'hearth.chat.parameters'
const MODEL_KEY = 'hearth.chat.model'

/** crypto.randomUUID needs a secure context, which a LAN address over http is not. */
export function newId(): string {
  return `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`
}

function loadParameters(): ChatParameters {
  try {
    return { ...DEFAULT_PARAMETERS, ...(JSON.parse(localStorage.getItem(PARAMETERS_KEY) ?? '{}') as Partial<ChatParameters>) }
  } catch {
    return { ...DEFAULT_PARAMETERS }
  }
}

class ChatStore {
  conversations = $state<Conversation[]>(loadConversations())
  currentId = $state<string | undefined>(undefined)
  model = $state(localStorage.getItem(MODEL_KEY) ?? '')
  parameters = $state<ChatParameters>(loadParameters())
  draft = $state('')
  attachment = $state<ImageAttachment | undefined>(undefined)
  attachmentError = $state<string | undefined>(undefined)
  streaming = $state(false)
  /** Why the last send could not start (no model, nothing to send). */
  problem = $state<string | undefined>(undefined)

  /** The tool servers a new chat will use, until it is started. */
  newChatToolServers = $state<string[]>([])
  /** The tool call waiting for the person to allow or deny it. */
  approval = $state<{ callId: string; server: string; tool: string } | undefined>(undefined)
  /** The tool call being approved or run. */
  runningCallId = $state<string | undefined>(undefined)

  current = $derived(this.conversations.find((c) => c.id === this.currentId))
  selectedModel = $derived(models.models.find((m) => m.id === this.model))
  canSeeImages = $derived(this.selectedModel?.capabilities.includes('vision') ?? false)
  canCallTools = $derived(this.selectedModel?.capabilities.includes('tools') ?? false)
  toolServers = $derived(this.current ? (this.current.toolServers ?? []) : this.newChatToolServers)

  private controller: AbortController | undefined
  private decide: ((choice: Approval) => void) | undefined
  private readonly approvals = new ApprovalMemory()

  constructor() {
    this.currentId = this.conversations[0]?.id
    $effect.root(() => {
      $effect(() => localStorage.setItem(PARAMETERS_KEY, JSON.stringify(this.parameters)))
      $effect(() => localStorage.setItem(MODEL_KEY, this.model))
    })
  }

  /** Picks a model when none is chosen or the chosen one is gone, preferring one that sees. */
  ensureModel(): void {
    const chat = models.chatModels
    if (chat.length === 0 || chat.some((m) => m.id === this.model)) return
    this.model = (chat.find((m) => m.capabilities.includes('vision')) ?? chat[0])!.id
  }

  newConversation(): void {
    if (this.streaming) this.stop()
    this.currentId = undefined
    this.draft = ''
    this.attachment = undefined
  }

  select(id: string): void {
    if (this.streaming) this.stop()
    this.currentId = id
    // Carry on with the model the conversation used, while it is still there.
    const used = this.current?.model
    if (used && models.chatModels.some((m) => m.id === used)) this.model = used
  }

  remove(id: string): void {
    if (this.currentId === id && this.streaming) this.stop()
    const gone = this.conversations.find((c) => c.id === id)
    if (gone) void documents.deleteAll(conversationDocuments(gone.turns).map((d) => d.id))
    this.conversations = this.conversations.filter((c) => c.id !== id)
    if (this.currentId === id) this.currentId = this.conversations[0]?.id
    this.persist()
  }

  /** A second picture replaces the first: a request carries one. */
  async attach(file: File): Promise<void> {
    this.attachmentError = undefined
    try {
      this.attachment = await readImage(file)
    } catch (e) {
      this.attachmentError = (e as Error).message
    }
  }

  removeAttachment(): void {
    this.attachment = undefined
    this.attachmentError = undefined
  }

  /** Turns a tool server on or off for this conversation (or the new chat about to start). */
  useToolServer(name: string, on: boolean): void {
    const names = this.toolServers.filter((n) => n !== name)
    if (on) names.push(name)
    if (this.current) {
      this.current.toolServers = names
      this.persist()
    } else this.newChatToolServers = names
  }

  /** The person's answer to the call waiting for approval. */
  answerApproval(choice: Approval): void {
    if (choice === 'always' && this.approval) this.approvals.allow(this.approval.server, this.approval.tool)
    this.approval = undefined
    this.decide?.(choice)
    this.decide = undefined
  }

  async send(): Promise<void> {
    const text = this.draft.trim()
    const attached = documents.pending.length > 0
    if (this.streaming || (!text && !this.attachment && !attached)) return
    if (!this.model) {
      this.problem = 'Choose a model first (add one on the Models page if the list is empty)'
      return
    }
    if (documents.uploading) {
      this.problem = 'Wait for the documents to finish uploading'
      return
    }
    this.problem = undefined
    const conversation = this.current ?? this.startConversation()
    const docs = documents.take()
    conversation.turns.push({
      id: newId(),
      role: 'user',
      text,
      ...(this.attachment ? { image: this.attachment.dataUrl } : {}),
      ...(docs.length ? { documents: docs } : {}),
    })
    conversation.title = conversationTitle(conversation.turns)
    this.draft = ''
    this.attachment = undefined
    await this.answer(conversation)
  }

  /** Asks again for the last answer. */
  async regenerate(): Promise<void> {
    const conversation = this.current
    if (!conversation || this.streaming) return
    // The whole answer goes, with its tool calls and their results.
    conversation.turns.splice(conversation.turns.findLastIndex((t) => t.role === 'user') + 1)
    if (conversation.turns.length === 0) return
    await this.answer(conversation)
  }

  stop(): void {
    this.controller?.abort()
  }

  private startConversation(): Conversation {
    const conversation: Conversation = {
      id: newId(),
      title: 'New chat',
      model: this.model,
      updatedAt: Date.now(),
      turns: [],
      toolServers: this.newChatToolServers,
    }
    this.newChatToolServers = []
    this.conversations.unshift(conversation)
    this.currentId = conversation.id
    return this.conversations[0]!
  }

  private async answer(conversation: Conversation): Promise<void> {
    const controller = new AbortController()
    const { signal } = controller
    this.controller = controller
    this.streaming = true
    conversation.model = this.model
    const model = this.model
    const sees = this.canSeeImages
    const turns = conversation.turns
    turns.push({ id: newId(), role: 'assistant', text: '', model, items: [] })
    // The state's own array (it wraps what it is given): what the next request sends back.
    const items = turns.at(-1)!.items!
    try {
      const names = this.canCallTools ? (conversation.toolServers ?? []) : []
      const servers = (await mcp.usable(names, signal)).map((name) => ({ name, alwaysAllowed: this.approvals.toolsOf(name) }))
      for (let request = 0; ; request++) {
        const body = buildResponsesRequest(model, turns, this.parameters, sees, { toolServers: servers, forceToolCall: request === 0 })
        let notices: string[] = []
        const events = api.events<ResponseEvent>('/v1/responses', { body, signal, onNotices: (given) => (notices = given) })
        const outcome = await readResponse(turns, items, events, signal, { newId, model, onRunning: (id) => this.running(id) })
        const answered = turns.findLast((t) => t.role === 'assistant')
        if (answered && notices.length) answered.notices = [...new Set([...(answered.notices ?? []), ...notices])]
        this.persist()
        if (outcome.ended || outcome.approvals.length === 0) return
        for (const call of outcome.approvals) {
          const choice = await untilStopped(this.approve(call), signal)
          // The server words what a denial tells the model; the page only says it on screen, at once.
          items.push({ type: 'mcp_approval_response', approval_request_id: call.id, approve: choice !== 'deny' })
          if (choice === 'deny')
            turns.push({ id: newId(), role: 'tool', toolCallId: call.id, name: call.name, server: call.server!, text: DENIED_TEXT, isError: true })
        }
      }
    } catch (e) {
      if (!signal.aborted) this.lastAnswer(conversation)!.error = (e as Error).message
    } finally {
      // Every call gets an outcome, even a stopped one: the next request must say what became of it.
      for (const call of finishCalls(items, signal.aborted ? STOPPED_TEXT : BROKEN_OFF_TEXT)) {
        turns.push({
          id: newId(),
          role: 'tool',
          toolCallId: call.approval_request_id ?? call.id,
          name: call.name,
          server: call.server_label,
          text: call.error ?? '',
          isError: true,
        })
      }
      if (signal.aborted) this.lastAnswer(conversation)!.stopped = true
      this.approval = undefined
      this.decide = undefined
      this.runningCallId = undefined
      this.streaming = false
      this.controller = undefined
      conversation.updatedAt = Date.now()
      this.persist()
      // The first request to a model loads it: the Models page should say so.
      void models.refresh()
    }
  }

  private running(callId: string | undefined): void {
    this.runningCallId = callId
    if (!callId) this.persist()
  }

  private lastAnswer(conversation: Conversation): ChatTurn | undefined {
    return conversation.turns.findLast((t) => t.role === 'assistant')
  }

  private approve(call: ToolCallView): Promise<Approval> {
    // Allowed always while this answer ran: the server asked before it knew.
    if (this.approvals.allowed(call.server!, call.name)) return Promise.resolve('once')
    this.approval = { callId: call.id, server: call.server!, tool: call.name }
    return new Promise<Approval>((resolve) => (this.decide = resolve))
  }

  private persist(): void {
    const sorted = $state.snapshot(this.conversations).sort((a, b) => b.updatedAt - a.updatedAt)
    saveConversations(sorted)
  }
}

export const chat = new ChatStore()
