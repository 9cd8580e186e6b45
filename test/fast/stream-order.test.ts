/**
 * The order of every streamed answer, rule by rule, through the pure writers the routes use (no
 * server, no engine): chat and completions as OpenAI sends them, transcripts, Responses events
 * and Anthropic's message events.
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { ChatResult, CompleteResult, JobProgress, SpeechResult } from '../../engines/engine-jobs.ts'
import { MessageStreamWriter } from '../../main/server/protocols/anthropic/messages-response.ts'
import { ChatStreamWriter } from '../../main/server/protocols/openai/chat-response.ts'
import { CompletionStreamWriter } from '../../main/server/protocols/openai/completions-response.ts'
import { TranscriptStreamWriter } from '../../main/server/protocols/openai/speech-response.ts'
import { ReasoningSeal } from '../../main/server/services/reasoning-seal.ts'
import { Notices } from '../../main/server/services/pipeline/request-notices.ts'
import { ResponseStreamWriter, type ResponseShape } from '../../main/server/protocols/responses/response-object.ts'
import { ResponseTools } from '../../main/server/protocols/responses/response-tools.ts'
import { parseResponsesRequest } from '../../main/server/protocols/responses/responses-request.ts'

const seal = ReasoningSeal.load(join(mkdtempSync(join(tmpdir(), 'hearth-seal-')), 'reasoning-key'))

const who = { id: 'chatcmpl-1', created: 1, model: 'm' }
const text = (t: string): JobProgress => ({ type: 'text', text: t })

function chatResult(overrides: Partial<ChatResult> = {}): ChatResult {
  return {
    type: 'chat',
    text: 'Hi there',
    reasoning: '',
    toolCalls: [],
    logprobs: undefined,
    finishReason: 'stop',
    promptTokens: 5,
    completionTokens: 2,
    reasoningTokens: 0,
    timings: { promptMs: 1, promptPerSecond: 5000, predictedMs: 1, predictedPerSecond: 2000 },
    ...overrides,
  }
}

describe('chat completion chunks', () => {
  const deltas = (chunks: Array<{ choices: Array<{ delta?: unknown }> }>) => chunks.map((c) => c.choices[0]?.delta)

  it('sends the role first, with the first piece', () => {
    const writer = new ChatStreamWriter(who, false)
    expect(deltas(writer.progress(text('Hi')))).toEqual([{ role: 'assistant', content: '' }, { content: 'Hi' }])
    expect(deltas(writer.progress(text(' there')))).toEqual([{ content: ' there' }])
  })

  it('sends the role before the finish when nothing was generated', () => {
    const chunks = new ChatStreamWriter(who, false).finish(chatResult({ text: '' }))
    expect(deltas(chunks)).toEqual([{ role: 'assistant', content: '' }, {}])
  })

  it('puts the finish reason in a chunk of its own, with the timings', () => {
    const writer = new ChatStreamWriter(who, false)
    writer.progress(text('Hi'))
    const [finish, ...rest] = writer.finish(chatResult({ finishReason: 'length' }))
    expect(rest).toEqual([])
    expect(finish!.choices).toEqual([{ index: 0, delta: {}, logprobs: null, finish_reason: 'length' }])
    expect(finish).toHaveProperty('timings.predicted_per_second', 2000)
  })

  it('ends with a usage chunk without choices when usage was asked for, and usage: null before it', () => {
    const writer = new ChatStreamWriter(who, true)
    const all = [...writer.progress(text('Hi')), ...writer.finish(chatResult())]
    expect(all.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 } })
    for (const chunk of all.slice(0, -1)) expect(chunk).toHaveProperty('usage', null)
  })

  it('leaves usage out of every chunk when it was not asked for', () => {
    const writer = new ChatStreamWriter(who, false)
    const all = [...writer.progress(text('Hi')), ...writer.finish(chatResult())]
    for (const chunk of all) expect(chunk).not.toHaveProperty('usage')
  })

  it('sends nothing for progress that is not part of a chat answer', () => {
    expect(new ChatStreamWriter(who, false).progress({ type: 'segment', segment: { startMs: 0, endMs: 1, text: 'x' } })).toEqual([])
  })

  it('names a tool call in its first piece only', () => {
    const writer = new ChatStreamWriter(who, false)
    const first = writer.progress({ type: 'tool_call', index: 0, id: 'call_1', name: 'weather', arguments: '{"ci' })
    const next = writer.progress({ type: 'tool_call', index: 0, arguments: 'ty": "Oslo"}' })
    expect(deltas(first)[1]).toEqual({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"ci' } }] })
    expect(deltas(next)).toEqual([{ tool_calls: [{ index: 0, function: { arguments: 'ty": "Oslo"}' } }] }])
  })
})

describe('completion chunks', () => {
  const completion: CompleteResult = { type: 'complete', text: 'ab', finishReason: 'stop', promptTokens: 3, completionTokens: 2, logprobs: undefined }

  it('sends the echoed prompt first, and nothing first without echo', () => {
    expect(new CompletionStreamWriter(who, false, 'Once').start().map((c) => c.choices[0]?.text)).toEqual(['Once'])
    expect(new CompletionStreamWriter(who, false, undefined).start()).toEqual([])
  })

  it('counts log probability offsets from the start of the whole text, echo included', () => {
    const writer = new CompletionStreamWriter(who, false, 'Once')
    const logprob = (token: string) => ({ token, logprob: -1, bytes: [...Buffer.from(token)], top_logprobs: [] })
    writer.progress({ type: 'text', text: ' up', logprobs: [logprob(' up')] })
    const [chunk] = writer.progress({ type: 'text', text: 'on', logprobs: [logprob('on')] })
    expect((chunk as { choices: Array<{ logprobs: { text_offset: number[] } }> }).choices[0]!.logprobs.text_offset).toEqual([7])
  })

  it('puts the finish reason in an empty chunk of its own, then usage when asked', () => {
    const [finish, usage] = new CompletionStreamWriter(who, true, undefined).finish(completion)
    expect(finish!.choices).toEqual([{ text: '', index: 0, logprobs: null, finish_reason: 'stop' }])
    expect(usage).toMatchObject({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } })
  })
})

describe('transcript events', () => {
  const segment = (t: string) => ({ startMs: 0, endMs: 1000, text: t })
  const result = (texts: string[]): SpeechResult => ({ type: 'speech', segments: texts.map(segment), language: 'en', durationSeconds: 2, processMs: 1 })

  it('sends a delta per segment, and deltas that add up to the done text', () => {
    const writer = new TranscriptStreamWriter({ logprobs: false, usageSeconds: undefined })
    const events = [...writer.progress({ type: 'segment', segment: segment(' Hello') }), ...writer.finish(result([' Hello', ' world. ']))]
    expect(events.map((e) => e.type)).toEqual(['transcript.text.delta', 'transcript.text.delta', 'transcript.text.done'])
    const deltas = events.filter((e) => e.type === 'transcript.text.delta').map((e) => (e as { delta: string }).delta)
    expect(deltas.join('')).toBe((events.at(-1) as { text: string }).text)
  })

  it('sends segments the engine did not stream before the done event', () => {
    const events = new TranscriptStreamWriter({ logprobs: false, usageSeconds: undefined }).finish(result([' One', ' two']))
    expect(events.map((e) => e.type)).toEqual(['transcript.text.delta', 'transcript.text.delta', 'transcript.text.done'])
  })

  it('puts usage in the done event only when asked', () => {
    const withUsage = new TranscriptStreamWriter({ logprobs: false, usageSeconds: 2 }).finish(result([' x']))
    expect(withUsage.at(-1)).toMatchObject({ usage: { type: 'duration', seconds: 2 } })
    expect(new TranscriptStreamWriter({ logprobs: false, usageSeconds: undefined }).finish(result([' x'])).at(-1)).not.toHaveProperty('usage')
  })
})

describe('Responses events', () => {
  const request = parseResponsesRequest({ model: 'm', input: 'hi' }, new Notices())
  const responseWho = { id: 'resp_1', createdAt: 1, model: 'm' }
  const shape: ResponseShape = { tools: new ResponseTools([], new Notices()), seal, encryptedReasoning: false }

  it('starts with response.created then response.in_progress', () => {
    expect(new ResponseStreamWriter(responseWho, request, shape).start().map((e) => e.type)).toEqual(['response.created', 'response.in_progress'])
  })

  it('opens an item and its content part before the first text delta, and closes them in order before completing', () => {
    const writer = new ResponseStreamWriter(responseWho, request, shape)
    writer.start()
    const opening = writer.progress(text('Hi')).map((e) => e.type)
    expect(opening).toEqual(['response.output_item.added', 'response.content_part.added', 'response.output_text.delta'])
    const closing = writer.finish(chatResult({ text: 'Hi' })).events.map((e) => e.type)
    expect(closing).toEqual(['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed'])
  })

  it('numbers every event in sequence', () => {
    const writer = new ResponseStreamWriter(responseWho, request, shape)
    const events = [...writer.start(), ...writer.progress(text('Hi')), ...writer.finish(chatResult({ text: 'Hi' })).events]
    expect(events.map((e) => (e as unknown as { sequence_number: number }).sequence_number)).toEqual(events.map((_, i) => i))
  })
})

describe("Anthropic's message events", () => {
  const kinds = (events: Array<{ event: string }>) => events.map((e) => e.event)
  const shape = { seal, omitThinking: false, appliedEdits: undefined }

  it("starts the message with the prompt's usage, cache reads apart, when the engine reports it first", () => {
    const writer = new MessageStreamWriter({ id: 'msg_1', model: 'm' }, shape)
    const [start] = writer.progress({ type: 'prompt', promptTokens: 120, cachedTokens: 100 })
    expect(start).toMatchObject({ event: 'message_start', data: { message: { usage: { input_tokens: 20, cache_read_input_tokens: 100, output_tokens: 0 } } } })
    expect(kinds(writer.progress(text('Hi')))).toEqual(['content_block_start', 'content_block_delta'])
  })

  it('starts a block when the kind of output changes, stopping the open one first', () => {
    const writer = new MessageStreamWriter({ id: 'msg_1', model: 'm' }, shape)
    expect(kinds(writer.progress({ type: 'reasoning', text: 'hmm' }))).toEqual(['message_start', 'content_block_start', 'content_block_delta'])
    // A thinking block ends with its signature, which holds the thinking sealed.
    const next = writer.progress(text('Hi'))
    expect(kinds(next)).toEqual(['content_block_delta', 'content_block_stop', 'content_block_start', 'content_block_delta'])
    expect(seal.open((next[0]!.data.delta as { signature: string }).signature)).toBe('hmm')
    expect(kinds(writer.progress(text('!')))).toEqual(['content_block_delta'])
  })

  it('leaves the thinking text out when asked to omit it, and keeps it in the signature', () => {
    const writer = new MessageStreamWriter({ id: 'msg_1', model: 'm' }, { ...shape, omitThinking: true })
    const events = [...writer.progress({ type: 'reasoning', text: 'secret plan' }), ...writer.finish(chatResult({ reasoning: 'secret plan' }))]
    expect(events.some((e) => (e.data.delta as { type?: string } | undefined)?.type === 'thinking_delta')).toBe(false)
    const signature = events.find((e) => (e.data.delta as { type?: string } | undefined)?.type === 'signature_delta')!
    expect(seal.open((signature.data.delta as { signature: string }).signature)).toBe('secret plan')
  })

  it('ends with the open block stopped, message_delta with the stop reason, then message_stop', () => {
    const writer = new MessageStreamWriter({ id: 'msg_1', model: 'm' }, shape)
    writer.progress(text('Hi'))
    const end = writer.finish(chatResult({ finishReason: 'length' }))
    expect(kinds(end)).toEqual(['content_block_stop', 'message_delta', 'message_stop'])
    expect(end[1]!.data).toMatchObject({ delta: { stop_reason: 'max_tokens' } })
  })

  it('says the context window ran out when it did, before max_tokens', () => {
    const writer = new MessageStreamWriter({ id: 'msg_1', model: 'm' }, shape)
    const end = writer.finish(chatResult({ finishReason: 'length', contextFull: true }))
    expect(kinds(end)).toEqual(['message_start', 'message_delta', 'message_stop'])
    expect(end[1]!.data).toMatchObject({ delta: { stop_reason: 'model_context_window_exceeded' } })
  })
})
