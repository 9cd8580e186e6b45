/**
 * Conversations kept across restarts in localStorage. Storage is small (about 5 MB), so when it is
 * full the pictures of older conversations are dropped first, then their words are kept without
 * pictures at all, rather than losing the conversations. Answers kept before the page kept their
 * Responses items get them as they load (conversation-upgrade.ts).
 */
import type { ChatTurn } from './chat-messages.ts'
import { withAnswerItems } from './conversation-upgrade.ts'

export interface Conversation {
  id: string
  title: string
  model: string
  updatedAt: number
  turns: ChatTurn[]
  /** The MCP servers whose tools this conversation offers the model. */
  toolServers?: string[]
}

const KEY = 'hearth.conversations.v1'

export function loadConversations(storage: Storage = localStorage): Conversation[] {
  try {
    const parsed = JSON.parse(storage.getItem(KEY) ?? '[]') as unknown
    if (!Array.isArray(parsed)) return []
    const kept = (parsed as Conversation[]).filter((c) => c && typeof c.id === 'string' && Array.isArray(c.turns))
    return kept.map((c) => ({ ...c, turns: withAnswerItems(c.turns) }))
  } catch {
    return []
  }
}

/** Newest first. Returns false when even the words did not fit. */
export function saveConversations(conversations: readonly Conversation[], storage: Storage = localStorage): boolean {
  const withoutImages = (keep: (index: number) => boolean) =>
    conversations.map((c, i) => (keep(i) ? c : { ...c, turns: c.turns.map(({ image: _image, ...turn }) => turn) }))
  const attempts = [conversations, withoutImages((i) => i === 0), withoutImages(() => false)]
  for (const attempt of attempts) {
    try {
      storage.setItem(KEY, JSON.stringify(attempt))
      return true
    } catch {
      // full: try with less
    }
  }
  return false
}
