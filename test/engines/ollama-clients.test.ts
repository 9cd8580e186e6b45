/**
 * Programs written for Ollama against the real server and its real engines: the `ollama` command
 * (built from Ollama's own source, test/support/ollama-program.ts) on the keyless Ollama port, and
 * Ollama's JavaScript and Python clients, LangChain's ChatOllama and the AI SDK's Ollama provider
 * with the key on Hearth's port. The models: stories260K (trained), a tiny llama with a projector,
 * a tiny BERT, a Qwen-format model whose weights answer with a tool call, and an Ollama store made
 * by the real `ollama create`, served where it lies under its Ollama names, read only.
 */
import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Ollama } from 'ollama'
import { pythonClients } from '../support/agent-programs.ts'
import { familyModel } from '../support/family-models.ts'
import { makeOllamaStore, ollamaProgram, runOllama } from '../support/ollama-program.ts'
import { PROJECT_ROOT, startTestServer, type TestServer } from '../support/server-process.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { cannotRun, describeIf, itIf } from '../support/skips.ts'
import { makePng } from '../support/test-images.ts'
import { writeTinyBert, writeTinyLlama, writeTinyMmproj } from '../support/tiny-models.ts'
import { llamaBuild } from '../support/upstream-servers.ts'

const stories = sharedFixture('models/stories260K-chatml.gguf')
const qwenTemplate = sharedFixture('chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja')
if (!llamaBuild) cannotRun('llama.cpp is not built on this machine (npm run build:engines); the Ollama client suite cannot run')
if (!ollamaProgram()) cannotRun('the ollama command is not built (the engines setup builds it from the Go module proxy); its tests cannot run')
const python = pythonClients()
if (!python) cannotRun("the Python clients' virtualenv is not installed (the engines setup installs it); the Python client's tests cannot run")

/** The weather call the `caller` model's weights write, token by token (Qwen's vocabulary and Hermes' tool-call format). */
const CALL = [
  '\u010a',
  '<tool_call>',
  '\u010a\u010a',
  '{"',
  'name',
  '":"',
  'weather',
  '","',
  'arguments',
  '":{"',
  'city',
  '":',
  '"',
  'Paris',
  '"}}\u010a',
  '</tool_call>',
]
const weatherTool = {
  type: 'function',
  function: {
    name: 'weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}

describeIf(
  llamaBuild && stories && qwenTemplate,
  'needs llama.cpp built here (npm run build:engines), the shared fixtures (../shared/fixtures) and the chat templates of ../shared/fixtures',
)("Ollama's clients against Hearth", () => {
  let server: TestServer
  let keyed: Ollama
  let keyless: Ollama
  let png: Buffer
  let ollamaStore: string

  beforeAll(async () => {
    const modelsDir = mkdtempSync(join(tmpdir(), 'hearth-ollama-clients-'))
    const files = mkdtempSync(join(tmpdir(), 'hearth-ollama-files-'))
    copyFileSync(stories!, join(modelsDir, 'tiny.gguf'))
    copyFileSync(stories!, join(modelsDir, 'scratch.gguf'))
    const vision = writeTinyLlama(join(modelsDir, 'tiny-vision.gguf'), { chatTemplate: true, contextLength: 1024 })
    writeTinyMmproj(join(modelsDir, 'mmproj-tiny-vision.gguf'), { textEmbd: vision.embd })
    writeTinyBert(join(modelsDir, 'tiny-embed.gguf'))
    const caller = familyModel(
      join(PROJECT_ROOT, 'test/artifacts/family-models'),
      { template: 'Qwen-Qwen2.5-7B-Instruct', vocabulary: 'qwen3', reply: CALL },
      readFileSync(qwenTemplate!, 'utf8'),
    )
    copyFileSync(caller, join(modelsDir, 'caller.gguf'))
    // A store as Ollama's users have one, made by the real `ollama create`.
    ollamaStore = mkdtempSync(join(tmpdir(), 'hearth-ollama-store-'))
    if (ollamaProgram()) {
      copyFileSync(stories!, join(files, 'storyteller.gguf'))
      writeTinyBert(join(files, 'bert.gguf'))
      await makeOllamaStore(ollamaStore, [
        {
          name: 'storyteller:latest',
          gguf: join(files, 'storyteller.gguf'),
          modelfileExtra: 'SYSTEM "You tell short stories."\nPARAMETER temperature 0\nPARAMETER stop "<|im_end|>"',
        },
        { name: 'embedder', gguf: join(files, 'bert.gguf') },
      ])
    }
    server = await startTestServer({ modelsDir, args: ['--ollama-port', '0', '--model-sources', 'ollama'], env: { OLLAMA_MODELS: ollamaStore } })
    keyed = new Ollama({ host: server.url, headers: { Authorization: `Bearer ${server.apiKey}` } })
    keyless = new Ollama({ host: server.ollamaUrl! })
    png = await makePng()
  })

  afterAll(async () => {
    await server?.stop()
  })

  describe('the ollama command, on the Ollama port without a key', () => {
    const ollama = (args: string[], input?: string) =>
      runOllama(args, { host: server.ollamaUrl!, ...(input !== undefined ? { input } : {}), timeoutMs: 120_000 })

    itIf(ollamaProgram(), 'needs the ollama command built (the engines setup builds it from the Go module proxy)')(
      'lists Hearth’s models and the store’s under their Ollama names',
      async () => {
        const listed = await ollama(['list'])
        expect(listed.code, listed.stderr).toBe(0)
        for (const name of ['tiny:latest', 'tiny-embed:latest', 'caller:latest', 'storyteller:latest', 'embedder:latest']) expect(listed.stdout).toContain(name)
      },
    )

    itIf(ollamaProgram(), 'needs the ollama command built (the engines setup builds it from the Go module proxy)')(
      'shows a model from the store: architecture, parameters, context length, its Modelfile',
      async () => {
        const shown = await ollama(['show', 'storyteller'])
        expect(shown.code, shown.stderr).toBe(0)
        expect(shown.stdout).toMatch(/architecture\s+llama/)
        expect(shown.stdout).toMatch(/context length\s+\d+/)
        const modelfile = await ollama(['show', '--modelfile', 'storyteller'])
        expect(modelfile.stdout).toContain('You tell short stories.')
        const parameters = await ollama(['show', '--parameters', 'storyteller'])
        expect(parameters.stdout).toMatch(/temperature\s+0/)
      },
    )

    itIf(ollamaProgram(), 'needs the ollama command built (the engines setup builds it from the Go module proxy)')(
      'runs a model and answers, then lists it as running',
      async () => {
        const ran = await ollama(['run', 'tiny', 'Once upon a time'])
        expect(ran.code, ran.stderr).toBe(0)
        expect(ran.stdout.trim().length).toBeGreaterThan(0)
        const story = await ollama(['run', 'storyteller', 'Tell me one'])
        expect(story.code, story.stderr).toBe(0)
        expect(story.stdout.trim().length).toBeGreaterThan(0)
        const ps = await ollama(['ps'])
        expect(ps.stdout).toContain('tiny:latest')
      },
    )

    itIf(ollamaProgram(), 'needs the ollama command built (the engines setup builds it from the Go module proxy)')(
      'removes a model of Hearth’s folder, and refuses one in Ollama’s store',
      async () => {
        const removed = await ollama(['rm', 'scratch'])
        expect(removed.code, removed.stderr).toBe(0)
        expect(existsSync(join(server.process.spawnargs[server.process.spawnargs.indexOf('--models-dir') + 1]!, 'scratch.gguf'))).toBe(false)
        const refused = await ollama(['rm', 'storyteller'])
        expect(refused.code).not.toBe(0)
        expect(refused.stderr).toContain("Ollama's store")
        expect(existsSync(join(ollamaStore, 'manifests/registry.ollama.ai/library/storyteller/latest'))).toBe(true)
      },
    )

    itIf(ollamaProgram(), 'needs the ollama command built (the engines setup builds it from the Go module proxy)')(
      'creates a model from a GGUF file, which then runs',
      async () => {
        const dir = mkdtempSync(join(tmpdir(), 'hearth-ollama-create-'))
        copyFileSync(stories!, join(dir, 'made.gguf'))
        writeFileSync(join(dir, 'Modelfile'), 'FROM ./made.gguf\n')
        const created = await runOllama(['create', 'made', '-f', join(dir, 'Modelfile')], { host: server.ollamaUrl!, cwd: dir, timeoutMs: 120_000 })
        expect(created.code, created.stderr).toBe(0)
        expect((await keyless.list()).models.map((m) => m.name)).toContain('made:latest')
        const ran = await ollama(['run', 'made', 'Once upon a time'])
        expect(ran.code, ran.stderr).toBe(0)
        // A Modelfile's system prompt is the model's own (ollama-cli.test.ts puts every Modelfile command through the command).
        writeFileSync(join(dir, 'Modelfile'), 'FROM ./made.gguf\nSYSTEM "Be brief."\n')
        const brief = await runOllama(['create', 'made-brief', '-f', join(dir, 'Modelfile')], { host: server.ollamaUrl!, cwd: dir, timeoutMs: 120_000 })
        expect(brief.code, brief.stderr).toBe(0)
        expect((await ollama(['show', '--system', 'made-brief'])).stdout).toBe('Be brief.')
      },
    )

    itIf(ollamaProgram(), 'needs the ollama command built (the engines setup builds it from the Go module proxy)')(
      'says why it cannot pull a model of Ollama’s registry from here: the registry is out of reach',
      async () => {
        const missing = await ollama(['run', 'llama3.2:3b', 'hi'])
        expect(missing.code).not.toBe(0)
        expect(missing.stderr).toContain('cannot reach registry.ollama.ai')
      },
    )
  })

  describe("Ollama's JavaScript client", () => {
    it('chats whole and streamed, with Ollama’s counts', async () => {
      const answer = await keyed.chat({
        model: 'tiny',
        messages: [{ role: 'user', content: 'Once upon a time' }],
        options: { temperature: 0, num_predict: 12 },
      })
      expect(answer.message.content.length).toBeGreaterThan(0)
      expect(answer).toMatchObject({ done: true, done_reason: 'length', eval_count: 12 })
      expect(answer.prompt_eval_duration).toBeGreaterThan(0)
      let text = ''
      let last
      for await (const part of await keyless.chat({
        model: 'tiny',
        messages: [{ role: 'user', content: 'Once upon a time' }],
        stream: true,
        options: { temperature: 0, num_predict: 12 },
      })) {
        text += part.message.content
        last = part
      }
      // The same greedy answer, streamed.
      expect(text).toBe(answer.message.content)
      expect(last).toMatchObject({ done: true, eval_count: 12 })
    })

    it('calls a tool the model writes, arguments as an object', async () => {
      const answer = await keyed.chat({
        model: 'caller',
        messages: [{ role: 'user', content: 'Weather in Paris?' }],
        tools: [weatherTool],
        options: { temperature: 0 },
      })
      expect(answer.message.tool_calls).toEqual([
        expect.objectContaining({ function: expect.objectContaining({ name: 'weather', arguments: { city: 'Paris' } }) }),
      ])
      const parts = []
      for await (const part of await keyed.chat({
        model: 'caller',
        messages: [{ role: 'user', content: 'Weather in Paris?' }],
        tools: [weatherTool],
        stream: true,
      }))
        parts.push(part)
      expect(parts.flatMap((p) => p.message.tool_calls ?? [])).toEqual([
        expect.objectContaining({ function: expect.objectContaining({ name: 'weather', arguments: { city: 'Paris' } }) }),
      ])
    })

    it('answers in a JSON schema, and in JSON', async () => {
      const schema = {
        type: 'object',
        properties: { name: { type: 'string', maxLength: 8 }, age: { type: 'integer', minimum: 0, maximum: 99 } },
        required: ['name', 'age'],
        additionalProperties: false,
      }
      const answer = await keyed.chat({ model: 'tiny', messages: [{ role: 'user', content: 'A person' }], format: schema, options: { num_predict: 60 } })
      const parsed = JSON.parse(answer.message.content) as { name: string; age: number }
      expect(typeof parsed.name).toBe('string')
      expect(Number.isInteger(parsed.age)).toBe(true)
      const json = await keyed.generate({ model: 'tiny', prompt: 'A person as JSON', format: 'json', options: { num_predict: 40 } })
      expect(json.done_reason === 'length' || typeof JSON.parse(json.response!) === 'object').toBe(true)
    })

    it('sees an image, sent as base64 or bytes', async () => {
      for (const image of [png.toString('base64'), new Uint8Array(png)] as Array<string & Uint8Array>) {
        const answer = await keyed.chat({
          model: 'tiny-vision',
          messages: [{ role: 'user', content: 'What is in it?', images: [image] }],
          options: { num_predict: 4 },
        })
        expect(answer.done).toBe(true)
        expect(answer.prompt_eval_count).toBeGreaterThan(20) // the image's tokens are in the prompt
      }
      const plain = await keyed.show({ model: 'tiny-vision' })
      expect(plain.capabilities).toContain('vision')
    })

    it('embeds with the model from Hearth’s folder and with the one from Ollama’s store', async () => {
      for (const model of ['tiny-embed', 'embedder']) {
        const { embeddings } = await keyless.embed({ model, input: ['one', 'two'] })
        expect(embeddings).toHaveLength(2)
        const norm = Math.hypot(...embeddings[0]!)
        expect(norm).toBeCloseTo(1, 3)
      }
    })

    it('applies a store model’s system prompt and parameters, as Ollama does', async () => {
      const first = await keyless.generate({ model: 'storyteller', prompt: 'Go on', options: { num_predict: 8 } })
      const second = await keyless.generate({ model: 'storyteller', prompt: 'Go on', options: { num_predict: 8 } })
      // Its Modelfile's temperature 0: the same answer twice.
      expect(second.response).toBe(first.response)
      const shown = await keyless.show({ model: 'storyteller' })
      expect(shown.system).toBe('You tell short stories.')
      expect((shown as unknown as { hearth: { source: string } }).hearth.source).toBe('ollama')
    })

    it('answers bad input in Ollama’s shape and stays up', async () => {
      const errors = await Promise.all([
        keyless.chat({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e),
        keyless
          .chat({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], options: { temperature: 'hot' as unknown as number } })
          .catch((e: unknown) => e),
        keyless.chat({ model: 'tiny', messages: [{ role: 'user', content: 'x', images: ['bm90IGFuIGltYWdl'] }] }).catch((e: unknown) => e),
        keyless.embed({ model: 'tiny', input: 'x' }).catch((e: unknown) => e),
        // stories260K's template has no tool calling: refused by name, as Ollama does.
        keyless.chat({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], tools: [weatherTool] }).catch((e: unknown) => e),
      ])
      expect(errors.map((e) => (e as { status_code: number }).status_code)).toEqual([404, 400, 400, 400, 400])
      for (const e of errors) expect(typeof (e as { error: unknown }).error).toBe('string')
      expect((await keyless.chat({ model: 'tiny', messages: [{ role: 'user', content: 'x' }], options: { num_predict: 2 } })).done).toBe(true)
    })
  })

  it("Ollama's Python client: chat, streams, formats, images, embeddings and its errors", async () => {
    if (!python) return
    const imagePath = join(mkdtempSync(join(tmpdir(), 'hearth-ollama-py-')), 'image.png')
    writeFileSync(imagePath, png)
    const script = join(PROJECT_ROOT, 'test/support/ollama-python-calls.py')
    const config = JSON.stringify({
      url: server.url,
      key: server.apiKey,
      image: png.toString('base64'),
      image_path: imagePath,
      record: false,
      tools_model: 'caller',
    })
    const out = execFileSync(python, [script, config], { encoding: 'utf8', timeout: 300_000, maxBuffer: 64 * 1024 * 1024 })
    const results = JSON.parse(out) as Record<string, { ok?: any; error?: { class: string; status_code?: number; error?: string } }>
    for (const call of [
      'list',
      'show',
      'ps',
      'chat',
      'chat stream',
      'chat format json',
      'chat format pydantic',
      'chat keep_alive 0',
      'chat tools (a Python function)',
      'chat tools stream',
      'chat image path',
      'chat image bytes',
      'generate',
      'generate stream',
      'generate raw',
      'generate load',
      'embed',
      'embed one',
      'embeddings (legacy)',
      'copy',
      'delete',
      'create',
    ]) {
      expect(results[call]?.error, `${call}: ${JSON.stringify(results[call])}`).toBeUndefined()
    }
    // `create` FROM a model by name with SYSTEM and PARAMETER is made (it replaces the `made` the command made from a GGUF above).
    expect(results['chat']!.ok.message.content.length).toBeGreaterThan(0)
    expect(results['chat stream']!.ok.last.done).toBe(true)
    expect(results['embed']!.ok.embeddings).toHaveLength(2)
    expect(results['embed']!.ok.embeddings[0]).toHaveLength(8) // dimensions: 8
    // What Hearth refuses, the client raises with Ollama's status.
    expect(results['error chat missing']!.error).toMatchObject({ class: 'ResponseError', status_code: 404 })
    // Pulled from Ollama's registry, which this machine cannot reach: the stream's last line says so.
    expect(results['pull missing']!.error).toMatchObject({ class: 'ResponseError', error: expect.stringContaining('cannot reach registry.ollama.ai') })
    expect(results['push']!.error).toMatchObject({ class: 'ResponseError', status_code: 400 })
    expect(results['chat think']!.error).toMatchObject({ status_code: 400, error: '"tiny" does not support thinking' })
    // A Python function as the tool: the model's call comes back with its arguments as a dict.
    expect(results['chat tools (a Python function)']!.ok.first.tool_calls).toEqual(
      [{ function: { name: 'weather', arguments: { city: 'Paris' } } }].map((c) => expect.objectContaining({ function: expect.objectContaining(c.function) })),
    )
  })

  it('LangChain’s ChatOllama and OllamaEmbeddings', async () => {
    const { ChatOllama, OllamaEmbeddings } = await import('@langchain/ollama')
    const headers = { Authorization: `Bearer ${server.apiKey}` }
    const chat = new ChatOllama({ baseUrl: server.url, headers, model: 'tiny', temperature: 0, numPredict: 8 })
    const answer = await chat.invoke('Once upon a time')
    expect(String(answer.content).length).toBeGreaterThan(0)
    let streamed = ''
    for await (const chunk of await chat.stream('Once upon a time')) streamed += String(chunk.content)
    expect(streamed).toBe(String(answer.content))
    const caller = new ChatOllama({ baseUrl: server.url, headers, model: 'caller' })
    const called = await caller.bindTools([weatherTool]).invoke('Weather in Paris?')
    expect(called.tool_calls).toEqual([expect.objectContaining({ name: 'weather', args: { city: 'Paris' } })])
    const embeddings = new OllamaEmbeddings({ baseUrl: server.url, headers, model: 'embedder' })
    expect((await embeddings.embedQuery('one')).length).toBeGreaterThan(0)
    // Structured output through a JSON schema (the engine's grammar holds the random model to it).
    const { z } = await import('zod')
    const person = await new ChatOllama({ baseUrl: server.url, headers, model: 'tiny', temperature: 0, numPredict: 60 })
      .withStructuredOutput(z.object({ name: z.string().max(8), age: z.number().int().min(0).max(99) }), { method: 'jsonSchema' })
      .invoke('A person')
    expect(typeof person.name).toBe('string')
    const { HumanMessage } = await import('@langchain/core/messages')
    const seen = await new ChatOllama({ baseUrl: server.url, headers, model: 'tiny-vision', numPredict: 4 }).invoke([
      new HumanMessage({
        content: [
          { type: 'text', text: 'What is in it?' },
          { type: 'image_url', image_url: `data:image/png;base64,${png.toString('base64')}` },
        ],
      }),
    ])
    expect(seen.usage_metadata?.input_tokens ?? 0).toBeGreaterThan(20)
    await expect(new ChatOllama({ baseUrl: server.url, headers, model: 'nope' }).invoke('x')).rejects.toMatchObject({ status_code: 404 })
  })

  it('the AI SDK’s Ollama provider', async () => {
    const { createOllama } = await import('ollama-ai-provider-v2')
    const { embed, generateText, jsonSchema, streamText, tool } = await import('ai')
    const ollama = createOllama({ baseURL: `${server.url}/api`, headers: { Authorization: `Bearer ${server.apiKey}` } })
    const { text } = await generateText({ model: ollama('tiny'), prompt: 'Once upon a time', temperature: 0, maxOutputTokens: 8 })
    expect(text.length).toBeGreaterThan(0)
    const streamed = streamText({ model: ollama('tiny'), prompt: 'Once upon a time', temperature: 0, maxOutputTokens: 8 })
    let joined = ''
    for await (const piece of streamed.textStream) joined += piece
    expect(joined).toBe(text)
    const called = await generateText({
      model: ollama('caller'),
      prompt: 'Weather in Paris?',
      tools: { weather: tool({ description: 'The weather in a city', inputSchema: jsonSchema<{ city: string }>(weatherTool.function.parameters as never) }) },
    })
    expect(called.toolCalls).toEqual([expect.objectContaining({ toolName: 'weather', input: { city: 'Paris' } })])
    const { embedding } = await embed({ model: ollama.textEmbeddingModel('tiny-embed'), value: 'one' })
    expect(embedding.length).toBeGreaterThan(0)
    const { Output } = await import('ai')
    const structured = await generateText({
      model: ollama('tiny'),
      prompt: 'A person',
      output: Output.object({
        schema: jsonSchema<{ name: string; age: number }>({
          type: 'object',
          properties: { name: { type: 'string', maxLength: 8 }, age: { type: 'integer', minimum: 0, maximum: 99 } },
          required: ['name', 'age'],
          additionalProperties: false,
        }),
      }),
      // Greedy: sampled at Ollama's default temperature, an unseeded answer sometimes spent its 60
      // tokens on the whitespace the grammar allows between fields and stopped mid-object.
      temperature: 0,
      maxOutputTokens: 60,
    })
    expect(Number.isInteger(structured.output.age)).toBe(true)
    const image = await generateText({
      model: ollama('tiny-vision'),
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is in it?' },
            { type: 'image', image: png.toString('base64'), mediaType: 'image/png' },
          ],
        },
      ],
      maxOutputTokens: 4,
    })
    expect(image.usage.inputTokens ?? 0).toBeGreaterThan(20)
    await expect(generateText({ model: ollama('nope'), prompt: 'x', maxRetries: 0 })).rejects.toMatchObject({ statusCode: 404 })
  })
})
