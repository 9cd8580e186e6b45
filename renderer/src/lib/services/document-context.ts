/**
 * Documents in the chat: which files are documents, and the question as sent with the parts that
 * POST /api/documents/context chose (whole documents, or the excerpts closest to the question),
 * numbered so the answer can cite them and the UI can show them as its sources.
 */
import type { ChatRequestMessage, ChatTurn, Citation, DocumentRef } from './chat-messages.ts'
import type { DocumentContext, DocumentObject, DocumentPart } from '../../../../main/server/wire-types.ts'

export const DOCUMENT_EXTENSIONS = ['.txt', '.md', '.markdown', '.pdf', '.docx'] as const
export const DOCUMENT_ACCEPT = DOCUMENT_EXTENSIONS.join(',')

export function isDocumentFile(file: { name: string; type: string }): boolean {
  const name = file.name.toLowerCase()
  return DOCUMENT_EXTENSIONS.some((ext) => name.endsWith(ext)) || file.type === 'text/plain' || file.type === 'text/markdown'
}

export type DocumentMeta = DocumentObject
export type ContextPart = DocumentPart
export type ContextBody = DocumentContext

/** The documents attached anywhere in the conversation, each once, oldest first. */
export function conversationDocuments(turns: readonly ChatTurn[]): DocumentRef[] {
  const seen = new Map<string, DocumentRef>()
  for (const turn of turns) for (const d of turn.documents ?? []) if (!seen.has(d.id)) seen.set(d.id, d)
  return [...seen.values()]
}

/** Each part's heading: its name, and which part of its document when a document gives several. */
function headings(parts: readonly ContextPart[]): string[] {
  const perDocument = new Map<string, number>()
  for (const p of parts) perDocument.set(p.document, (perDocument.get(p.document) ?? 0) + 1)
  // Parts of one document are numbered in the order they appear in it.
  const order = new Map<ContextPart, number>()
  const byDocument = new Map<string, ContextPart[]>()
  for (const p of parts) byDocument.set(p.document, [...(byDocument.get(p.document) ?? []), p])
  for (const list of byDocument.values()) [...list].sort((a, b) => a.start - b.start).forEach((p, i) => order.set(p, i + 1))
  return parts.map((p) => (perDocument.get(p.document)! > 1 ? `${p.name} (part ${order.get(p)})` : p.name))
}

/** The user's message with the documents' parts before the question. */
export function documentsPrompt(parts: readonly ContextPart[], question: string): string {
  if (parts.length === 0) return question
  const titles = headings(parts)
  const blocks = parts.map((p, i) => `[${p.citation}] ${titles[i]}\n${p.text}`)
  return `Use these excerpts from the attached documents. Cite them as [1], [2]…\n\n${blocks.join('\n\n')}\n\nQuestion: ${question}`
}

/** The sources shown under the answer. */
export function citationsOf(parts: readonly ContextPart[]): Citation[] {
  const titles = headings(parts)
  return parts.map((p, i) => ({ n: p.citation, name: titles[i]!, text: p.text }))
}

/** About how many tokens the messages take (3.5 characters a token), so the server can budget the documents. */
export function estimateTokens(messages: readonly ChatRequestMessage[]): number {
  let characters = 0
  for (const m of messages) {
    if (typeof m.content === 'string') characters += m.content.length
    else for (const part of m.content ?? []) if (part.type === 'text') characters += part.text.length
  }
  return Math.ceil(characters / 3.5)
}
