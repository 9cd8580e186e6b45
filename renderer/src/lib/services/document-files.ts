/** Which files are documents for the chat, and the documents a conversation has attached. */
import type { ChatTurn, DocumentRef } from './chat-messages.ts'

export const DOCUMENT_EXTENSIONS = ['.txt', '.md', '.markdown', '.pdf', '.docx'] as const
export const DOCUMENT_ACCEPT = DOCUMENT_EXTENSIONS.join(',')

export function isDocumentFile(file: { name: string; type: string }): boolean {
  const name = file.name.toLowerCase()
  return DOCUMENT_EXTENSIONS.some((ext) => name.endsWith(ext)) || file.type === 'text/plain' || file.type === 'text/markdown'
}

/** The documents attached anywhere in the conversation, each once, oldest first. */
export function conversationDocuments(turns: readonly ChatTurn[]): DocumentRef[] {
  const seen = new Map<string, DocumentRef>()
  for (const turn of turns) for (const d of turn.documents ?? []) if (!seen.has(d.id)) seen.set(d.id, d)
  return [...seen.values()]
}
