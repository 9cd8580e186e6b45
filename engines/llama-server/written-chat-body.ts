/**
 * A chat request body for llama-server with its messages and tools written out as JSON once, for
 * two readers: the slot choice, which hashes the prompt as one text (system messages, tools, then
 * the rest, as templates lay a prompt out), and the request itself. An agent's turn is 50–150 kB
 * of messages and tools: a second pass over it cost ~1.8 ms before the engine heard of the turn.
 */
export class WrittenChatBody {
  private readonly system: string[]
  private readonly rest: string[]
  private readonly tools: string | undefined
  /**
   * The prompt as the slot choice reads it, in the order chat templates put it: the system prompt
   * first, then the tools (inside or after it), then the conversation. With the tools first,
   * sessions of different projects with the same agent's tools looked alike for as long as the
   * tools run (35k characters for Claude Code's), while the engine, reading the system prompt
   * first, saw nothing in common.
   */
  readonly promptText: string

  constructor(readonly body: { messages: readonly unknown[]; tools?: unknown; [field: string]: unknown }) {
    const written = body.messages.map((m) => JSON.stringify(m))
    const leading = body.messages.findIndex((m) => !isSystem(m))
    this.system = leading < 0 ? written : written.slice(0, leading)
    this.rest = leading < 0 ? [] : written.slice(leading)
    this.tools = body.tools === undefined ? undefined : JSON.stringify(body.tools)
    this.promptText = `[${[...this.system, this.tools ?? 'null', ...this.rest].join(',')}]`
  }

  /** The whole body as JSON, with the fields set on it since (its slot, say); as `JSON.stringify` writes it, but for the order of fields. */
  json(): string {
    const { messages: _messages, tools: _tools, ...fields } = this.body
    const others = JSON.stringify(fields)
    const tools = this.tools === undefined ? '' : `,"tools":${this.tools}`
    return `{"messages":[${[...this.system, ...this.rest].join(',')}]${tools}${others === '{}' ? '' : `,${others.slice(1, -1)}`}}`
  }
}

function isSystem(message: unknown): boolean {
  const role = (message as { role?: unknown } | null)?.role
  return role === 'system' || role === 'developer'
}
