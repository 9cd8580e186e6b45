/**
 * One table says what Hearth does with each field of the three APIs (main/server/protocols/field-decisions.ts):
 * every field each parser's schema takes has a decision there, each refused field is refused by
 * name, each set-aside field is answered with its warning, and docs/agents.md shows the table as
 * it is.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { FIELD_DECISIONS, fieldDecisionsMarkdown, type Dialect } from '../../main/server/protocols/field-decisions.ts'
import { ApiError } from '../../main/server/services/api-error.ts'
import { messagesRequestSchema, parseMessagesRequest } from '../../main/server/protocols/anthropic/messages-request.ts'
import { chatRequestSchema } from '../../main/server/services/chat/chat-request-schema.ts'
import { parseChatRequest } from '../../main/server/protocols/openai/chat-completions-request.ts'
import { Notices } from '../../main/server/services/pipeline/request-notices.ts'
import { parseResponsesRequest, responsesRequestSchema } from '../../main/server/protocols/responses/responses-request.ts'

const SCHEMAS: Record<Dialect, { shape: Record<string, unknown> }> = {
  chat: chatRequestSchema,
  responses: responsesRequestSchema,
  messages: messagesRequestSchema,
}
const MINIMAL: Record<Dialect, Record<string, unknown>> = {
  chat: { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
  responses: { model: 'm', input: 'hi' },
  messages: { model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] },
}
const PARSE: Record<Dialect, (body: unknown, notices: Notices) => unknown> = {
  chat: (body, notices) => parseChatRequest(body, notices),
  responses: (body, notices) => parseResponsesRequest(body, notices),
  messages: (body) => parseMessagesRequest(body),
}
/** A value for each set-aside field that makes it count as sent. */
const SET_ASIDE_BODIES: Record<string, Record<string, unknown>> = {
  web_search_options: { web_search_options: {} },
  verbosity: { verbosity: 'low' },
  'reasoning.summary': { reasoning: { summary: 'auto' } },
  'text.verbosity': { text: { verbosity: 'low' } },
  'truncation: auto': { truncation: 'auto' },
  context_management: { context_management: [{ type: 'compaction', compact_threshold: 1000 }] },
  'prompt_cache_options.prewarm': { prompt_cache_options: { prewarm: true } },
}
const dialects = Object.keys(FIELD_DECISIONS) as Dialect[]
const topLevel = (field: string) => /^\w+$/.test(field)

describe.each(dialects)('the field decisions of %s', (dialect) => {
  const decisions = FIELD_DECISIONS[dialect]

  it("decide every field the parser's schema takes, once, and name no taken field that it does not take", () => {
    const taken = decisions.filter((d) => d.decision === 'honoured' || d.decision === 'accepted').map((d) => d.field)
    expect(new Set(taken).size).toBe(taken.length)
    expect([...taken].sort()).toEqual(Object.keys(SCHEMAS[dialect].shape).sort())
  })

  it('refuse each refused field by name, with why', () => {
    for (const d of decisions.filter((d) => d.decision === 'refused')) {
      expect(Object.keys(SCHEMAS[dialect].shape)).not.toContain(d.field)
      const error = (() => {
        try {
          PARSE[dialect]({ ...MINIMAL[dialect], [d.field]: 1 }, new Notices())
        } catch (e) {
          return e
        }
      })()
      expect(error, d.field).toBeInstanceOf(ApiError)
      expect(error).toMatchObject({ status: 400, code: 'unsupported_parameter', param: d.field })
      expect((error as ApiError).message).toContain(d.note)
    }
  })

  it('take a refused field sent as null as not sent', () => {
    for (const d of decisions.filter((d) => d.decision === 'refused')) {
      expect(() => PARSE[dialect]({ ...MINIMAL[dialect], [d.field]: null }, new Notices()), d.field).not.toThrow()
    }
  })

  it('answer each set-aside field with its warning', () => {
    for (const d of decisions.filter((d) => d.decision === 'set aside')) {
      const notices = new Notices()
      PARSE[dialect]({ ...MINIMAL[dialect], ...SET_ASIDE_BODIES[d.field] }, notices)
      expect(notices.list(), d.field).toContain(d.note)
    }
    expect(decisions.filter((d) => !topLevel(d.field)).every((d) => d.decision === 'set aside')).toBe(true)
  })
})

describe('docs/agents.md', () => {
  it('shows the field decisions as the table has them', () => {
    const page = readFileSync(join(import.meta.dirname, '../..', 'docs', 'agents.md'), 'utf8')
    const shown = /<!-- field-decisions:start[^>]*-->\n([\s\S]*?)\n<!-- field-decisions:end -->/.exec(page)?.[1]
    expect(shown, 'docs/agents.md lacks the field-decisions section').toBeDefined()
    // On a difference, the table as it should read is what this test prints as "expected".
    expect(shown!.trim()).toBe(fieldDecisionsMarkdown())
  })
})
