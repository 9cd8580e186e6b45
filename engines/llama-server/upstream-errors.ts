/**
 * What llama-server's error answers mean, read from their text in this one place. Its wording is
 * upstream's and may move with any new commit; test/fast/upstream-errors.test.ts holds the texts as the
 * pinned llama-server writes them, and test/engines/llama-patches.test.ts provokes them from the real
 * program, so a rebase that changes one fails there, not in a user's request.
 */

export type UpstreamError =
  | { kind: 'context_exceeded'; message: string; promptTokens: number | undefined }
  | { kind: 'infill_unsupported'; message: string }
  /** The grammar builder stopped at a place in a schema: a JSON pointer into it. */
  | { kind: 'schema_at'; message: string; pointer: string[]; reason: string }
  | { kind: 'schema_ref'; message: string; ref: string }
  | { kind: 'schema_pattern'; message: string; pattern: string; reason: string }
  | { kind: 'schema'; message: string; reason: string }
  | { kind: 'image'; message: string }
  /** The model's chat template refused the conversation (roles out of order, two calls where it takes one…). */
  | { kind: 'template'; message: string }
  | { kind: 'other'; message: string }

/** Reads an error answer of llama-server (its JSON body, or plain text) for what it means. */
export function readUpstreamError(status: number, body: string): UpstreamError {
  let error: { message?: string; type?: string; n_prompt_tokens?: number } = {}
  try {
    error = (JSON.parse(body) as { error?: typeof error }).error ?? {}
  } catch {
    // not JSON: the message is the body
  }
  const message = error.message ?? body
  if (error.type === 'exceed_context_size_error') return { kind: 'context_exceeded', message, promptTokens: error.n_prompt_tokens }
  if (/Infill is not supported/i.test(message)) return { kind: 'infill_unsupported', message }
  // "JSON schema error at #/properties/a: cannot resolve $ref #/$defs/missing, $defs not found"
  const located = /JSON schema error at #([^:\s]*): (.+)$/m.exec(message)
  if (located) {
    const pointer = located[1]!
      .split('/')
      .slice(1)
      .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    return { kind: 'schema_at', message, pointer, reason: located[2]! }
  }
  const ref = /Unresolved \$ref (\S+)/.exec(message)
  if (ref) return { kind: 'schema_ref', message, ref: ref[1]! }
  const pattern = /Invalid pattern (.+?): (.+)$/m.exec(message)
  if (pattern) return { kind: 'schema_pattern', message, pattern: pattern[1]!, reason: pattern[2]! }
  if (/JSON schema conversion failed/.test(message)) return { kind: 'schema', message, reason: message.replace(/^JSON schema conversion failed:\s*/, '') }
  // The engine's parser of the model's own output gave up (common/chat.cpp); its message quotes
  // that output, which may hold any word ("immediately", "template"), so no word below may read it.
  if (/^Invalid diff\b/.test(message)) return { kind: 'other', message }
  if (/image|media|mtmd|bitmap/i.test(message)) return { kind: 'image', message }
  if (/template|jinja|While executing|Unable to generate parser/i.test(message) || (status === 400 && /role/i.test(message)))
    return { kind: 'template', message }
  // Completions name an over-long prompt only in words.
  if (/exceed|context/i.test(message)) return { kind: 'context_exceeded', message, promptTokens: undefined }
  return { kind: 'other', message }
}
