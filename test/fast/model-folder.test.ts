import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { ModelFolder } from '../../models/catalog/model-folder.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { writeTinyBert, writeTinyLlama, writeTinyMmproj, writeTinyWhisper } from '../support/tiny-models.ts'

let dir: string

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'hearth-folder-'))
  writeTinyLlama(join(dir, 'chatty.gguf'), { contextLength: 512 })
  writeTinyLlama(join(dir, 'plain.gguf'), { chatTemplate: false })
  writeTinyMmproj(join(dir, 'mmproj-chatty.gguf'), { textEmbd: 64 })
  writeTinyBert(join(dir, 'encoder.gguf'))
  writeTinyWhisper(join(dir, 'ggml-whisper.bin'))
  mkdirSync(join(dir, 'org'))
  writeTinyLlama(join(dir, 'org', 'nested.gguf'))
  writeFileSync(join(dir, 'corrupt.gguf'), Buffer.from('GGUF this is not a real header'))
  writeFileSync(join(dir, 'notes.txt'), 'ignored')
  writeFileSync(
    join(dir, 'models.json'),
    JSON.stringify({
      models: [
        {
          id: 'org/named:q4_k_m',
          file: 'plain.gguf',
          owned_by: 'me',
          context_length: 256,
          max_completion_tokens: 64,
          pricing: { prompt: '0.00000100', completion: '0.00000200' },
        },
        { id: 'ghost', file: 'missing.gguf' },
        { id: 'escape', file: '../outside.gguf' },
        { id: 'bad-entry', file: 'chatty.gguf', context_length: 'long' },
      ],
    }),
  )
})

describe('ModelFolder', () => {
  it('serves catalog entries with their settings and unlisted files with ids from their names', async () => {
    const { models } = await new ModelFolder(dir).scan()
    const ids = models.map((m) => m.id)
    expect(ids).toEqual(['chatty', 'encoder', 'ggml-whisper', 'org/named:q4_k_m', 'org/nested'])
    const named = models.find((m) => m.id === 'org/named:q4_k_m')!
    expect(named).toMatchObject({
      ownedBy: 'me',
      contextLength: 256,
      maxCompletionTokens: 64,
      pricing: { prompt: '0.00000100', completion: '0.00000200' },
      kind: 'chat',
      hasChatTemplate: false,
    })
  })

  it('lists a model file linked into the folder from elsewhere, and skips a dangling link', async () => {
    const linkDir = mkdtempSync(join(tmpdir(), 'hearth-folder-links-'))
    const elsewhere = mkdtempSync(join(tmpdir(), 'hearth-folder-elsewhere-'))
    writeTinyLlama(join(elsewhere, 'kept-elsewhere.gguf'))
    symlinkSync(join(elsewhere, 'kept-elsewhere.gguf'), join(linkDir, 'linked.gguf'))
    symlinkSync(join(elsewhere, 'gone.gguf'), join(linkDir, 'dangling.gguf'))
    mkdirSync(join(elsewhere, 'family'))
    writeTinyLlama(join(elsewhere, 'family', 'member.gguf'))
    symlinkSync(join(elsewhere, 'family'), join(linkDir, 'family'))
    const { models, broken } = await new ModelFolder(linkDir).scan()
    expect(models.map((m) => m.id)).toEqual(['family/member', 'linked'])
    expect(models.find((m) => m.id === 'linked')).toMatchObject({ kind: 'chat', hasChatTemplate: true })
    expect(broken).toEqual([])
  })

  it('reads context, kind and chat template from the headers', async () => {
    const { models } = await new ModelFolder(dir).scan()
    const byId = Object.fromEntries(models.map((m) => [m.id, m]))
    expect(byId.chatty).toMatchObject({ kind: 'chat', contextLength: 512, maxCompletionTokens: 512, hasChatTemplate: true })
    expect(byId.encoder).toMatchObject({ kind: 'embedding', capabilities: ['embeddings'], architecture: 'bert' })
    expect(byId['ggml-whisper']).toMatchObject({ kind: 'speech', capabilities: ['transcription', 'translation'], contextLength: 448 })
    expect(byId.chatty!.pricing).toEqual({ prompt: '0.00000000', completion: '0.00000000' })
  })

  it('says which chat templates can call tools, so the chat offers tools only to those', async () => {
    const toolDir = mkdtempSync(join(tmpdir(), 'hearth-folder-tools-'))
    const templates = {
      qwen3: 'Qwen-Qwen3-0.6B.jinja',
      'deepseek-r1-distill': 'deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja',
      gemma2: 'google-gemma-2-2b-it.jinja',
      smollm3: 'HuggingFaceTB-SmolLM3-3B.jinja',
    }
    const paths = Object.entries(templates).map(([id, file]) => [id, sharedFixture(`chat-templates/${file}`)] as const)
    if (paths.some(([, path]) => path === undefined)) return
    for (const [id, path] of paths) writeTinyLlama(join(toolDir, `${id}.gguf`), { chatTemplate: readFileSync(path!, 'utf8') })
    const { models } = await new ModelFolder(toolDir).scan()
    const callsTools = Object.fromEntries(models.map((m) => [m.id, m.capabilities.includes('tools')]))
    // DeepSeek's R1 distills write calls without listing tools: llama.cpp puts the tools in the system message.
    expect(callsTools).toEqual({ qwen3: true, 'deepseek-r1-distill': true, gemma2: false, smollm3: false })
    rmSync(toolDir, { recursive: true, force: true })
  })

  it('pairs mmproj-<model>.gguf with its model, never lists the projector, and leaves other models alone', async () => {
    const { models } = await new ModelFolder(dir).scan()
    const chatty = models.find((m) => m.id === 'chatty')!
    expect(chatty.projectorPath).toBe(join(dir, 'mmproj-chatty.gguf'))
    expect(chatty.capabilities).toEqual(['chat', 'vision'])
    expect(models.find((m) => m.id === 'org/named:q4_k_m')!.capabilities).toEqual(['chat'])
    expect(models.some((m) => m.id.includes('mmproj'))).toBe(false)
  })

  it('gives a projector to the model it is named for, not to one whose name it also holds', async () => {
    const other = mkdtempSync(join(tmpdir(), 'hearth-folder-'))
    writeTinyLlama(join(other, 'tiny.gguf'))
    const vision = writeTinyLlama(join(other, 'tiny-vision.gguf'))
    writeTinyMmproj(join(other, 'mmproj-tiny-vision.gguf'), { textEmbd: vision.embd })
    const { models } = await new ModelFolder(other).scan()
    const capabilities = Object.fromEntries(models.map((m) => [m.id, m.capabilities]))
    expect(capabilities).toEqual({ tiny: ['chat'], 'tiny-vision': ['chat', 'vision'] })
    rmSync(other, { recursive: true, force: true })
  })

  it('reports each broken model with a reason, while the others are served', async () => {
    const { broken } = await new ModelFolder(dir).scan()
    const problems = Object.fromEntries(broken.map((b) => [b.id, b.problem]))
    expect(problems.ghost).toMatch(/does not exist/)
    expect(problems.escape).toMatch(/outside the models folder/)
    expect(problems['bad-entry']).toMatch(/context_length/)
    expect(problems.corrupt).toMatch(/not a usable model file/)
  })

  it('keeps serving discovered files when models.json is not valid JSON', async () => {
    const other = mkdtempSync(join(tmpdir(), 'hearth-folder-'))
    writeTinyLlama(join(other, 'solo.gguf'))
    writeFileSync(join(other, 'models.json'), '{ "models": [ oops')
    const snapshot = await new ModelFolder(other).scan()
    expect(snapshot.catalogProblem).toMatch(/not valid JSON/)
    expect(snapshot.models.map((m) => m.id)).toEqual(['solo'])
  })

  it('notices files added after the first scan', async () => {
    const other = mkdtempSync(join(tmpdir(), 'hearth-folder-'))
    const folder = new ModelFolder(other)
    expect((await folder.scan()).models).toEqual([])
    writeTinyLlama(join(other, 'late.gguf'))
    expect((await folder.scan()).models.map((m) => m.id)).toEqual(['late'])
  })
})

describe('the record a request runs on', () => {
  /** A folder with one model whose last scan is already older than `freshMs` (0 here). */
  async function scanned(): Promise<{ dir: string; folder: ModelFolder }> {
    const other = mkdtempSync(join(tmpdir(), 'hearth-folder-'))
    writeTinyLlama(join(other, 'solo.gguf'))
    writeFileSync(join(other, 'models.json'), JSON.stringify({ models: [{ id: 'solo', file: 'solo.gguf', context_length: 128 }] }))
    const folder = new ModelFolder(other)
    await folder.cachedScan(0)
    return { dir: other, folder }
  }

  it('uses the last scan while models.json and the file are unchanged, and sees new files on the next request', async () => {
    const { dir, folder } = await scanned()
    const first = await folder.modelForRequest('solo', 0)
    expect(first?.contextLength).toBe(128)
    writeTinyLlama(join(dir, 'late.gguf'))
    // The listing behind the request is refreshed for the next one.
    await new Promise((r) => setTimeout(r, 100))
    expect((await folder.modelForRequest('late', 0))?.id).toBe('late')
  })

  it('waits for a new scan when models.json changed since the last one', async () => {
    const { dir, folder } = await scanned()
    writeFileSync(join(dir, 'models.json'), JSON.stringify({ models: [{ id: 'solo', file: 'solo.gguf', context_length: 64 }] }))
    expect((await folder.modelForRequest('solo', 0))?.contextLength).toBe(64)
  })

  it('waits for a new scan when the model file is gone', async () => {
    const { dir, folder } = await scanned()
    rmSync(join(dir, 'solo.gguf'))
    expect(await folder.modelForRequest('solo', 0)).toBeUndefined()
  })
})

describe('the context a model gets', () => {
  it('is what the catalog asks, but no more than llama.cpp gives (the trained context), and says why', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hearth-folder-'))
    writeTinyLlama(join(dir, 'short.gguf'), { contextLength: 512 })
    writeFileSync(join(dir, 'models.json'), JSON.stringify({ models: [{ id: 'short', file: 'short.gguf', context_length: 65536 }] }))
    const [model] = (await new ModelFolder(dir).scan()).models
    expect(model).toMatchObject({ contextLength: 512, maxCompletionTokens: 512 })
    expect(model!.contextNote).toMatch(/asks for 65536 tokens of context; the model was trained with 512/)
  })

  it('is what its engine reported giving, from the load on: in the record, the listing and the limits', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hearth-folder-'))
    writeTinyLlama(join(dir, 'roomy.gguf'), { contextLength: 4096 })
    const folder = new ModelFolder(dir)
    const [before] = (await folder.cachedScan(60_000)).models
    expect(before!.contextLength).toBe(4096)
    expect(folder.reportEngineContext(before!, 1024)).toBe(true)
    expect(folder.reportEngineContext(before!, 8192)).toBe(false)
    const after = await folder.modelForRequest('roomy', 60_000)
    expect(after).toMatchObject({ contextLength: 1024, maxCompletionTokens: 1024 })
    expect(after!.contextNote).toMatch(/its engine gives each request 1024/)
  })
})

describe('voice-activity models', () => {
  /** The start of whisper.cpp's Silero VAD file: magic, the model's name, then its parameters. */
  function sileroHeader(): Buffer {
    const header = Buffer.alloc(64)
    header.writeUInt32LE(0x67676d6c, 0)
    header.writeInt32LE(10, 4)
    header.write('silero-16k', 8, 'latin1')
    return header
  }

  it('are used by every speech model, not served, whether listed in models.json or not', async () => {
    for (const listed of [false, true]) {
      const folder = mkdtempSync(join(tmpdir(), 'hearth-vad-folder-'))
      writeTinyWhisper(join(folder, 'ggml-whisper.bin'))
      writeTinyLlama(join(folder, 'chat.gguf'))
      writeFileSync(join(folder, 'ggml-silero-v5.1.2.bin'), sileroHeader())
      // A pulled detector gets a catalog entry like any download.
      if (listed) writeFileSync(join(folder, 'models.json'), JSON.stringify({ models: [{ id: 'silero', file: 'ggml-silero-v5.1.2.bin' }] }))
      const { models, broken } = await new ModelFolder(folder).scan()
      expect(models.map((m) => m.id).sort()).toEqual(['chat', 'ggml-whisper'])
      expect(broken).toEqual([])
      expect(models.find((m) => m.id === 'ggml-whisper')!.vadModelPath).toBe(join(folder, 'ggml-silero-v5.1.2.bin'))
      expect(models.find((m) => m.id === 'chat')!.vadModelPath).toBeUndefined()
    }
  })

  it('leave speech models without one when the folder has none', async () => {
    const { models } = await new ModelFolder(dir).scan()
    expect(models.find((m) => m.id === 'ggml-whisper')!.vadModelPath).toBeUndefined()
  })
})
