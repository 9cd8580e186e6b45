/**
 * A chat body written out once (engines/llama-server/written-chat-body.ts) must send llama-server
 * exactly the body it stands for, and give the slot choice the prompt text it always had: the slot
 * cache keeps the hashes of that text on disk across restarts, so a different text would make every
 * saved conversation look like a stranger after an update.
 */
import { describe, expect, it } from 'vitest'
import { WrittenChatBody } from '../../engines/llama-server/written-chat-body.ts'

/** The prompt text as the slot choice wrote it before the body was written once. */
function promptTextBefore(body: { messages: readonly unknown[]; tools?: unknown }): string {
  const isSystem = (m: unknown) => ['system', 'developer'].includes((m as { role?: string }).role ?? '')
  const leading = body.messages.findIndex((m) => !isSystem(m))
  const system = leading < 0 ? body.messages : body.messages.slice(0, leading)
  return JSON.stringify([...system, body.tools ?? null, ...body.messages.slice(system.length)])
}

const tools = [
  {
    type: 'function',
    function: { name: 'read_file', description: 'Reads "a file" ✓', parameters: { type: 'object', properties: { path: { type: 'string' } } } },
  },
]
const bodies = {
  'system, tools and turns': {
    messages: [
      { role: 'system', content: 'You are terse.' },
      { role: 'developer', content: 'Use tools.' },
      { role: 'user', content: 'Hi 👋\n"quoted"' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'read_file', arguments: '{"path":"a"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'text' },
    ],
    tools,
    tool_choice: 'auto',
    stream: true,
    max_tokens: 64,
    temperature: 0.2,
  },
  'no system message': { messages: [{ role: 'user', content: 'Hello' }], stream: true, max_tokens: undefined },
  'only system messages': { messages: [{ role: 'system', content: 'Nothing else.' }], tools: [] },
  'system later in the conversation': {
    messages: [
      { role: 'user', content: 'a' },
      { role: 'system', content: 'b' },
      { role: 'user', content: 'c' },
    ],
    response_format: { type: 'json_schema', json_schema: { schema: { type: 'object' } } },
  },
}

describe('a chat body written once', () => {
  for (const [name, body] of Object.entries(bodies)) {
    it(`sends the body it stands for, and the slot choice its old prompt text: ${name}`, () => {
      const written = new WrittenChatBody(structuredClone(body))
      expect(written.promptText).toBe(promptTextBefore(body))
      expect(JSON.parse(written.json())).toEqual(JSON.parse(JSON.stringify(body)))
      // A field set after (the slot llama-server is to use) goes with the body.
      written.body.id_slot = 2
      expect(JSON.parse(written.json())).toEqual({ ...JSON.parse(JSON.stringify(body)), id_slot: 2 })
    })
  }
})
