/**
 * Modelfiles, as `ollama create` sends them (Ollama's JavaScript client here; the real `ollama`
 * command in ollama-clients.test.ts): a model made FROM another by name with PARAMETER, SYSTEM,
 * MESSAGE, TEMPLATE, ADAPTER, LICENSE and REQUIRES, on the base's weights, its defaults applied on
 * every API, shown back, copied, made again and removed alone; and what is refused, by name.
 */
import { createHash } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Ollama } from 'ollama'
import OpenAI from 'openai'
import type { ChatJob, EngineJob } from '../../engines/engine-jobs.ts'
import { loadSpecFor } from '../../engines/load-spec.ts'
import { editCatalog } from '../../models/catalog/catalog-writer.ts'
import { llamaServerArgs } from '../../engines/llama-server/llama-server-args.ts'
import { startInProcessServer, type InProcessServer } from '../support/in-process-server.ts'
import { writeTinyLlama, writeTinyLora } from '../support/tiny-models.ts'

let server: InProcessServer
let ollama: Ollama
let modelsDir: string
const lastJob = <T extends EngineJob>(): T => server.engines.flatMap((e) => e.jobs).at(-1) as T
const record = async (id: string) => (await server.context.folder.scan()).models.find((m) => m.id === id)!

beforeAll(async () => {
  modelsDir = mkdtempSync(join(tmpdir(), 'hearth-modelfile-'))
  writeTinyLlama(join(modelsDir, 'tiny.gguf'), { chatTemplate: true })
  server = await startInProcessServer({ modelsDir, args: ['--ollama-port', '0'] })
  ollama = new Ollama({ host: server.ollamaUrl! })
})

afterAll(async () => {
  await server?.stop()
})

const persona = {
  model: 'persona',
  from: 'tiny',
  system: 'You are a pirate.',
  parameters: { num_ctx: 256, temperature: 0.3, stop: ['END'] },
  messages: [
    { role: 'user', content: 'Who are you?' },
    { role: 'assistant', content: 'A pirate, arr.' },
  ],
  license: 'MIT',
}

describe('a model made FROM another by name', () => {
  it('is listed, on the same weights, with its context', async () => {
    const lines: string[] = []
    for await (const line of await ollama.create({ ...persona, stream: true })) lines.push(line.status)
    expect(lines.at(-1)).toBe('success')
    const listed = (await ollama.list()).models.find((m) => m.name === 'persona:latest')
    expect(listed).toBeDefined()
    const made = await record('persona')
    expect(made.path).toBe(join(modelsDir, 'tiny.gguf'))
    expect(made.contextLength).toBe(256)
    // No copy of the weights: the folder holds one GGUF.
    expect(readFileSync(join(modelsDir, 'models.json'), 'utf8')).toContain('"modelfile"')
  })

  it('gives back its Modelfile, parent and parameters', async () => {
    const shown = await ollama.show({ model: 'persona' })
    expect(shown.system).toBe('You are a pirate.')
    expect(shown.details.parent_model).toBe('tiny')
    expect(shown.license).toBe('MIT')
    expect(shown.parameters).toContain('temperature')
    expect(shown.modelfile).toContain('SYSTEM You are a pirate.')
    expect(shown.modelfile).toContain('PARAMETER temperature 0.3')
    expect(shown.modelfile).toContain('PARAMETER stop END')
    expect(shown.modelfile).toContain('PARAMETER num_ctx 256')
    expect(shown.modelfile).toContain('MESSAGE user Who are you?')
    expect(shown.modelfile).toContain('MESSAGE assistant A pirate, arr.')
    expect(shown.modelfile).toContain('LICENSE MIT')
    // As Ollama's show gives them: `ollama run` prints them as the conversation so far.
    expect(shown.messages).toEqual(persona.messages)
  })

  it("applies its system prompt, opening messages and parameters on Ollama's API", async () => {
    await ollama.chat({ model: 'persona', messages: [{ role: 'user', content: 'Hello' }] })
    const job = lastJob<ChatJob>()
    expect(job.messages.map((m) => [m.role, m.content])).toEqual([
      ['system', 'You are a pirate.'],
      ['user', 'Who are you?'],
      ['assistant', 'A pirate, arr.'],
      ['user', 'Hello'],
    ])
    expect(job.temperature).toBe(0.3)
    expect(job.stop).toContain('END')
    // A request's own system prompt goes first instead of the model's; its options over the model's.
    await ollama.chat({
      model: 'persona',
      messages: [
        { role: 'system', content: 'Be a poet.' },
        { role: 'user', content: 'Hello' },
      ],
      options: { temperature: 0.9 },
    })
    expect(lastJob<ChatJob>().messages.map((m) => m.content)).toEqual(['Be a poet.', 'Who are you?', 'A pirate, arr.', 'Hello'])
    expect(lastJob<ChatJob>().temperature).toBe(0.9)
  })

  it("applies its persona on OpenAI's API too, with the contract's sampling defaults", async () => {
    const openai = new OpenAI({ baseURL: `${server.ollamaUrl}/v1`, apiKey: 'ollama' })
    await openai.chat.completions.create({ model: 'persona', messages: [{ role: 'user', content: 'Hello' }] })
    const job = lastJob<ChatJob>()
    expect(job.messages.map((m) => m.content)).toEqual(['You are a pirate.', 'Who are you?', 'A pirate, arr.', 'Hello'])
    expect(job.temperature).toBe(0)
  })

  it('leaves its base as it was', async () => {
    await ollama.chat({ model: 'tiny', messages: [{ role: 'user', content: 'Hello' }] })
    expect(lastJob<ChatJob>().messages.map((m) => m.role)).toEqual(['user'])
    expect((await ollama.show({ model: 'tiny' })).system).toBeUndefined()
  })

  it('is made again from an edited Modelfile, and a model made FROM it keeps what it does not change', async () => {
    await ollama.create({ ...persona, system: 'You are a sailor.', stream: false })
    expect((await ollama.show({ model: 'persona' })).system).toBe('You are a sailor.')
    await ollama.create({ model: 'persona-cold', from: 'persona', parameters: { temperature: 0 }, stream: false })
    const cold = await ollama.show({ model: 'persona-cold' })
    expect(cold.system).toBe('You are a sailor.')
    expect(cold.modelfile).toContain('PARAMETER temperature 0')
    expect(cold.modelfile).toContain('PARAMETER stop END')
    expect((await record('persona-cold')).contextLength).toBe(256)
  })

  it('is copied under a second name, and removed alone', async () => {
    await ollama.copy({ source: 'persona', destination: 'persona-2' })
    expect((await ollama.show({ model: 'persona-2' })).system).toBe('You are a sailor.')
    await ollama.delete({ model: 'persona-2' })
    const names = (await ollama.list()).models.map((m) => m.name)
    expect(names).not.toContain('persona-2:latest')
    expect(names).toEqual(expect.arrayContaining(['persona:latest', 'tiny:latest']))
    expect(existsSync(join(modelsDir, 'tiny.gguf'))).toBe(true)
  })
})

describe('REQUIRES', () => {
  it('is given back by show, as Ollama gives it', async () => {
    await ollama.create({ model: 'needs-new', from: 'tiny', stream: false, ...({ requires: '0.30.0' } as object) })
    const shown = (await ollama.show({ model: 'needs-new' })) as unknown as { requires?: string; modelfile: string }
    expect(shown.requires).toBe('0.30.0')
    expect(shown.modelfile).toContain('REQUIRES 0.30.0')
  })
})

describe('how the base is served', () => {
  it("is the derived model's too: its output limit and time to live, with the Modelfile's context", async () => {
    await ollama.create({ model: 'limited-base', from: 'tiny', stream: false })
    const catalog = join(modelsDir, 'models.json')
    await editCatalog(modelsDir, (models) => {
      const base = models.find((m) => (m as { id?: string }).id === 'limited-base') as Record<string, unknown>
      Object.assign(base, { max_completion_tokens: 40, ttl: 60 })
    })
    await ollama.create({ model: 'limited-child', from: 'limited-base', parameters: { num_ctx: 128 }, stream: false })
    const child = (JSON.parse(readFileSync(catalog, 'utf8')) as { models: Array<Record<string, unknown>> }).models.find((m) => m.id === 'limited-child')
    expect(child).toMatchObject({ max_completion_tokens: 40, ttl: 60, context_length: 128 })
    expect((await record('limited-child')).maxCompletionTokens).toBe(40)
  })
})

describe('templates and adapters', () => {
  it('keeps the model’s own template given again, takes a Jinja one, and refuses a Go one by name', async () => {
    const own = (await ollama.show({ model: 'tiny' })).template
    await ollama.create({ model: 'same-template', from: 'tiny', template: own, stream: false })
    expect((await record('same-template')).chatTemplate).toBeUndefined()
    const jinja = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n"
    await ollama.create({ model: 'jinja', from: 'tiny', template: jinja, stream: false })
    const made = await record('jinja')
    expect(made.chatTemplate).toBe(jinja)
    expect(llamaServerArgs(loadSpecFor(made, { threads: 1, gpuLayers: 0, parallel: 1 }))).toEqual(expect.arrayContaining(['--chat-template', jinja]))
    const refused = await ollama.create({ model: 'go', from: 'tiny', template: '{{ .System }} {{ .Prompt }}', stream: false }).catch((e: unknown) => e)
    expect(refused).toMatchObject({ status_code: 400, error: expect.stringContaining('TEMPLATE') })
  })

  it('takes a LoRA adapter uploaded as a blob, which llama-server is then given', async () => {
    const lora = join(mkdtempSync(join(tmpdir(), 'hearth-lora-')), 'lora.gguf')
    writeTinyLora(lora)
    const digest = `sha256:${createHash('sha256').update(readFileSync(lora)).digest('hex')}`
    await ollama.create({ model: 'adapted', from: 'tiny', adapters: { 'lora.gguf': digest }, stream: false }).catch(() => undefined)
    // The client uploads the blob first, as `ollama create` does.
    const uploaded = await fetch(`${server.ollamaUrl}/api/blobs/${digest}`, { method: 'POST', body: readFileSync(lora) })
    expect(uploaded.status).toBe(201)
    await ollama.create({ model: 'adapted', from: 'tiny', adapters: { 'lora.gguf': digest }, stream: false })
    const made = await record('adapted')
    expect(made.adapterPaths).toHaveLength(1)
    expect(llamaServerArgs(loadSpecFor(made, { threads: 1, gpuLayers: 0, parallel: 1 }))).toEqual(expect.arrayContaining(['--lora', made.adapterPaths![0]]))
    expect((await ollama.show({ model: 'adapted' })).modelfile).toContain(`ADAPTER ${made.adapterPaths![0]}`)
  })
})

describe('what a Modelfile cannot do here, refused by name', () => {
  it.each([
    ['an unknown parameter', { parameters: { num_warp: 3 } }, "unknown parameter 'num_warp'"],
    ['a parameter out of range', { parameters: { temperature: 9 } }, 'temperature'],
    ['a refused parameter', { parameters: { tfs_z: 0.5 } }, 'tfs_z'],
    ['a context too small', { parameters: { num_ctx: 3 } }, 'num_ctx'],
    ['quantizing', { quantize: 'q4_K_M' }, 'quantize'],
    ['a message of an unknown role', { messages: [{ role: 'tool', content: 'x' }] }, 'MESSAGE 1'],
  ])('%s', async (_what, fields, said) => {
    const refused = await ollama.create({ model: 'bad', from: 'tiny', stream: false, ...(fields as object) }).catch((e: unknown) => e)
    expect(refused).toMatchObject({ status_code: 400, error: expect.stringContaining(said) })
    expect((await ollama.list()).models.map((m) => m.name)).not.toContain('bad:latest')
  })

  it('a base that is not there, and a name a downloaded model has', async () => {
    expect(await ollama.create({ model: 'orphan', from: 'nothing-here', stream: false }).catch((e: unknown) => e)).toMatchObject({ status_code: 404 })
    expect(await ollama.create({ model: 'tiny', from: 'persona', stream: false }).catch((e: unknown) => e)).toMatchObject({
      status_code: 400,
      error: expect.stringContaining('already exists'),
    })
    expect((await ollama.show({ model: 'tiny' })).system).toBeUndefined()
  })
})
