/** Ready-to-paste client code for the Server page, with this server's address and key filled in. */

export interface SnippetTarget {
  /** Base URL without /v1, e.g. http://127.0.0.1:8181 */
  address: string
  apiKey: string
  model: string
}

export interface Snippet {
  id: 'curl' | 'node' | 'python' | 'tools'
  label: string
  code: string
}

/** Single-quoted for a POSIX shell. */
function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`
}

export function clientSnippets({ address, apiKey, model }: SnippetTarget): Snippet[] {
  const base = `${address}/v1`
  const js = JSON.stringify
  const body = JSON.stringify({ model, messages: [{ role: 'user', content: 'Hello!' }] })
  return [
    {
      id: 'curl',
      label: 'curl',
      code: [
        `curl ${base}/chat/completions \\`,
        `  -H ${shellQuote(`Authorization: Bearer ${apiKey}`)} \\`,
        `  -H 'Content-Type: application/json' \\`,
        `  -d ${shellQuote(body)}`,
      ].join('\n'),
    },
    {
      id: 'node',
      label: 'Node (openai)',
      code: [
        `import OpenAI from 'openai'`,
        ``,
        `const client = new OpenAI({ baseURL: ${js(base)}, apiKey: ${js(apiKey)} })`,
        `const completion = await client.chat.completions.create({`,
        `  model: ${js(model)},`,
        `  messages: [{ role: 'user', content: 'Hello!' }],`,
        `})`,
        `console.log(completion.choices[0].message.content)`,
      ].join('\n'),
    },
    {
      id: 'python',
      label: 'Python (openai)',
      code: [
        `from openai import OpenAI`,
        ``,
        `client = OpenAI(base_url=${js(base)}, api_key=${js(apiKey)})`,
        `completion = client.chat.completions.create(`,
        `    model=${js(model)},`,
        `    messages=[{"role": "user", "content": "Hello!"}],`,
        `)`,
        `print(completion.choices[0].message.content)`,
      ].join('\n'),
    },
    {
      id: 'tools',
      label: 'Tools (Node)',
      code: [
        `import OpenAI from 'openai'`,
        ``,
        `const client = new OpenAI({ baseURL: ${js(base)}, apiKey: ${js(apiKey)} })`,
        `const tools = [{`,
        `  type: 'function',`,
        `  function: {`,
        `    name: 'get_weather',`,
        `    description: 'The current weather in a city',`,
        `    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },`,
        `  },`,
        `}]`,
        `const completion = await client.chat.completions.create({`,
        `  model: ${js(model)},`,
        `  messages: [{ role: 'user', content: 'What is the weather in Paris?' }],`,
        `  tools,`,
        `})`,
        `// Run the calls, then send each result back as { role: 'tool', tool_call_id, content }.`,
        `console.log(completion.choices[0].message.tool_calls)`,
      ].join('\n'),
    },
  ]
}

/** The key hidden for screens others may see; copying still takes the real one. */
export function maskKey(key: string): string {
  return key.length <= 12 ? '••••••••' : `${key.slice(0, 7)}••••••••${key.slice(-4)}`
}
