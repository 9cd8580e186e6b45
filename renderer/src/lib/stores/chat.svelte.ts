/**
 * Conversations, the one picture waiting to be sent, the sampling parameters, and the answer being
 * streamed. Conversations are saved when an answer ends (not per token), parameters as they change.
 */
import {
  buildChatRequest,
  conversationTitle,
  DEFAULT_PARAMETERS,
  readChunk,
  addToolCallPieces,
  type ChatParameters,
  type ChatTurn,
} from '../services/chat-messages.ts'
import { loadConversations, saveConversations, type Conversation } from '../services/conversation-storage.ts'
import { readImage, type ImageAttachment } from '../services/image-attachment.ts'
import { api } from './connection.svelte.ts'
import { models } from './models.svelte.ts'
import type { ChatChunk } from '../../../../main/server/wire-types.ts'

const PARAMETERS_KEY = 'hearth.chat.parameters'
const MODEL_KEY = 'hearth.chat.model'
const SHOW_EVERY_MS = 50

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

  current = $derived(this.conversations.find((c) => c.id === this.currentId))
  selectedModel = $derived(models.models.find((m) => m.id === this.model))
  canSeeImages = $derived(this.selectedModel?.capabilities.includes('vision') ?? false)

  private controller: AbortController | undefined

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

  async send(): Promise<void> {
    const text = this.draft.trim()
    if (this.streaming || (!text && !this.attachment)) return
    if (!this.model) {
      this.problem = 'Choose a model first (add one on the Models page if the list is empty)'
      return
    }
    this.problem = undefined
    const conversation = this.current ?? this.startConversation()
    conversation.turns.push({ id: newId(), role: 'user', text, ...(this.attachment ? { image: this.attachment.dataUrl } : {}) })
    conversation.title = conversationTitle(conversation.turns)
    this.draft = ''
    this.attachment = undefined
    await this.answer(conversation)
  }

  /** Asks again for the last answer. */
  async regenerate(): Promise<void> {
    const conversation = this.current
    if (!conversation || this.streaming) return
    if (conversation.turns.at(-1)?.role === 'assistant') conversation.turns.pop()
    if (conversation.turns.length === 0) return
    await this.answer(conversation)
  }

  stop(): void {
    this.controller?.abort()
  }

  private startConversation(): Conversation {
    const conversation: Conversation = { id: newId(), title: 'New chat', model: this.model, updatedAt: Date.now(), turns: [] }
    this.conversations.unshift(conversation)
    this.currentId = conversation.id
    return this.conversations[0]!
  }

  private async answer(conversation: Conversation): Promise<void> {
    const body = buildChatRequest(this.model, conversation.turns, this.parameters, this.canSeeImages)
    conversation.turns.push({ id: newId(), role: 'assistant', text: '', model: this.model })
    const turn: ChatTurn = conversation.turns.at(-1)!
    conversation.model = this.model
    this.streaming = true
    const controller = new AbortController()
    this.controller = controller
    // Text reaches the screen at most every SHOW_EVERY_MS: a fast model sends hundreds of chunks a
    // second, and each re-render parses the whole answer again.
    let unshown = ''
    let timer: ReturnType<typeof setTimeout> | undefined
    const show = () => {
      timer = undefined
      if (unshown) turn.text += unshown
      unshown = ''
    }
    try {
      for await (const chunk of api.events<ChatChunk>('/v1/chat/completions', { body, signal: controller.signal })) {
        const update = readChunk(chunk)
        if (update.reasoning) turn.reasoning = (turn.reasoning ?? '') + update.reasoning
        if (update.toolCalls.length) addToolCallPieces((turn.toolCalls ??= []), update.toolCalls)
        if (update.text) {
          unshown += update.text
          timer ??= setTimeout(show, SHOW_EVERY_MS)
        }
        if (update.finishReason) turn.finishReason = update.finishReason
        if (update.usage) turn.usage = update.usage
        if (update.tokensPerSecond !== undefined) turn.tokensPerSecond = update.tokensPerSecond
      }
    } catch (e) {
      if (controller.signal.aborted) turn.stopped = true
      else turn.error = (e as Error).message
    } finally {
      clearTimeout(timer)
      show()
      this.streaming = false
      this.controller = undefined
      conversation.updatedAt = Date.now()
      this.persist()
      // The first request to a model loads it: the Models page should say so.
      void models.refresh()
    }
  }

  private persist(): void {
    const sorted = $state.snapshot(this.conversations).sort((a, b) => b.updatedAt - a.updatedAt)
    saveConversations(sorted)
  }
}

export const chat = new ChatStore()
