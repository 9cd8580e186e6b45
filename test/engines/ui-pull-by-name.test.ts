/**
 * The Models page pulls by Ollama name, end to end against a real registry: the CNCF Distribution
 * registry on loopback (test/support/registry-program.ts), filled by the real `ollama create` and
 * `ollama push --insecure`, pulled from by the real server (a process) through its own download API
 * (`POST /api/models/pull`), driven from the page in headless Chromium (Debian's, through
 * playwright-core) at 800×600. The field says what a name is and where it comes from, offers plain
 * http only for a name with a host, and the job shows its progress; the link to the registry's blob
 * server is cut midway (the pull stalls, retrying), the pull is cancelled and keeps what came, and
 * pulled again it fetches only the rest and the model is served under its name. The rules of the
 * API path (400s, cancel, discard, shutdown) are tested once, in the fast project
 * (downloads-api.test.ts, against a registry stand-in). Screenshots go to test/artifacts/ui/.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type Browser, type Page } from 'playwright-core'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ensureUiBuilt } from '../../main/cli/build-ui.ts'
import { ollamaProgram, runOllama, startOllamaServe, type OllamaServe } from '../support/ollama-program.ts'
import { registryProgram, startRegistry, type RunningRegistry } from '../support/registry-program.ts'
import { PROJECT_ROOT, startTestServer, type TestServer } from '../support/server-process.ts'
import { describeIf } from '../support/skips.ts'
import { writeTinyLlama } from '../support/tiny-models.ts'

const CHROMIUM = process.env.HEARTH_CHROMIUM ?? '/usr/bin/chromium'
const ARTIFACTS = join(PROJECT_ROOT, 'test', 'artifacts', 'ui')
const missing = [
  existsSync(CHROMIUM) ? undefined : `Chromium at ${CHROMIUM} (apt-get install -y chromium, or HEARTH_CHROMIUM)`,
  registryProgram() ? undefined : 'the Distribution registry',
  ollamaProgram() ? undefined : 'the ollama command',
].filter((m) => m !== undefined)
const whyNot = `test/engines/ui-pull-by-name.test.ts needs ${missing.join(', ')} (the engines setup builds the registry and ollama from the Go module proxy)`

let root: string
let registry: RunningRegistry
let ollama: OllamaServe
let server: TestServer
let browser: Browser
let page: Page
let name: string
let modelBlob: { digest: string; size: number }
const pageErrors: string[] = []

async function shot(file: string): Promise<void> {
  await page.screenshot({ path: join(ARTIFACTS, `${file}.png`) })
}

async function api(path: string): Promise<any> {
  const res = await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${server.apiKey}` } })
  return res.json()
}

describeIf(missing.length === 0, whyNot)('the Models page pulls by Ollama name from a registry', () => {
  beforeAll(async () => {
    mkdirSync(ARTIFACTS, { recursive: true })
    ensureUiBuilt()
    root = mkdtempSync(join(tmpdir(), 'hearth-ui-pull-by-name-'))
    registry = await startRegistry()
    const ollamaHome = join(root, 'ollama-home')
    ollama = await startOllamaServe(join(ollamaHome, 'models'), { home: ollamaHome })
    // About 11.5 MB: past the 4 MiB the pull reads first for the GGUF header, so the blob's own turn shows.
    writeTinyLlama(join(root, 'tiny.gguf'), { embd: 256, layers: 2, ff: 512, seed: 11 })
    writeFileSync(join(root, 'Modelfile'), `FROM ${join(root, 'tiny.gguf')}\nSYSTEM "You are brief."\n`)
    name = `${registry.host}/library/tiny:1`
    const cli = (args: string[]) => runOllama(args, { host: ollama.url, home: ollamaHome, timeoutMs: 180_000 })
    const created = await cli(['create', name, '-f', join(root, 'Modelfile')])
    expect(created.code, `ollama create: ${created.stderr.slice(-500)}`).toBe(0)
    const pushed = await cli(['push', '--insecure', name])
    expect(pushed.code, `ollama push: ${pushed.stderr.slice(-500)}`).toBe(0)
    const manifest = JSON.parse(readFileSync(join(ollamaHome, 'models/manifests', registry.host, 'library/tiny/1'), 'utf8')) as {
      layers: Array<{ mediaType: string; digest: string; size: number }>
    }
    modelBlob = manifest.layers.find((l) => l.mediaType === 'application/vnd.ollama.image.model')!
    await ollama.stop()

    const modelsDir = join(root, 'models')
    mkdirSync(modelsDir)
    writeTinyLlama(join(modelsDir, 'already-here.gguf'), { contextLength: 256 })
    // Hermetic: no Ollama store of this machine's to link blobs from.
    server = await startTestServer({ modelsDir, dataDir: join(root, 'data'), env: { OLLAMA_MODELS: join(root, 'no-ollama-store') } })
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] })
    page = await (await browser.newContext({ viewport: { width: 800, height: 600 } })).newPage()
    page.on('pageerror', (e) => pageErrors.push(e.message))
    await page.goto(`${server.url}/#/models`)
    await page.getByRole('textbox', { name: 'API key' }).fill(server.apiKey)
    await page.getByRole('button', { name: 'Use this key' }).click()
    await page.getByTestId('model-table').getByText('already-here').waitFor({ timeout: 30_000 })
  }, 600_000)

  afterAll(async () => {
    await browser?.close()
    await server?.stop()
    await ollama?.stop()
    await registry?.stop()
    if (root) rmSync(root, { recursive: true, force: true })
  })

  it('says what a name is and where it comes from, and offers plain http only for a name with a host', async () => {
    const field = page.getByTestId('pull-source')
    const kind = page.getByTestId('pull-kind')
    const form = page.locator('form.reference')
    await field.fill('qwen3:0.6b')
    await expect.poll(() => kind.textContent()).toBe("Downloads qwen3:0.6b from Ollama's library")
    expect(await page.getByTestId('pull-insecure').count()).toBe(0)
    expect(await form.getByText('Vision projector').count()).toBe(0)
    expect(await form.getByRole('button', { name: 'Pull' }).isVisible()).toBe(true)
    await field.fill('hf://ggml-org/x/model.gguf')
    await expect.poll(() => kind.textContent()).toBe('Downloads a file on Hugging Face')
    expect(await form.getByText('Vision projector').isVisible()).toBe(true)
    expect(await form.getByRole('button', { name: 'Download' }).isVisible()).toBe(true)

    await field.fill(name)
    await expect.poll(() => kind.textContent()).toBe(`Downloads ${name} from registry ${registry.host}`)
    expect(await page.getByTestId('pull-insecure').isVisible()).toBe(true)
    await form.scrollIntoViewIfNeeded()
    await shot('models-pull-by-name-form')

    // Without plain http allowed, the registry (http only) is not reached: the job says why, and what to do.
    await form.getByRole('button', { name: 'Pull' }).click()
    const failed = page.locator('[data-testid="download"][data-kind="registry"]').first()
    await expect.poll(() => failed.getAttribute('data-state'), { timeout: 30_000 }).toBe('failed')
    expect(await failed.getByRole('alert').textContent()).toMatch(/cannot reach .*; if .* serves plain http, pull with insecure/)
    await failed.getByRole('button', { name: 'Dismiss' }).click()
    expect(await page.getByTestId('download').count()).toBe(0)
  })

  it('pulls by name with progress; cancelled midway it keeps what came, and pulled again fetches only the rest', async () => {
    // The blob link drops after the header's 4 MiB and 2 MB more: the pull stalls there, retrying.
    const before = registry.blobLink.bytesToClients()
    registry.blobLink.cutAfter(4 * 1024 * 1024 + 2_000_000)
    await page.getByTestId('pull-source').fill(name)
    await page.getByTestId('pull-insecure').check()
    await page.locator('form.reference').getByRole('button', { name: 'Pull' }).click()
    const item = page.locator('[data-testid="download"][data-kind="registry"]').first()
    await expect.poll(() => item.getAttribute('data-state'), { timeout: 30_000 }).toBe('downloading')
    await expect.poll(() => item.textContent(), { timeout: 30_000 }).toContain(`from registry ${registry.host}`)
    const bar = item.locator('progress')
    await expect
      .poll(async () => Number((await bar.getAttribute('value')) ?? 0), { timeout: 30_000, interval: 100 })
      .toBeGreaterThan((100 * 5 * 1024 * 1024) / modelBlob.size)
    expect(await item.locator('strong').textContent()).toBe(name)
    expect(await item.textContent()).toMatch(/Pulling.* of 11\.\d MB/)
    await item.scrollIntoViewIfNeeded()
    await shot('models-pulling-by-name')

    await item.getByRole('button', { name: 'Cancel' }).click()
    await expect.poll(() => item.getAttribute('data-state'), { timeout: 30_000 }).toBe('cancelled')
    expect(await item.textContent()).toMatch(/kept: pull .* again to resume/)
    expect(await item.getByRole('button', { name: `Discard what came of ${name}` }).isVisible()).toBe(true)
    const firstPull = registry.blobLink.bytesToClients() - before
    const listed = (await api('/api/downloads')).downloads[0]
    expect(listed).toMatchObject({ kind: 'registry', registry: registry.host, source: name, model_id: name, state: 'cancelled', error_code: 'cancelled' })
    const kept = listed.files.find((f: { role: string }) => f.role === 'model').bytes as number
    expect(kept).toBeGreaterThan(5 * 1024 * 1024)
    await item.scrollIntoViewIfNeeded()
    await shot('models-pull-by-name-cancelled')

    registry.blobLink.mend()
    const again = registry.blobLink.bytesToClients()
    await page.getByTestId('pull-source').fill(name)
    await page.getByTestId('pull-insecure').check()
    await page.locator('form.reference').getByRole('button', { name: 'Pull' }).click()
    await expect.poll(() => page.locator('[data-testid="download"][data-kind="registry"]').count()).toBe(2)
    const second = page.locator('[data-testid="download"][data-kind="registry"]').first()
    await expect.poll(() => second.getAttribute('data-state'), { timeout: 60_000 }).toBe('done')
    expect(await second.locator('progress').getAttribute('value')).toBe('100')
    const secondPull = registry.blobLink.bytesToClients() - again
    // The rest of the model blob and the small blobs, with the HTTP headers around them: not what came before.
    expect(secondPull).toBeLessThan(modelBlob.size - kept + 64 * 1024)
    expect(secondPull).toBeGreaterThan(modelBlob.size - kept)
    console.log(`[ui pull by name] ${modelBlob.size} bytes: ${firstPull} through the link before the cancel (${kept} kept), ${secondPull} after`)

    // The cancelled one's bytes went on in this one: it has nothing left to discard.
    const first = page.locator('[data-testid="download"][data-kind="registry"]').nth(1)
    expect(await first.getAttribute('data-state')).toBe('cancelled')
    await expect.poll(() => first.getByRole('button', { name: /^Discard/ }).count()).toBe(0)
    expect(await first.textContent()).not.toContain('kept')

    // Served under its name, in Hearth's own store: removable, unlike the models of Ollama's store.
    const row = page.getByTestId('model-table').locator('tr', { hasText: name })
    await expect.poll(() => row.count(), { timeout: 10_000 }).toBe(1)
    expect(await row.getByText('pulled by name').isVisible()).toBe(true)
    expect(await row.getByRole('button', { name: `Remove ${name}` }).isVisible()).toBe(true)
    const served = (await api('/v1/models')).data.find((m: { id: string }) => m.id === name)
    expect(served).toMatchObject({ capabilities: ['chat'], source: 'ollama' })
    const blob = join(root, 'models/ollama/blobs', modelBlob.digest.replace(':', '-'))
    expect(statSync(blob).size).toBe(modelBlob.size)
    await second.scrollIntoViewIfNeeded()
    await shot('models-pulled-by-name')
    expect(pageErrors).toEqual([])
  })
})
