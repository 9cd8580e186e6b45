/**
 * The five kinds of answer speculation is measured on (issue 65): an edit that copies most of a file
 * back, a tool-calling agent turn, a summary that quotes a document, free prose and a translation.
 * Each is a chat request as a client sends it; the bench (speculative-bench.ts) and the test
 * (test/engines/speculation.test.ts) both use them, so the figures and the exactness checks are about the
 * same text.
 */
import { fileURLToPath } from 'node:url'

/** A 120-line module whose parameter `items` the edit renames. */
export function editSource(): string {
  const lines: string[] = [
    "'use strict'",
    '',
    "const assert = require('node:assert')",
    "const { format } = require('node:util')",
    '',
    '/** Helpers over a list of order lines: { sku, name, quantity, price, tags }. */',
  ]
  const helpers: Array<[string, string, string[]]> = [
    ['totalQuantity', 'the number of units over all lines', ['let total = 0', 'for (const line of items) total += line.quantity', 'return total']],
    [
      'totalPrice',
      'what the lines cost together, in cents',
      ['let total = 0', 'for (const line of items) total += line.quantity * line.price', 'return Math.round(total)'],
    ],
    ['skus', 'the SKUs, in order, without repeats', ['const seen = new Set()', 'for (const line of items) seen.add(line.sku)', 'return [...seen]']],
    [
      'byTag',
      'the lines that carry a tag',
      ['assert.ok(typeof tag === "string", "a tag is a string")', 'return items.filter((line) => line.tags.includes(tag))'],
    ],
    [
      'cheapest',
      'the line with the lowest unit price',
      ['let best = undefined', 'for (const line of items) if (!best || line.price < best.price) best = line', 'return best'],
    ],
    [
      'dearest',
      'the line with the highest unit price',
      ['let best = undefined', 'for (const line of items) if (!best || line.price > best.price) best = line', 'return best'],
    ],
    [
      'names',
      'the names of the lines, sorted',
      ['const result = items.map((line) => line.name)', 'result.sort((a, b) => a.localeCompare(b))', 'return result'],
    ],
    ['describe', 'one line of text per order line', ['return items.map((line) => format("%s x%d at %d", line.name, line.quantity, line.price))']],
    ['withoutEmpty', 'the lines that order at least one unit', ['return items.filter((line) => line.quantity > 0)']],
    [
      'scaled',
      'the lines with every quantity multiplied',
      ['assert.ok(factor > 0, "the factor is positive")', 'return items.map((line) => ({ ...line, quantity: line.quantity * factor }))'],
    ],
    [
      'grouped',
      'the lines grouped by their first tag',
      [
        'const groups = new Map()',
        'for (const line of items) {',
        '  const key = line.tags[0] ?? "untagged"',
        '  if (!groups.has(key)) groups.set(key, [])',
        '  groups.get(key).push(line)',
        '}',
        'return groups',
      ],
    ],
  ]
  const extraParam: Record<string, string> = { byTag: ', tag', scaled: ', factor' }
  for (const [name, what, body] of helpers) {
    lines.push('', `/** ${what[0]!.toUpperCase()}${what.slice(1)}. */`, `function ${name}(items${extraParam[name] ?? ''}) {`)
    lines.push(`  assert.ok(Array.isArray(items), '${name} takes an array of lines')`)
    for (const l of body) lines.push(`  ${l}`)
    lines.push('}')
  }
  lines.push('', '/** A short report of an order. */', 'function report(items) {', '  const lines = describe(items)')
  lines.push('  lines.push(format("%d units, %d cents", totalQuantity(items), totalPrice(items)))', "  return lines.join('\\n')", '}', '')
  lines.push('module.exports = {')
  for (const [name] of helpers) lines.push(`  ${name},`)
  lines.push('  report,', '}')
  while (lines.length < 120) lines.splice(lines.length - 1 - helpers.length - 2, 0, '')
  return lines.join('\n')
}

const DOCUMENT = `The town council met on Tuesday evening to discuss the new bridge over the river. The mayor opened the meeting by saying that the old bridge, built in 1932, can no longer carry heavy lorries. Engineers found cracks in two of its three arches last spring. The council has received three designs for a new bridge. The first is a steel arch that would cost four million pounds and take two years to build. The second is a concrete beam bridge that would cost three million pounds and take eighteen months. The third is a cable-stayed bridge that would cost six million pounds but would last a hundred years. Several residents spoke at the meeting. Mrs Patel, who runs the bakery on Mill Street, said that the works must not close the road for more than a month, because her customers come from the other side of the river. Mr Jones, a retired engineer, said that the concrete design is the most sensible, because it is cheap and quick to build. The council will vote on the designs at its next meeting in March.`

const STORY_PROMPT = 'Write a short story about a lighthouse keeper who finds a message in a bottle. Make it about three paragraphs long.'

const TRANSLATION_SOURCE = `The weather was fine on Saturday, so we took the train to the coast. We walked along the beach for two hours and then ate fish and chips in a small café by the harbour. In the afternoon it started to rain, and we went to the museum, which has a fine collection of old ships and maps. We came home tired but happy.`

/** The agent's tools: what a coding agent's turn offers the model. */
export const AGENT_TOOLS = [
  {
    type: 'function',
    function: {
      name: 'read_file',
      description: 'Read a file of the project and return its text.',
      parameters: { type: 'object', properties: { path: { type: 'string', description: 'the path from the project root' } }, required: ['path'] },
    },
  },
  {
    type: 'function',
    function: {
      name: 'edit_file',
      description: 'Replace a piece of text in a file of the project with another.',
      parameters: {
        type: 'object',
        properties: { path: { type: 'string' }, old_text: { type: 'string' }, new_text: { type: 'string' } },
        required: ['path', 'old_text', 'new_text'],
      },
    },
  },
]

export interface SpeculationCase {
  /** A short name, as the bench's table and the test name it. */
  name: 'edit' | 'tool call' | 'quote' | 'prose' | 'translation'
  messages: Array<Record<string, unknown>>
  tools?: typeof AGENT_TOOLS
  maxTokens: number
}

/**
 * SmolLM2's own chat template has no tools (Hearth refuses them for it; Gemma 3's has none either),
 * so the tool call runs SmolLM2 under Qwen 2.5's template: the same ChatML turns SmolLM2 was trained
 * on, with tools and `<tool_call>` blocks (from `../shared/fixtures/chat-templates/`).
 */
export const TOOL_TEMPLATE_FILE = fileURLToPath(new URL('../../shared/fixtures/chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja', import.meta.url))

export function speculationCases(): SpeculationCase[] {
  const source = editSource()
  return [
    {
      name: 'edit',
      messages: [
        {
          role: 'user',
          content: `Here is a file:\n\n\`\`\`js\n${source}\n\`\`\`\n\nRewrite it, renaming the parameter \`items\` to \`lines\`. Give the whole rewritten file in a code block.`,
        },
      ],
      maxTokens: 400,
    },
    {
      name: 'tool call',
      messages: [
        { role: 'system', content: 'You are a coding agent. Use the tools to read and edit the project.' },
        {
          role: 'user',
          content: 'In src/orders/report.js, the function totalPrice rounds the total. Change `return Math.round(total)` to `return Math.ceil(total)`.',
        },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'read_file', arguments: JSON.stringify({ path: 'src/orders/report.js' }) } }],
        },
        { role: 'tool', tool_call_id: 'call_1', content: source },
      ],
      tools: AGENT_TOOLS,
      maxTokens: 200,
    },
    {
      name: 'quote',
      messages: [
        {
          role: 'user',
          content: `Summarise this report of a council meeting. Quote the sentences that matter most word for word, in quotation marks.\n\n${DOCUMENT}`,
        },
      ],
      maxTokens: 300,
    },
    { name: 'prose', messages: [{ role: 'user', content: STORY_PROMPT }], maxTokens: 300 },
    { name: 'translation', messages: [{ role: 'user', content: `Translate this into French:\n\n${TRANSLATION_SOURCE}` }], maxTokens: 250 },
  ]
}
