/**
 * The web UI end to end in real headless Chromium (Debian's `chromium`, driven by playwright-core)
 * against the real server with tiny generated models, at 800×600: the key prompt, a chat with a
 * picture, stopping a long answer, transcribing and translating an uploaded recording, pulling a model from a local
 * HTTP server, and copying (then regenerating) the API key. Screenshots of every page go to
 * test/artifacts/ui/.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, copyFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ensureUiBuilt } from '../../main/cli/build-ui.ts'
import { FakeHub } from '../support/fake-hub.ts'
import { PROJECT_ROOT, startTestServer, type TestServer } from '../support/server-process.ts'
import { llamaBuild } from '../support/upstream-servers.ts'
import { makePng } from '../support/test-images.ts'
import { writeTinyLlama, writeTinyMmproj, writeTinyWhisper } from '../support/tiny-models.ts'
import { familyModel } from '../support/family-models.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { cannotRun, describeIf, itIf } from '../support/skips.ts'
import { makeOllamaStore, ollamaProgram } from '../support/ollama-program.ts'

const CHROMIUM = process.env.HEARTH_CHROMIUM ?? '/usr/bin/chromium'
const haveChromium = existsSync(CHROMIUM)
const ARTIFACTS = join(PROJECT_ROOT, 'test', 'artifacts', 'ui')
// Real chat templates (shared fixtures) for the thinking and tool-call views.
const qwen3Template = sharedFixture('chat-templates/Qwen-Qwen3-0.6B.jinja')
const qwqTemplate = sharedFixture('chat-templates/Qwen-QwQ-32B.jinja')
const agentModels = Boolean(qwen3Template && qwqTemplate && llamaBuild)

if (!haveChromium) {
  cannotRun(`test/engines/ui.test.ts: no Chromium at ${CHROMIUM}. Install it (apt-get install -y chromium; .ci/run does) or set HEARTH_CHROMIUM.\n`)
}

let server: TestServer
let hub: FakeHub
let browser: Browser
let context: BrowserContext
let page: Page
let key: string
const pageErrors: string[] = []
const started = performance.now()

/** A second and a half of a tone at 16 kHz: the tiny whisper model turns any short clip into " hello world." */
function toneWav(seconds = 1.5, rate = 16_000): Buffer {
  const samples = Math.round(seconds * rate)
  const out = Buffer.alloc(44 + samples * 2)
  out.write('RIFF', 0)
  out.writeUInt32LE(36 + samples * 2, 4)
  out.write('WAVEfmt ', 8)
  out.writeUInt32LE(16, 16)
  out.writeUInt16LE(1, 20)
  out.writeUInt16LE(1, 22)
  out.writeUInt32LE(rate, 24)
  out.writeUInt32LE(rate * 2, 28)
  out.writeUInt16LE(2, 32)
  out.writeUInt16LE(16, 34)
  out.write('data', 36)
  out.writeUInt32LE(samples * 2, 40)
  for (let i = 0; i < samples; i++) out.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / rate)), 44 + i * 2)
  return out
}

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`) })
}

async function requestLog(): Promise<Array<{ path: string; model: string | null; status: number }>> {
  const res = await fetch(`${server.url}/api/requests`, { headers: { authorization: `Bearer ${key}` } })
  return ((await res.json()) as { requests: Array<{ path: string; model: string | null; status: number }> }).requests
}

describeIf(haveChromium, 'needs Chromium (apt-get install -y chromium, or HEARTH_CHROMIUM)')('the web UI in Chromium', () => {
  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true })
    ensureUiBuilt()
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-ui-'))
    const llama = writeTinyLlama(join(modelsDir, 'tiny-vision.gguf'), { contextLength: 512 })
    writeTinyMmproj(join(modelsDir, 'mmproj-tiny-vision.gguf'), { textEmbd: llama.embd })
    // A long context makes an answer long enough to stop.
    writeTinyLlama(join(modelsDir, 'long-story.gguf'), { contextLength: 32768 })
    writeTinyWhisper(join(modelsDir, 'ggml-tiny-whisper.bin'))
    // A model on another machine that is not there (nothing listens on port 9).
    writeFileSync(
      join(modelsDir, 'models.json'),
      JSON.stringify({ models: [{ id: 'gpu-box-model', remote: { base_url: 'http://127.0.0.1:9/v1', model: 'big' } }] }),
    )
    if (agentModels) {
      const cache = join(PROJECT_ROOT, 'test/artifacts/family-models')
      copyFileSync(
        familyModel(cache, { template: 'Qwen-Qwen3-0.6B', vocabulary: 'qwen3' }, readFileSync(qwen3Template!, 'utf8')),
        join(modelsDir, 'tiny-tools.gguf'),
      )
      copyFileSync(
        familyModel(cache, { template: 'Qwen-QwQ-32B', vocabulary: 'qwen3' }, readFileSync(qwqTemplate!, 'utf8')),
        join(modelsDir, 'tiny-thinker.gguf'),
      )
    }
    const dataDir = mkdtempSync(join(tmpdir(), 'hearth-ui-data-'))
    hub = await FakeHub.start()
    // Served slowly, so the progress bar has something to show.
    const pulled = mkdtempSync(join(tmpdir(), 'hearth-ui-pull-'))
    writeTinyLlama(join(pulled, 'pulled.gguf'), { contextLength: 256, seed: 99 })
    hub.put('files/pulled-model.gguf', readFileSync(join(pulled, 'pulled.gguf')), { chunkSize: 48 * 1024, chunkDelayMs: 40 })
    // A model the person pulled with Ollama, in a store the real `ollama create` made: served in place.
    const ollamaStore = mkdtempSync(join(tmpdir(), 'hearth-ui-ollama-'))
    if (ollamaProgram()) {
      writeTinyLlama(join(pulled, 'from-ollama.gguf'), { contextLength: 256, seed: 7 })
      await makeOllamaStore(ollamaStore, [{ name: 'ollama-tiny:latest', gguf: join(pulled, 'from-ollama.gguf') }])
    } else cannotRun('test/engines/ui.test.ts: the ollama command is not built; the Models page is shown without a model from an Ollama store')
    server = await startTestServer({ modelsDir, dataDir, noKeyFlag: true, args: ['--model-sources', 'ollama'], env: { OLLAMA_MODELS: ollamaStore } })
    key = readFileSync(join(dataDir, 'api-key'), 'utf8').trim()
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        // A fake microphone (a beeping tone) for the recording test, with no permission prompt.
        '--use-fake-device-for-media-stream',
        '--use-fake-ui-for-media-stream',
      ],
    })
    context = await browser.newContext({ viewport: { width: 800, height: 600 }, acceptDownloads: true })
    await context.grantPermissions(['clipboard-read', 'clipboard-write', 'microphone'], { origin: server.url })
    page = await context.newPage()
    page.on('pageerror', (e) => pageErrors.push(e.message))
  })

  afterAll(async () => {
    await browser?.close()
    await hub?.close()
    await server?.stop()
    console.log(`ui e2e: ${((performance.now() - started) / 1000).toFixed(1)} s in all, screenshots in ${ARTIFACTS}`)
  })

  it('asks for the key once, then remembers it', async () => {
    // The first load asks before it requests anything that needs the key: no 401 in the console.
    const failed: string[] = []
    const onResponse = (r: { status(): number; url(): string }) => void (r.status() === 401 && failed.push(r.url()))
    page.on('response', onResponse)
    await page.goto(`${server.url}/`)
    const field = page.getByRole('textbox', { name: 'API key' })
    await expect.poll(() => field.isVisible()).toBe(true)
    page.off('response', onResponse)
    expect(failed).toEqual([])
    await shot('key-prompt')
    await field.fill('not-the-key')
    await page.getByRole('button', { name: 'Use this key' }).click()
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('does not accept this key')
    await field.fill(key)
    await page.getByRole('button', { name: 'Use this key' }).click()
    await expect.poll(() => page.getByTestId('chat-model').isVisible()).toBe(true)
    await page.reload()
    await expect.poll(() => page.getByTestId('chat-model').isVisible()).toBe(true)
    expect(await page.getByRole('textbox', { name: 'API key' }).count()).toBe(0)
  })

  it('sends a chat with a picture and shows the streamed answer with its usage', async () => {
    await page.getByTestId('chat-model').selectOption('tiny-vision')
    expect(await page.getByTestId('chat-model').inputValue()).toBe('tiny-vision')
    await page.getByRole('button', { name: 'Parameters' }).click()
    await page.getByLabel(/Max tokens/).fill('40')
    await page.getByLabel(/System prompt/).fill('You describe pictures.')
    await page.getByRole('button', { name: 'Close' }).click()

    await page.getByTestId('image-input').setInputFiles({ name: 'picture.png', mimeType: 'image/png', buffer: await makePng(64, 48) })
    await expect.poll(() => page.getByRole('img', { name: 'Picture to send: picture.png' }).isVisible()).toBe(true)
    // A second picture replaces the first: the API takes one.
    await page.getByTestId('image-input').setInputFiles({ name: 'second.png', mimeType: 'image/png', buffer: await makePng(40, 40) })
    await expect.poll(() => page.getByRole('img', { name: 'Picture to send: second.png' }).isVisible()).toBe(true)
    expect(await page.getByRole('img', { name: /Picture to send/ }).count()).toBe(1)

    const message = page.getByRole('textbox', { name: 'Message' })
    await message.fill('What is in this picture?')
    await message.press('Enter')
    const answer = page.locator('article.assistant').last()
    await expect.poll(() => answer.locator('[data-testid=usage]').textContent(), { timeout: 60_000 }).toMatch(/\d+ tokens · [\d.]+ tokens\/s · prompt \d+/)
    expect((await answer.locator('.markdown').textContent())!.trim().length).toBeGreaterThan(0)
    expect(await page.locator('article.user img').count()).toBe(1)
    const chat = (await requestLog()).filter((r) => r.path === '/v1/responses').at(-1)
    expect(chat).toMatchObject({ model: 'tiny-vision', status: 200 })
    // 40 tokens at most, as the parameters panel asked.
    expect(Number(/(\d+) tokens/.exec((await answer.locator('[data-testid=usage]').textContent())!)![1])).toBeLessThanOrEqual(40)

    // Copy takes the answer as the model wrote it (Markdown source), as saved with the conversation.
    await answer.getByRole('button', { name: 'Copy', exact: true }).click()
    const saved = await page.evaluate(() => JSON.parse(localStorage.getItem('hearth.conversations.v1')!)[0].turns.at(-1).text as string)
    expect(saved.length).toBeGreaterThan(0)
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(saved)
    await shot('chat')
  })

  it('stops a long answer with the Stop button and keeps what was said', async () => {
    await page.getByRole('button', { name: 'New chat' }).click()
    await page.getByTestId('chat-model').selectOption('long-story')
    await page.getByRole('button', { name: 'Parameters' }).click()
    await page.getByLabel(/Max tokens/).fill('')
    await page.getByRole('button', { name: 'Close' }).click()
    const message = page.getByRole('textbox', { name: 'Message' })
    await message.fill('Tell me a very long story.')
    await message.press('Enter')
    const answer = page.locator('article.assistant').last()
    // Streaming: words are on screen while the Stop button is still there.
    await expect.poll(async () => ((await answer.locator('.markdown').textContent()) ?? '').length, { timeout: 60_000 }).toBeGreaterThan(40)
    expect(await page.getByRole('button', { name: 'Stop' }).isVisible()).toBe(true)
    await page.getByRole('button', { name: 'Stop' }).click()
    await expect.poll(() => answer.getByText('Stopped', { exact: true }).isVisible()).toBe(true)
    const stoppedAt = await answer.locator('.markdown').textContent()
    await page.waitForTimeout(500)
    expect(await answer.locator('.markdown').textContent()).toBe(stoppedAt)
    expect(await page.getByRole('button', { name: 'Send' }).isVisible()).toBe(true)
    // The server saw the client go and freed the model.
    await expect.poll(async () => (await requestLog()).filter((r) => r.model === 'long-story').at(-1)?.status, { timeout: 10_000 }).toBe(499)
    await shot('chat-stopped')
    // The conversations survive a reload.
    await page.reload()
    await expect.poll(() => page.getByRole('button', { name: 'Tell me a very long story.', exact: true }).isVisible()).toBe(true)
    await page.getByRole('button', { name: 'What is in this picture?', exact: true }).click()
    await expect.poll(() => page.locator('article.user img').count()).toBe(1)
  })

  it('works from the keyboard alone: Tab to the pages and the message box, Enter to send', async () => {
    await page.goto(`${server.url}/#/chat`)
    await page.getByTestId('chat-model').selectOption('tiny-vision')
    await page.locator('body').focus()
    const tabTo = async (accessibleName: string) => {
      for (let i = 0; i < 40; i++) {
        await page.keyboard.press('Tab')
        const name = await page.evaluate(() => {
          const el = document.activeElement as HTMLInputElement | null
          return el?.getAttribute('aria-label') ?? el?.labels?.[0]?.textContent?.trim() ?? el?.textContent?.trim() ?? ''
        })
        if (name === accessibleName) return
      }
      throw new Error(`Tab never reached "${accessibleName}"`)
    }
    await tabTo('Models')
    await page.keyboard.press('Enter')
    await expect.poll(() => page.evaluate(() => location.hash)).toBe('#/models')
    await page.goto(`${server.url}/#/chat`)
    await page.getByRole('button', { name: 'New chat' }).focus()
    await tabTo('Message')
    await page.keyboard.type('Hello from the keyboard')
    await page.keyboard.press('Enter')
    await expect.poll(() => page.locator('article.assistant').last().locator('[data-testid=usage]').isVisible(), { timeout: 30_000 }).toBe(true)
    expect(await page.locator('article.user').last().textContent()).toContain('Hello from the keyboard')
  })

  itIf(agentModels, 'needs llama.cpp built here and the Qwen chat templates of ../shared/fixtures')(
    "shows a thinking model's thoughts collapsed above its answer",
    async () => {
      await page.goto(`${server.url}/#/chat`)
      await page.getByRole('button', { name: 'New chat' }).click()
      await page.getByTestId('chat-model').selectOption('tiny-thinker')
      await page.getByRole('button', { name: 'Parameters' }).click()
      await page.getByLabel(/Max tokens/).fill('16')
      await page.getByRole('button', { name: 'Close' }).click()
      const message = page.getByRole('textbox', { name: 'Message' })
      await message.fill('Why is the sky blue?')
      await message.press('Enter')
      const answer = page.locator('article.assistant').last()
      await expect.poll(() => answer.locator('[data-testid=usage]').isVisible(), { timeout: 60_000 }).toBe(true)
      const thoughts = answer.locator('details.reasoning')
      expect(await thoughts.getAttribute('open')).toBeNull()
      expect(await thoughts.locator('summary').textContent()).toMatch(/Thought \(\d+ characters\)/)
      await shot('chat-thinking-collapsed')
      await thoughts.locator('summary').click()
      expect((await thoughts.locator('p').textContent())!.length).toBeGreaterThan(0)
      await shot('chat-thinking-open')
    },
  )

  itIf(agentModels, 'needs llama.cpp built here and the Qwen chat templates of ../shared/fixtures')(
    'offers tools from the parameters and shows the call the model makes',
    async () => {
      await page.getByRole('button', { name: 'New chat' }).click()
      await page.getByTestId('chat-model').selectOption('tiny-tools')
      await page.getByRole('button', { name: 'Parameters' }).click()
      await page.getByLabel(/Max tokens/).fill('100')
      // The same answer every time (the panel's temperature is 0.7), with no thinking first, which a
      // random model could keep up past the 100 tokens: the call comes at once.
      await page.getByLabel(/^Temperature/).fill('0')
      await page.getByLabel(/Let thinking models think first/).uncheck()
      const tools = page.getByLabel(/^Tools/)
      await tools.fill('[{"type": "function"')
      await expect.poll(() => page.getByRole('alert').textContent()).toContain('Not valid JSON')
      await tools.fill(
        JSON.stringify([
          {
            type: 'function',
            function: {
              name: 'get_weather',
              parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] } }, required: ['city'] },
            },
          },
        ]),
      )
      await page.getByLabel('Tool choice').selectOption('required')
      await shot('chat-tools-parameters')
      await page.getByRole('button', { name: 'Close' }).click()
      const message = page.getByRole('textbox', { name: 'Message' })
      await message.fill('What is the weather in Paris?')
      await message.press('Enter')
      const answer = page.locator('article.assistant').last()
      await expect.poll(() => answer.locator('[data-testid=usage]').isVisible(), { timeout: 60_000 }).toBe(true)
      // The model may call more than once in an answer (parallel calls); the first is complete.
      const calls = answer.getByRole('list', { name: 'Tool calls' })
      expect(await calls.count(), `no tool calls shown; the answer: ${await answer.innerText()}`).toBe(1)
      const call = calls.getByRole('listitem').first()
      expect(await call.locator('code.name').textContent()).toBe('get_weather')
      const args = JSON.parse((await call.locator('pre').textContent())!)
      expect(['Paris', 'Oslo']).toContain(args.city)
      await shot('chat-tool-call')
      // Leave the parameters as the other tests expect them.
      await page.getByRole('button', { name: 'Parameters' }).click()
      await page.getByLabel(/^Tools/).fill('')
      await page.getByLabel('Tool choice').selectOption('auto')
      await page.getByLabel(/Let thinking models think first/).check()
      await page.getByLabel(/^Temperature/).fill('0.7')
      await page.getByRole('button', { name: 'Close' }).click()
    },
  )

  it('transcribes an uploaded recording, the text appearing as it comes, and saves word-timed subtitles', async () => {
    await page.goto(`${server.url}/#/speech`)
    await expect.poll(() => page.getByTestId('speech-model').inputValue()).toBe('ggml-tiny-whisper')
    await page.getByTestId('audio-input').setInputFiles({ name: 'greeting.wav', mimeType: 'audio/wav', buffer: toneWav() })
    await expect.poll(() => page.getByText('greeting.wav').isVisible()).toBe(true)
    await page.getByRole('radio', { name: 'Transcribe' }).check()
    await page.getByRole('button', { name: 'Transcribe', exact: true }).click()
    await page
      .getByTestId('speech-text')
      .getByText(/hello world/i)
      .waitFor({ timeout: 60_000 })
    await expect.poll(() => page.getByRole('heading', { name: 'Transcript' }).isVisible()).toBe(true)
    await shot('speech-transcribe')

    await page.getByLabel('Subtitle timing').selectOption('words')
    const download = page.waitForEvent('download')
    await page.getByRole('button', { name: '.srt' }).click()
    const file = await download
    expect(file.suggestedFilename()).toBe('greeting.srt')
    // One line timed from the first word to the last, in the words' own times.
    expect(readFileSync((await file.path())!, 'utf8')).toMatch(/^1\n00:00:0\d,\d{3} --> 00:00:0\d,\d{3}\nhello world\n$/i)
  })

  it('translates an uploaded recording to English, and saves subtitles by segment', async () => {
    await page.goto(`${server.url}/#/translate`) // the page's former name still lands on it
    await expect.poll(() => page.getByTestId('speech-model').inputValue()).toBe('ggml-tiny-whisper')
    await page.getByTestId('audio-input').setInputFiles({ name: 'greeting.wav', mimeType: 'audio/wav', buffer: toneWav() })
    await page.getByRole('radio', { name: 'Translate to English' }).check()
    await page.getByRole('button', { name: 'Translate', exact: true }).click()
    await page
      .getByTestId('speech-text')
      .getByText(/hello world/i)
      .waitFor({ timeout: 60_000 })
    await expect.poll(() => page.getByRole('heading', { name: 'English translation' }).isVisible()).toBe(true)
    await shot('translate')
    await page.getByLabel('Subtitle timing').selectOption('segments')
    const download = page.waitForEvent('download')
    await page.getByRole('button', { name: '.srt' }).click()
    const file = await download
    expect(readFileSync((await file.path())!, 'utf8')).toMatch(/^1\n00:00:00,000 --> 00:00:0\d,\d{3}\n.*hello world/i)
  })

  it('asks for skipped silence, and shows why when the folder has no voice-activity model', async () => {
    await page.goto(`${server.url}/#/speech`)
    await page.getByTestId('audio-input').setInputFiles({ name: 'greeting.wav', mimeType: 'audio/wav', buffer: toneWav() })
    await page.getByRole('radio', { name: 'Transcribe' }).check()
    await page.getByLabel('Skip silence').check()
    try {
      await page.getByRole('button', { name: 'Transcribe', exact: true }).click()
      await expect.poll(() => page.getByRole('alert').textContent(), { timeout: 30_000 }).toMatch(/voice-activity model/)
      await shot('speech-no-vad')
    } finally {
      await page.getByLabel('Skip silence').uncheck()
    }
  })

  it('records from the microphone as WebM/Opus, ready to translate', async () => {
    await page.goto(`${server.url}/#/speech`)
    await page.getByRole('radio', { name: 'Translate to English' }).check()
    await page.getByRole('button', { name: 'Record from the microphone' }).click()
    await expect.poll(() => page.getByText(/Recording… [1-9] s/).isVisible(), { timeout: 10_000 }).toBe(true)
    await page.getByRole('button', { name: 'Stop recording' }).click()
    const chosen = page.getByText(/^recording-[\d-]+\.webm$/)
    await expect.poll(() => chosen.isVisible()).toBe(true)
    // What the page uploads, checked on the way out; the answer here is simulated (the real server's
    // answer is the test above), three segments streamed as the contract gives them.
    let upload: Buffer | undefined
    await page.route('**/v1/audio/translations', async (route) => {
      upload = route.request().postDataBuffer() ?? undefined
      const events = [' Testing,', ' one,', ' two.'].map((delta) => ({ type: 'transcript.text.delta', delta }))
      events.push({ type: 'transcript.text.done', text: 'Testing, one, two.' } as never)
      await route.fulfill({
        status: 200,
        headers: { 'content-type': 'text/event-stream' },
        body: events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('') + 'data: [DONE]\n\n',
      })
    })
    try {
      await page.getByRole('button', { name: 'Translate', exact: true }).click()
      await expect.poll(() => page.getByTestId('speech-text').textContent()).toContain('Testing, one, two.')
    } finally {
      await page.unroute('**/v1/audio/translations')
    }
    const body = upload!.toString('latin1')
    expect(body).toMatch(/name="model"\r\n\r\nggml-tiny-whisper\r\n/)
    expect(body).toMatch(/name="stream"\r\n\r\ntrue\r\n/)
    expect(body).toMatch(/name="file"; filename="recording-[\d-]+\.webm"/)
    // A real WebM (EBML magic) with Opus inside, as MediaRecorder made it.
    expect(body).toContain('\x1a\x45\xdf\xa3')
    expect(body).toContain('OpusHead')
    await shot('translate-recorded')
  })

  it('shows a model on another machine with its host and health', async () => {
    await page.goto(`${server.url}/#/models`)
    const row = page.getByTestId('model-table').getByRole('row').filter({ hasText: 'gpu-box-model' })
    await expect.poll(() => row.getByText('remote, down').isVisible()).toBe(true)
    expect(await row.textContent()).toContain('127.0.0.1:9')
    // Another one, added from the page.
    await page.getByLabel('Name here').fill('second-box')
    await page.getByLabel("Server's API address").fill('http://127.0.0.1:9/v1')
    await page.getByLabel(/^Model there/).fill('big')
    await page.getByRole('button', { name: 'Add', exact: true }).click()
    await expect.poll(() => page.getByRole('status').filter({ hasText: 'Added second-box' }).isVisible()).toBe(true)
    const added = page.getByTestId('model-table').getByRole('row').filter({ hasText: 'second-box' })
    await expect.poll(() => added.getByText('remote, down').isVisible()).toBe(true)
    await shot('models-remote')
  })

  itIf(ollamaProgram(), 'needs the ollama command built (the engines setup builds it from the Go module proxy)')(
    "shows a model of Ollama's store as Ollama's, read only",
    async () => {
      await page.goto(`${server.url}/#/models`)
      const row = page.getByTestId('model-table').getByRole('row').filter({ hasText: 'ollama-tiny:latest' })
      await expect.poll(() => row.getByText('from Ollama').isVisible()).toBe(true)
      // Hearth only reads other programs' stores: no Remove button.
      expect(await row.getByRole('button', { name: /Remove/ }).count()).toBe(0)
      expect(await row.getByRole('button', { name: 'Load' }).count()).toBe(1)
      await row.scrollIntoViewIfNeeded()
      await shot('models-from-ollama')
    },
  )

  it('pulls a model from a local HTTP server and shows the progress bar to the end', async () => {
    await page.goto(`${server.url}/#/models`)
    await expect.poll(() => page.getByTestId('model-table').getByText('tiny-vision').isVisible()).toBe(true)
    await page.getByTestId('pull-source').fill(`${hub.url}/files/pulled-model.gguf`)
    await page.locator('form.reference').getByRole('button', { name: 'Download' }).click()
    const item = page.getByTestId('download').first()
    const bar = item.locator('progress')
    // Part-way: the bar shows a fraction.
    await expect.poll(async () => Number((await bar.getAttribute('value')) ?? 0), { timeout: 30_000, interval: 50 }).toBeGreaterThan(0)
    const partWay = Number(await bar.getAttribute('value'))
    await item.scrollIntoViewIfNeeded()
    if (partWay < 100) await shot('models-downloading')
    await expect.poll(() => item.getAttribute('data-state'), { timeout: 60_000 }).toBe('done')
    expect(await bar.getAttribute('value')).toBe('100')
    await item.scrollIntoViewIfNeeded()
    await shot('models-downloaded')
    const row = page.getByTestId('model-table').getByText('pulled-model')
    await expect.poll(() => row.count(), { timeout: 10_000 }).toBe(1)
    await page.getByRole('heading', { name: 'Models' }).scrollIntoViewIfNeeded()
    await shot('models')
  })

  it('copies the API key, and keeps working after regenerating it', async () => {
    await page.goto(`${server.url}/#/server`)
    await expect.poll(() => page.getByTestId('server-address').textContent()).toBe(`${server.url}/v1`)
    await page.getByRole('button', { name: 'Copy key' }).click()
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(key)
    // The snippets carry the real address; the key shows masked until asked.
    expect(await page.getByTestId('snippet').textContent()).toContain(`curl ${server.url}/v1/chat/completions`)
    expect(await page.getByTestId('snippet').textContent()).not.toContain(key)
    // The live log lists the requests the page and the tests made.
    await expect.poll(() => page.getByTestId('request-log').getByText('POST /v1/responses').count()).toBeGreaterThan(0)
    // With the prompt's size and what of it came from the engine's cache.
    await expect.poll(async () => (await page.getByTestId('request-prompt').allTextContents()).some((t) => /\d+ tokens/.test(t))).toBe(true)
    // This server lends nothing, and says how it would.
    expect(await page.getByTestId('lend-state').textContent()).toMatch(/^\s*Off\s.*--lend/s)
    // What runs the models: llama.cpp built here, its commit and CPU features (or, loudly, that it is not built).
    const engine = page.getByTestId('engine-card')
    if (llamaBuild) {
      await expect.poll(() => engine.textContent()).toContain(`llama.cpp ${llamaBuild.commit.slice(0, 7)}, built on this machine`)
      expect(await engine.textContent()).toContain(llamaBuild.cpuFeatures[0] ?? 'baseline')
    } else {
      await expect.poll(() => engine.textContent()).toContain('npm run build:engines')
    }
    await shot('server')

    await page.getByRole('button', { name: 'Regenerate…' }).click()
    await page.getByRole('button', { name: 'Make a new key' }).click()
    await expect.poll(() => page.getByText('A new key was made').isVisible()).toBe(true)
    await page.getByRole('button', { name: 'Copy key' }).click()
    const fresh = await page.evaluate(() => navigator.clipboard.readText())
    expect(fresh).not.toBe(key)
    expect(fresh).toBe(readFileSync(join(server.output().match(/API key: stored in (\S+)/)![1]!), 'utf8').trim())
    key = fresh
    await page.goto(`${server.url}/#/models`)
    await expect.poll(() => page.getByTestId('model-table').getByText('tiny-vision').isVisible()).toBe(true)
  })

  it('in the desktop app, takes the key from the preload and shows the server switches (bridge simulated)', async () => {
    const desktop = await browser.newContext({ viewport: { width: 800, height: 600 } })
    // What preload/preload.ts exposes, played by a stand-in that records the calls.
    await desktop.addInitScript(
      ({ url, apiKey }) => {
        const calls: string[] = []
        let state = {
          running: true,
          url,
          lan: false,
          ollama: false,
          ollamaUrl: undefined as string | undefined,
          lend: false,
          error: undefined as string | undefined,
        }
        ;(window as unknown as { bridgeCalls: string[] }).bridgeCalls = calls
        ;(window as unknown as { hearth: unknown }).hearth = {
          getServerState: async () => state,
          getApiKey: async () => (calls.push('getApiKey'), apiKey),
          setServerRunning: async (running: boolean) => (calls.push(`setServerRunning ${running}`), (state = { ...state, running })),
          setLanAccess: async (lan: boolean) => (calls.push(`setLanAccess ${lan}`), (state = { ...state, lan })),
          setOllamaPort: async (on: boolean) => (
            calls.push(`setOllamaPort ${on}`),
            (state = { ...state, ollama: on, ollamaUrl: on ? 'http://127.0.0.1:11434' : undefined })
          ),
          setLending: async (on: boolean) => (calls.push(`setLending ${on}`), (state = { ...state, lend: on })),
          getPreferences: async () => ({ keepRunningInTray: true }),
          setKeepRunningInTray: async (keep: boolean) => (calls.push(`setKeepRunningInTray ${keep}`), { keepRunningInTray: keep }),
          pickModelFile: async () => (calls.push('pickModelFile'), '/models/picked.gguf'),
          copyText: async (text: string) => void calls.push(`copyText ${text}`),
          onServerState: () => () => undefined,
        }
      },
      { url: server.url, apiKey: key },
    )
    const app = await desktop.newPage()
    try {
      await app.goto(`${server.url}/#/server`)
      await expect.poll(() => app.getByTestId('lan-toggle').isVisible()).toBe(true)
      expect(await app.getByRole('textbox', { name: 'API key' }).count()).toBe(0)
      await app.getByTestId('lan-toggle').click()
      // Opening the server to the network asks first.
      await expect.poll(() => app.getByRole('alertdialog').isVisible()).toBe(true)
      expect(await app.getByTestId('lan-toggle').isChecked()).toBe(false)
      await app.screenshot({ path: join(ARTIFACTS, 'server-desktop-lan-warning.png') })
      await app.getByRole('button', { name: 'Allow network access' }).click()
      await expect.poll(() => app.getByTestId('lan-toggle').isChecked()).toBe(true)
      // Ollama's port: on at a click, its address shown for the ollama command.
      await app.getByTestId('ollama-toggle').click()
      await expect.poll(() => app.getByTestId('ollama-toggle').isChecked()).toBe(true)
      expect(await app.getByTestId('ollama-address').textContent()).toBe('http://127.0.0.1:11434')
      await app.screenshot({ path: join(ARTIFACTS, 'server-desktop-ollama-port.png') })
      // Lending this computer's memory to other Hearths: on at a click too.
      await app.getByTestId('lend-toggle').click()
      await expect.poll(() => app.getByTestId('lend-toggle').isChecked()).toBe(true)
      await app.getByRole('button', { name: 'Copy key' }).click()
      await app.getByRole('checkbox', { name: /Keep the server running in the tray/ }).click()
      await app.goto(`${server.url}/#/models`)
      await app.getByRole('button', { name: 'Browse…' }).click()
      await expect.poll(() => app.getByPlaceholder('/path/to/model.gguf').inputValue()).toBe('/models/picked.gguf')
      const calls = await app.evaluate(() => (window as unknown as { bridgeCalls: string[] }).bridgeCalls)
      expect(calls).toEqual(
        expect.arrayContaining([
          'getApiKey',
          'setLanAccess true',
          'setOllamaPort true',
          'setLending true',
          `copyText ${key}`,
          'setKeepRunningInTray false',
          'pickModelFile',
        ]),
      )
    } finally {
      await desktop.close()
    }
  })

  it('reads well in the dark theme and reports no page errors', async () => {
    await page.goto(`${server.url}/#/server`)
    await page.getByRole('combobox', { name: 'Theme' }).selectOption('dark')
    expect(await page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor)).toBe('rgb(23, 23, 22)')
    await shot('server-dark')
    await page.goto(`${server.url}/#/chat`)
    await shot('chat-dark')
    expect(pageErrors).toEqual([])
  })
})
