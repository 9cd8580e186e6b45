/**
 * What a JavaScript program does with Ollama's clients: ollama-js (`ollama`), LangChain's
 * `@langchain/ollama` (ChatOllama, OllamaEmbeddings) and the AI SDK's Ollama provider
 * (`ollama-ai-provider-v2` with `ai`), each call in turn against an Ollama-style server, its outcome
 * printed as one JSON object. An error is recorded (its class, message, status and body), never
 * raised, so one failing call does not hide the others. Before each call it posts the call's name
 * to `<url>/__call`, so a recording server can file the requests that follow under it
 * (test/support/record-ollama-clients.ts).
 *
 *   node ollama-client-calls.mjs '{"client": "ollama-js" | "langchain" | "ai-sdk", "url": ..., "key": ..., "image": <base64 PNG>}'
 *
 * Plain JavaScript, loaded with Node alone: the packages are imported by name from wherever this
 * file sits, so the recorder can run a copy of it beside a scratch install of the clients.
 */
const config = JSON.parse(process.argv[2])
const { url, key, image } = config
const results = {}

async function mark(name) {
  await fetch(`${url}/__call`, { method: 'POST', body: JSON.stringify({ name }) })
}

/** What a program sees of an error: its class, message, and whatever status and body it carries. */
function described(e) {
  const out = { class: e?.constructor?.name ?? typeof e, name: e?.name, message: String(e?.message ?? e).slice(0, 400) }
  for (const field of ['status_code', 'error', 'statusCode', 'responseBody', 'isRetryable', 'status', 'lc_error_code']) {
    if (e?.[field] !== undefined) out[field] = e[field]
  }
  if (e?.cause) out.cause = described(e.cause)
  if (Array.isArray(e?.errors)) out.errors = e.errors.map(described)
  if (e?.lastError) out.lastError = described(e.lastError)
  return out
}

async function call(name, fn) {
  await mark(name)
  try {
    results[name] = { ok: await fn() }
  } catch (e) {
    results[name] = { error: described(e) }
  }
}

/** A stream's chunks, summed up: how many, the text, and the last one whole. */
async function drain(stream, text = (c) => c.message?.content ?? c.response ?? '') {
  let count = 0
  let all = ''
  let last
  for await (const chunk of stream) {
    count++
    all += text(chunk) ?? ''
    last = chunk
  }
  return { chunks: count, text: all, last }
}

const WEATHER_TOOL = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', description: 'The city' } }, required: ['city'] },
  },
}
const CITY_SCHEMA = { type: 'object', properties: { name: { type: 'string' }, country: { type: 'string' } }, required: ['name', 'country'] }
const QUESTION = [
  { role: 'system', content: 'Answer in one short sentence.' },
  { role: 'user', content: 'What is the capital of France?' },
]

async function ollamaJs() {
  const { Ollama } = await import('ollama')
  const client = new Ollama({ host: url, headers: { Authorization: `Bearer ${key}` } })
  const bare = new Ollama({ host: url })
  const options = { temperature: 0, num_predict: 40, num_ctx: 2048, seed: 1, top_k: 20, top_p: 0.9, stop: ['\n\n'] }
  await call('version', () => client.version())
  await call('list', () => client.list())
  await call('list without headers', () => bare.list())
  await call('show', () => client.show({ model: 'tiny' }))
  await call('show verbose', async () => Object.keys((await client.show({ model: 'tiny', verbose: true })).model_info ?? {}).length)
  await call('ps', () => client.ps())
  await call('chat', () => client.chat({ model: 'tiny', messages: QUESTION, options, keep_alive: '5m' }))
  await call('chat stream', async () => drain(await client.chat({ model: 'tiny', messages: QUESTION, stream: true })))
  await call('chat think', () => client.chat({ model: 'tiny', messages: QUESTION, think: true }))
  await call('chat think level', () => client.chat({ model: 'tiny', messages: QUESTION, think: 'high' }))
  await call('chat format json', () => client.chat({ model: 'tiny', messages: QUESTION, format: 'json' }))
  await call('chat format schema', () => client.chat({ model: 'tiny', messages: QUESTION, format: CITY_SCHEMA }))
  await call('chat keep_alive 0', () => client.chat({ model: 'tiny', messages: [], keep_alive: 0 }))
  await call('chat tools', async () => {
    const messages = [{ role: 'user', content: 'What is the weather in Paris?' }]
    const first = await client.chat({ model: 'tiny', messages, tools: [WEATHER_TOOL] })
    messages.push(first.message)
    for (const tc of first.message.tool_calls ?? []) messages.push({ role: 'tool', content: '22 degrees and sunny', tool_name: tc.function.name })
    const second = await client.chat({ model: 'tiny', messages, tools: [WEATHER_TOOL] })
    return { first: first.message, second: second.message }
  })
  await call('chat tools stream', async () =>
    drain(await client.chat({ model: 'tiny', messages: [{ role: 'user', content: 'Weather in Paris?' }], tools: [WEATHER_TOOL], stream: true })),
  )
  await call('chat image base64', () =>
    client.chat({ model: 'tiny-vision', messages: [{ role: 'user', content: 'What is in this picture?', images: [image] }] }),
  )
  await call('chat image bytes', () =>
    client.chat({ model: 'tiny-vision', messages: [{ role: 'user', content: 'What is in this picture?', images: [Buffer.from(image, 'base64')] }] }),
  )
  await call('generate', () => client.generate({ model: 'tiny', prompt: 'Why is the sky blue?', system: 'Be brief.', options, keep_alive: '1m' }))
  await call('generate stream', async () => drain(await client.generate({ model: 'tiny', prompt: 'Why is the sky blue?', stream: true })))
  await call('generate raw', () => client.generate({ model: 'tiny', prompt: '<|im_start|>user\nHi<|im_end|>\n', raw: true }))
  await call('generate suffix', () => client.generate({ model: 'tiny', prompt: 'def add(a, b):', suffix: '    return c' }))
  await call('generate think format', () => client.generate({ model: 'tiny', prompt: 'A city?', think: true, format: CITY_SCHEMA }))
  await call('generate image', () => client.generate({ model: 'tiny-vision', prompt: 'Describe it.', images: [image] }))
  await call('generate context', () => client.generate({ model: 'tiny', prompt: 'And then?', context: [1, 2, 3] }))
  await call('generate load', () => client.generate({ model: 'tiny', prompt: '' }))
  await call('embed', () => client.embed({ model: 'tiny-embed', input: ['first text', 'second text'], truncate: true, keep_alive: '5m', dimensions: 8 }))
  await call('embed one', () => client.embed({ model: 'tiny-embed', input: 'one text' }))
  await call('embeddings (legacy)', () => client.embeddings({ model: 'tiny-embed', prompt: 'one text', options: { temperature: 0 } }))
  await call('pull', async () => drain(await client.pull({ model: 'pullable', stream: true }), () => ''))
  await call('pull not streamed', () => client.pull({ model: 'pullable' }))
  await call('pull missing', async () => drain(await client.pull({ model: 'missing-model', stream: true }), () => ''))
  await call('copy', () => client.copy({ source: 'tiny', destination: 'tiny-copy' }))
  await call('delete', () => client.delete({ model: 'tiny-copy' }))
  await call('create', async () =>
    drain(await client.create({ model: 'made', from: 'tiny', system: 'You are made.', parameters: { temperature: 0.3 }, stream: true }), () => ''),
  )
  await call('push', () => client.push({ model: 'tiny' }))
  await call('error show missing', () => client.show({ model: 'nope' }))
  await call('error chat missing', () => client.chat({ model: 'nope', messages: QUESTION }))
  await call('error chat stream missing', async () => drain(await client.chat({ model: 'nope', messages: QUESTION, stream: true })))
  await call('error 400', () => client.chat({ model: 'fail-400', messages: QUESTION }))
  await call('error 401', () => client.chat({ model: 'fail-401', messages: QUESTION }))
  await call('error 500', () => client.chat({ model: 'fail-500', messages: QUESTION }))
  await call('error 500 stream', async () => drain(await client.chat({ model: 'fail-500', messages: QUESTION, stream: true })))
  await call('error mid-stream', async () => drain(await client.chat({ model: 'fail-midstream', messages: QUESTION, stream: true })))
  await call('error delete missing', () => client.delete({ model: 'nope' }))
}

async function langchain() {
  const { ChatOllama, OllamaEmbeddings } = await import('@langchain/ollama')
  const { HumanMessage, SystemMessage, ToolMessage } = await import('@langchain/core/messages')
  const { tool } = await import('@langchain/core/tools')
  const { z } = await import('zod')
  const headers = { Authorization: `Bearer ${key}` }
  const base = { baseUrl: url, headers }
  const messages = [new SystemMessage('Answer in one short sentence.'), new HumanMessage('What is the capital of France?')]
  const summary = (m) => ({
    content: m.content,
    tool_calls: m.tool_calls,
    additional_kwargs: m.additional_kwargs,
    usage_metadata: m.usage_metadata,
    response_metadata: m.response_metadata,
  })
  const chat = new ChatOllama({ ...base, model: 'tiny', temperature: 0, numPredict: 40, numCtx: 2048, seed: 1, topK: 20, topP: 0.9, keepAlive: '5m' })
  await call('ChatOllama invoke', async () => summary(await chat.invoke(messages, { stop: ['\n\n'] })))
  await call('ChatOllama stream', async () => {
    let text = ''
    let chunks = 0
    for await (const chunk of await chat.stream(messages)) {
      chunks++
      text += chunk.content
    }
    return { chunks, text }
  })
  await call('ChatOllama think', async () => summary(await new ChatOllama({ ...base, model: 'tiny', think: true }).invoke(messages)))
  await call('ChatOllama format json', async () => summary(await new ChatOllama({ ...base, model: 'tiny', format: 'json' }).invoke(messages)))
  const City = z.object({ name: z.string(), country: z.string() })
  await call('ChatOllama withStructuredOutput', () => chat.withStructuredOutput(City).invoke(messages))
  await call('ChatOllama withStructuredOutput functionCalling', () => chat.withStructuredOutput(City, { method: 'functionCalling' }).invoke(messages))
  const weather = tool(async ({ city }) => `22 degrees and sunny in ${city}`, {
    name: 'get_weather',
    description: 'The weather in a city',
    schema: z.object({ city: z.string().describe('The city') }),
  })
  await call('ChatOllama bindTools', async () => {
    const withTools = chat.bindTools([weather])
    const history = [new HumanMessage('What is the weather in Paris?')]
    const first = await withTools.invoke(history)
    history.push(first)
    for (const tc of first.tool_calls ?? []) history.push(new ToolMessage({ content: await weather.invoke(tc.args), tool_call_id: tc.id ?? '', name: tc.name }))
    const second = await withTools.invoke(history)
    return { first: summary(first), second: summary(second) }
  })
  await call('ChatOllama image', async () =>
    summary(
      await new ChatOllama({ ...base, model: 'tiny-vision' }).invoke([
        new HumanMessage({
          content: [
            { type: 'text', text: 'What is in this picture?' },
            { type: 'image_url', image_url: `data:image/png;base64,${image}` },
          ],
        }),
      ]),
    ),
  )
  await call('ChatOllama checkOrPullModel', async () => summary(await new ChatOllama({ ...base, model: 'pullable', checkOrPullModel: true }).invoke(messages)))
  const embeddings = new OllamaEmbeddings({
    ...base,
    model: 'tiny-embed',
    keepAlive: '5m',
    truncate: true,
    dimensions: 8,
    requestOptions: { numCtx: 512, useMmap: true },
  })
  await call('OllamaEmbeddings embedDocuments', async () => (await embeddings.embedDocuments(['first text', 'second text'])).map((v) => v.length))
  await call('OllamaEmbeddings embedQuery', async () => (await embeddings.embedQuery('one text')).length)
  await call('error ChatOllama missing', async () => summary(await new ChatOllama({ ...base, model: 'nope', maxRetries: 0 }).invoke(messages)))
  await call('error ChatOllama 500', async () => summary(await new ChatOllama({ ...base, model: 'fail-500' }).invoke(messages)))
  await call('error ChatOllama mid-stream', async () => summary(await new ChatOllama({ ...base, model: 'fail-midstream', maxRetries: 0 }).invoke(messages)))
  await call('error OllamaEmbeddings missing', () => new OllamaEmbeddings({ ...base, model: 'nope', maxRetries: 0 }).embedQuery('x'))
}

async function aiSdk() {
  const { createOllama } = await import('ollama-ai-provider-v2')
  const { generateText, streamText, embed, embedMany, tool, jsonSchema, Output, stepCountIs } = await import('ai')
  const ollama = createOllama({ baseURL: `${url}/api`, headers: { Authorization: `Bearer ${key}` } })
  // ai 7 takes the system prompt as `instructions`, not as a message.
  const messages = { instructions: QUESTION[0].content, messages: QUESTION.slice(1) }
  const summary = (r) => ({
    text: r.text,
    reasoningText: r.reasoningText,
    finishReason: r.finishReason,
    usage: r.usage,
    toolCalls: r.toolCalls?.map((c) => ({ toolName: c.toolName, input: c.input })),
    warnings: r.warnings,
  })
  await call('generateText', async () =>
    summary(
      await generateText({ model: ollama('tiny'), ...messages, temperature: 0, maxOutputTokens: 40, topP: 0.9, seed: 1, topK: 20, stopSequences: ['\n\n'] }),
    ),
  )
  await call('generateText providerOptions', async () =>
    summary(
      await generateText({
        model: ollama('tiny'),
        ...messages,
        providerOptions: {
          ollama: {
            think: true,
            options: { num_ctx: 2048, temperature: 0, seed: 1, num_predict: 40, top_k: 20, min_p: 0.05, repeat_penalty: 1.1, stop: ['\n\n'] },
          },
        },
      }),
    ),
  )
  await call('generateText reasoning', async () => summary(await generateText({ model: ollama('tiny'), ...messages, reasoning: 'high' })))
  await call('streamText', async () => {
    const result = streamText({ model: ollama('tiny'), ...messages })
    let text = ''
    for await (const delta of result.textStream) text += delta
    return { text, finishReason: await result.finishReason, usage: await result.usage }
  })
  const weather = tool({
    description: 'The weather in a city',
    inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string', description: 'The city' } }, required: ['city'] }),
    execute: async ({ city }) => `22 degrees and sunny in ${city}`,
  })
  await call('generateText tools', async () =>
    summary(await generateText({ model: ollama('tiny'), prompt: 'What is the weather in Paris?', tools: { get_weather: weather }, stopWhen: stepCountIs(3) })),
  )
  await call('streamText tools', async () => {
    const result = streamText({ model: ollama('tiny'), prompt: 'What is the weather in Paris?', tools: { get_weather: weather }, toolChoice: 'required' })
    const parts = []
    for await (const part of result.fullStream) parts.push(part.type)
    return { parts, text: await result.text }
  })
  await call(
    'generateText output object',
    async () => (await generateText({ model: ollama('tiny'), ...messages, output: Output.object({ schema: jsonSchema(CITY_SCHEMA) }) })).output,
  )
  const picture = (part) => [{ role: 'user', content: [{ type: 'text', text: 'What is in this picture?' }, part] }]
  await call('generateText image bytes', async () =>
    summary(
      await generateText({
        model: ollama('tiny-vision'),
        messages: picture({ type: 'file', data: new Uint8Array(Buffer.from(image, 'base64')), mediaType: 'image/png' }),
      }),
    ),
  )
  await call('generateText image base64', async () =>
    summary(await generateText({ model: ollama('tiny-vision'), messages: picture({ type: 'file', data: image, mediaType: 'image/png' }) })),
  )
  await call('generateText image part', async () =>
    summary(
      await generateText({ model: ollama('tiny-vision'), messages: picture({ type: 'image', image: Buffer.from(image, 'base64'), mediaType: 'image/png' }) }),
    ),
  )
  await call('completion model', async () => summary(await generateText({ model: ollama.completion('tiny'), prompt: 'Why is the sky blue?' })))
  await call('embed', async () => (await embed({ model: ollama.embedding('tiny-embed'), value: 'one text' })).embedding.length)
  await call('embedMany', async () =>
    (
      await embedMany({
        model: ollama.embedding('tiny-embed'),
        values: ['first text', 'second text'],
        providerOptions: { ollama: { dimensions: 8, truncate: true, keepAlive: '5m' } },
      })
    ).embeddings.map((v) => v.length),
  )
  await call('error missing', async () => summary(await generateText({ model: ollama('nope'), ...messages, maxRetries: 0 })))
  await call('error 400', async () => summary(await generateText({ model: ollama('fail-400'), ...messages })))
  await call('error 500 (default retries)', async () => summary(await generateText({ model: ollama('fail-500'), ...messages })))
  await call('error streamText 500', async () => {
    const errors = []
    const result = streamText({ model: ollama('fail-500'), ...messages, maxRetries: 0, onError: ({ error }) => void errors.push(described(error)) })
    let text = ''
    for await (const delta of result.textStream) text += delta
    return { text, errors }
  })
  await call('error streamText mid-stream', async () => {
    const errors = []
    const result = streamText({ model: ollama('fail-midstream'), ...messages, maxRetries: 0, onError: ({ error }) => void errors.push(described(error)) })
    let text = ''
    for await (const delta of result.textStream) text += delta
    return { text, errors }
  })
  await call('error embed missing', async () => (await embed({ model: ollama.embedding('nope'), value: 'x', maxRetries: 0 })).embedding.length)
}

const run = { 'ollama-js': ollamaJs, langchain, 'ai-sdk': aiSdk }[config.client]
if (!run) throw new Error(`no client ${config.client}`)
await run()
process.stdout.write(`${JSON.stringify(results)}\n`)
