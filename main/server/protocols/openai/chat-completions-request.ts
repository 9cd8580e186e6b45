/**
 * A chat completions body as OpenAI's clients send it: its fields decided by the one table
 * (refused by name, or set aside and said so), its schema, then the checks every chat request gets.
 */
import { refuseRefusedFields, setAsideWarnings } from '../field-decisions.ts'
import { unsupportedParameter } from '../../services/api-error.ts'
import { checkChatRequest } from '../../services/chat/chat-request.ts'
import { chatRequestSchema, type ChatRequest } from '../../services/chat/chat-request-schema.ts'
import { parseOrThrow } from '../../services/chat/validation.ts'
import { Notices } from '../../services/pipeline/request-notices.ts'

/** The request, checked; what it asked for that Hearth set aside goes into `notices`. */
export function parseChatRequest(body: unknown, notices: Notices = new Notices()): ChatRequest {
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const fields = body as Record<string, unknown>
    refuseRefusedFields('chat', fields)
    const n = fields.n
    if (Number.isInteger(n) && (n as number) > 1) throw unsupportedParameter('n', 'only n = 1 is supported (one answer per request)')
    for (const warning of setAsideWarnings('chat', fields)) notices.add(warning)
  }
  return checkChatRequest(parseOrThrow(chatRequestSchema, body), notices)
}
