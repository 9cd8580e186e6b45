/**
 * Which conversation a request belongs to, as the client says it: OpenAI's `prompt_cache_key`, the
 * session in Anthropic's `metadata.user_id` (Claude Code writes a JSON object there), or the
 * session headers agents send (`x-claude-code-session-id`, Codex's `session-id`, OpenCode's
 * `x-session-affinity`). The engine keeps a conversation's prompt on its own slot by this key, so
 * side requests and sub-agents do not push it out. None is needed: the longest shared prefix is
 * the fallback.
 */
import type { Request } from 'express'

const SESSION_HEADERS = ['x-session-affinity', 'x-claude-code-session-id', 'session-id', 'x-session-id'] as const
const MAX_KEY_LENGTH = 256

export function conversationKey(req: Request, body: { prompt_cache_key?: unknown; user_id?: unknown; user?: unknown }): string | undefined {
  const fromBody = text(body.prompt_cache_key) ?? sessionOfUserId(body.user_id)
  if (fromBody) return fromBody
  for (const name of SESSION_HEADERS) {
    const value = text(req.headers[name])
    if (value) return value
  }
  return text(body.user)
}

/** Claude Code's `metadata.user_id` is a JSON object with a `session_id`; other clients send a plain id. */
function sessionOfUserId(userId: unknown): string | undefined {
  const id = text(userId)
  if (!id?.startsWith('{')) return id
  try {
    const parsed = JSON.parse(id) as { session_id?: unknown }
    return text(parsed.session_id) ?? id
  } catch {
    return id
  }
}

function text(value: unknown): string | undefined {
  return typeof value === 'string' && value.length > 0 ? value.slice(0, MAX_KEY_LENGTH) : undefined
}
