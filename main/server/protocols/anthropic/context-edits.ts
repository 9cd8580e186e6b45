/**
 * Anthropic's context editing (`context_management.edits`), applied to the conversation before the
 * model sees it, as Anthropic applies it on its side:
 * - `clear_thinking_20251015` drops the thinking of earlier assistant turns, keeping the last
 *   `keep.value` turns that thought (all of them with `keep: "all"`; the last one by default);
 * - `clear_tool_uses_20250919`, once the prompt passes its trigger, replaces the oldest tool results
 *   with a placeholder, keeping the last `keep.value` (3 by default) and any tool in `exclude_tools`.
 *   Hearth counts the prompt before the engine tokenises it, at about four characters a token.
 * The answer reports what was applied, in Anthropic's `context_management.applied_edits`.
 */
import type { AnthropicMessage, ContentBlock, ContextEdit } from './messages-request.ts'

export interface AppliedEdit {
  type: ContextEdit['type']
  cleared_thinking_turns?: number
  cleared_tool_uses?: number
  cleared_input_tokens: number
}

const CLEARED_RESULT = '[This tool result was cleared to save context.]'
const CHARACTERS_PER_TOKEN = 4
const DEFAULT_TRIGGER_TOKENS = 100_000
const DEFAULT_KEPT_TOOL_USES = 3

export function applyContextEdits(
  messages: readonly AnthropicMessage[],
  edits: readonly ContextEdit[] = [],
): { messages: AnthropicMessage[]; applied: AppliedEdit[] } {
  let current = messages.map((m) => ({ ...m }))
  const applied: AppliedEdit[] = []
  for (const edit of edits) {
    const outcome = edit.type === 'clear_thinking_20251015' ? clearThinking(current, edit) : clearToolUses(current, edit)
    current = outcome.messages
    if (outcome.applied) applied.push(outcome.applied)
  }
  return { messages: current, applied }
}

function clearThinking(messages: AnthropicMessage[], edit: Extract<ContextEdit, { type: 'clear_thinking_20251015' }>) {
  if (edit.keep === 'all') return { messages, applied: undefined }
  const keep = edit.keep?.value ?? 1
  const thinking = (m: AnthropicMessage) => m.role === 'assistant' && Array.isArray(m.content) && m.content.some(isThinking)
  const turns = messages.map((m, i) => (thinking(m) ? i : -1)).filter((i) => i >= 0)
  const cleared = new Set(turns.slice(0, Math.max(0, turns.length - keep)))
  if (cleared.size === 0) return { messages, applied: undefined }
  let characters = 0
  const edited = messages.map((m, i) => {
    if (!cleared.has(i) || !Array.isArray(m.content)) return m
    characters += m.content.filter(isThinking).reduce((sum, b) => sum + (b.type === 'thinking' ? b.thinking.length : b.data.length), 0)
    return { ...m, content: m.content.filter((b) => !isThinking(b)) }
  })
  return { messages: edited, applied: { type: edit.type, cleared_thinking_turns: cleared.size, cleared_input_tokens: tokensOf(characters) } }
}

function clearToolUses(messages: AnthropicMessage[], edit: Extract<ContextEdit, { type: 'clear_tool_uses_20250919' }>) {
  const uses = messages.flatMap((m) => (m.role === 'assistant' && Array.isArray(m.content) ? m.content.filter((b) => b.type === 'tool_use') : []))
  const trigger = edit.trigger ?? { type: 'input_tokens' as const, value: DEFAULT_TRIGGER_TOKENS }
  const reached = trigger.type === 'tool_uses' ? uses.length > trigger.value : tokensOf(JSON.stringify(messages).length) > trigger.value
  if (!reached) return { messages, applied: undefined }
  const excluded = new Set(edit.exclude_tools ?? [])
  const candidates = uses.filter((u) => !excluded.has(u.name))
  const kept = edit.keep?.value ?? DEFAULT_KEPT_TOOL_USES
  const toClear = new Set(candidates.slice(0, Math.max(0, candidates.length - kept)).map((u) => u.id))
  if (toClear.size === 0) return { messages, applied: undefined }
  let characters = 0
  const edited = messages.map((m) => {
    if (!Array.isArray(m.content)) return m
    const content = m.content.map((b): ContentBlock => {
      if (b.type === 'tool_result' && toClear.has(b.tool_use_id)) {
        characters += JSON.stringify(b.content ?? '').length
        return { ...b, content: CLEARED_RESULT }
      }
      if (b.type === 'tool_use' && toClear.has(b.id) && edit.clear_tool_inputs) {
        characters += JSON.stringify(b.input ?? {}).length
        return { ...b, input: {} }
      }
      return b
    })
    return { ...m, content }
  })
  const clearedTokens = tokensOf(characters)
  // Clearing less than asked is not worth breaking the prompt cache for: nothing is cleared then.
  if (edit.clear_at_least && clearedTokens < edit.clear_at_least.value) return { messages, applied: undefined }
  return { messages: edited, applied: { type: edit.type, cleared_tool_uses: toClear.size, cleared_input_tokens: clearedTokens } }
}

function isThinking(block: ContentBlock): block is Extract<ContentBlock, { type: 'thinking' | 'redacted_thinking' }> {
  return block.type === 'thinking' || block.type === 'redacted_thinking'
}

function tokensOf(characters: number): number {
  return Math.ceil(characters / CHARACTERS_PER_TOKEN)
}
