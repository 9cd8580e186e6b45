/**
 * llama-server's error texts, as the pinned llama-server writes them, read by the one module that
 * reads them (engines/llama-server/upstream-errors.ts). test/engines/llama-patches.test.ts provokes
 * the same answers from the real program, so an upgrade that rewords one fails there first.
 */
import { describe, expect, it } from 'vitest'
import { readUpstreamError } from '../../engines/llama-server/upstream-errors.ts'

const body = (message: string, type = 'invalid_request_error', extra: Record<string, unknown> = {}) =>
  JSON.stringify({ error: { code: 400, message, type, ...extra } })

describe("reading llama-server's errors", () => {
  it('a prompt over the context, by its type, with the prompt size', () => {
    const error = readUpstreamError(
      400,
      body('request (2100 tokens) exceeds the available context size (2048 tokens), try increasing it', 'exceed_context_size_error', {
        n_prompt_tokens: 2100,
        n_ctx: 2048,
      }),
    )
    expect(error).toEqual({ kind: 'context_exceeded', message: expect.stringContaining('exceeds the available context size'), promptTokens: 2100 })
  })

  it('a completion over the context, by its words', () => {
    expect(readUpstreamError(400, body('the request exceeds the available context size')).kind).toBe('context_exceeded')
  })

  it('fill-in-the-middle on a model without its tokens', () => {
    expect(readUpstreamError(501, body('Infill is not supported by this model: prefix token is missing. ', 'not_supported_error')).kind).toBe(
      'infill_unsupported',
    )
  })

  it('schema errors: where in the schema, an unresolved $ref, a pattern, or only that it failed', () => {
    expect(readUpstreamError(400, body('JSON schema conversion failed:\nJSON schema error at #/properties/a~1b: cannot resolve $ref #/$defs/x'))).toMatchObject(
      { kind: 'schema_at', pointer: ['properties', 'a/b'], reason: 'cannot resolve $ref #/$defs/x' },
    )
    expect(readUpstreamError(400, body('JSON schema conversion failed:\nUnresolved $ref #/$defs/missing'))).toMatchObject({
      kind: 'schema_ref',
      ref: '#/$defs/missing',
    })
    expect(readUpstreamError(400, body('JSON schema conversion failed:\nInvalid pattern ^(a$: Unbalanced parentheses'))).toMatchObject({
      kind: 'schema_pattern',
      pattern: '^(a$',
      reason: 'Unbalanced parentheses',
    })
    expect(readUpstreamError(400, body('JSON schema conversion failed:\nsomething else'))).toMatchObject({ kind: 'schema', reason: 'something else' })
  })

  it('an image the projector cannot read, and a conversation the template refuses', () => {
    expect(readUpstreamError(400, body('Failed to load image or audio file')).kind).toBe('image')
    expect(readUpstreamError(400, body('While executing CallExpression at line 1: Conversation roles must alternate user/assistant')).kind).toBe('template')
    expect(readUpstreamError(400, body('Assistant message must be last role')).kind).toBe('template')
  })

  it('anything else keeps its message, and a body that is not JSON is the message', () => {
    expect(readUpstreamError(500, body('out of memory', 'server_error'))).toEqual({ kind: 'other', message: 'out of memory' })
    expect(readUpstreamError(502, 'Bad gateway')).toEqual({ kind: 'other', message: 'Bad gateway' })
    // a streaming parser's failure quotes the model's words, which are no sign of an image or a template
    const parser = "Invalid diff: 'Sanford immediately' not found at start of 'an image template'"
    expect(readUpstreamError(500, body(parser, 'server_error'))).toEqual({ kind: 'other', message: parser })
  })
})
