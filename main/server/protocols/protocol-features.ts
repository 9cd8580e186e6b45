/**
 * Which of Hearth's features each protocol carries, in one table: every feature reaches every
 * protocol that can express it, through the same answer pipeline, and where a protocol cannot,
 * the table says why. docs/api.md shows it (`protocolFeaturesMarkdown`), and
 * test/fast/protocol-features.test.ts runs a request for every cell that says yes, and tries every
 * cell that says no where the protocol has a field to try it with.
 */

export const PROTOCOLS = [
  'chat completions',
  'completions',
  'responses',
  'messages',
  'count_tokens',
  'embeddings',
  'rerank',
  'speech',
  'ollama chat',
  'ollama generate',
  'ollama embed',
] as const
export type Protocol = (typeof PROTOCOLS)[number]

export const FEATURES = [
  'documents',
  'images',
  'tools',
  'mcp',
  'structured output',
  'reasoning',
  'logprobs',
  'cancel',
  'deadline',
  'quotas',
  'warnings',
] as const
export type Feature = (typeof FEATURES)[number]

/** A feature a protocol carries (`how`: the fields that ask for it), or cannot (`why`). */
export type FeatureCell = { carried: true; how: string } | { carried: false; why: string }

const yes = (how: string): FeatureCell => ({ carried: true, how })
const no = (why: string): FeatureCell => ({ carried: false, why })

/** What every protocol gets from the answer pipeline alike. */
const PIPELINE = {
  cancel: yes('a client that closes the connection stops the engine'),
  deadline: yes('past `--request-timeout`, a 408 (or the stream cut, saying so)'),
  quotas: yes("the key's requests per minute and tokens per day (429)"),
} as const

const TEXT_ONLY = {
  documents: no('its input is text to embed or score, not a conversation with parts'),
  images: no('its input is text'),
  tools: no('it writes no text: nothing to call a tool with'),
  mcp: no('it writes no text: nothing to call a tool with'),
  'structured output': no('its output is vectors or scores'),
  reasoning: no('it writes no text'),
  logprobs: no('it writes no text'),
} as const

export const PROTOCOL_FEATURES: Readonly<Record<Protocol, Readonly<Record<Feature, FeatureCell>>>> = {
  'chat completions': {
    documents: yes('`file` content parts (`file_id` or `file_data`), read into the prompt, cited as `[n]`'),
    images: yes('an `image_url` part (one image per request)'),
    tools: yes('`tools`, `tool_choice`, `parallel_tool_calls`'),
    mcp: no("chat completions has no MCP tool (OpenAI's MCP tool is the Responses API's); a `tools` entry of type `mcp` is refused"),
    'structured output': yes('`response_format` (`json_schema`, `json_object`)'),
    reasoning: yes('`reasoning_effort`; the thinking comes as `reasoning_content`'),
    logprobs: yes('`logprobs`, `top_logprobs`'),
    ...PIPELINE,
    warnings: yes('a `Warning` header for each field set aside'),
  },
  completions: {
    documents: no('a prompt is text continued as it is: no parts to carry a file'),
    images: no('a prompt is text continued as it is'),
    tools: no('the legacy completions API has no tools'),
    mcp: no('the legacy completions API has no tools'),
    'structured output': no('the legacy completions API has no response format'),
    reasoning: no('a prompt is continued as it is, without a chat template to think in'),
    logprobs: yes('`logprobs` (0–5)'),
    ...PIPELINE,
    warnings: no('no field of it is set aside: each is honoured or refused'),
  },
  responses: {
    documents: yes('`input_file` parts (`file_id` or `file_data`), cited as `file_citation` annotations'),
    images: yes('an `input_image` part (one image per request)'),
    tools: yes('function, custom and namespace tools'),
    mcp: yes('`mcp` tools naming servers the user configured, with approvals'),
    'structured output': yes('`text.format`'),
    reasoning: yes('`reasoning.effort`; reasoning items, sealed with `include: ["reasoning.encrypted_content"]`'),
    logprobs: yes('`include: ["message.output_text.logprobs"]`, `top_logprobs`'),
    ...PIPELINE,
    warnings: yes('a `Warning` header for each field set aside'),
  },
  messages: {
    documents: yes('`document` blocks (PDF, text, a file id), cited as `char_location` with `citations: {enabled: true}`'),
    images: yes('`image` blocks (base64; one image per request)'),
    tools: yes('`tools`, `tool_choice`'),
    mcp: yes('`mcp_servers` naming servers the user configured (the MCP connector)'),
    'structured output': yes('`output_config.format`'),
    reasoning: yes('`thinking`, `output_config.effort`; thinking blocks carry their sealed signature'),
    logprobs: no("Anthropic's Messages API has no log probabilities"),
    ...PIPELINE,
    warnings: yes('a `Warning` header for each field or tool set aside'),
  },
  count_tokens: {
    documents: yes('`document` blocks, counted as the model reads them'),
    images: yes('`image` blocks, counted as the model reads them'),
    tools: yes('`tools`, counted in the template'),
    mcp: yes('`mcp_servers`: their tools counted'),
    'structured output': no('a count writes nothing to shape'),
    reasoning: no('a count writes nothing to think'),
    logprobs: no('a count writes nothing'),
    ...PIPELINE,
    warnings: yes('a `Warning` header for each field or tool set aside'),
  },
  embeddings: { ...TEXT_ONLY, ...PIPELINE, warnings: no('no field of it is set aside: each is honoured or refused') },
  rerank: { ...TEXT_ONLY, ...PIPELINE, warnings: no('no field of it is set aside: each is honoured or refused') },
  speech: {
    documents: no('its input is audio'),
    images: no('its input is audio'),
    tools: no('whisper writes a transcript: no tools'),
    mcp: no('whisper writes a transcript: no tools'),
    'structured output': no('its formats are its own (`response_format`: json, text, srt, vtt, verbose_json)'),
    reasoning: no('whisper does not think apart'),
    logprobs: yes('`include[]=logprobs` (transcriptions)'),
    ...PIPELINE,
    quotas: yes('charged by the second of audio'),
    warnings: no('no field of it is set aside: each is honoured or refused'),
  },
  'ollama chat': {
    documents: no("Ollama's messages carry text and images only"),
    images: yes("a message's `images` (base64; one image per request)"),
    tools: yes('`tools`'),
    mcp: no("Ollama's API has no MCP"),
    'structured output': yes('`format` (`json` or a JSON schema)'),
    reasoning: yes('`think` (true, false or a level); the thinking comes as `thinking`'),
    logprobs: yes('`logprobs`, `top_logprobs`'),
    ...PIPELINE,
    warnings: yes('a `Warning` header for each field or option set aside'),
  },
  'ollama generate': {
    documents: no("Ollama's generate takes a prompt and images only"),
    images: yes('`images` (base64; one image per request)'),
    tools: no("Ollama's generate has no tools"),
    mcp: no("Ollama's API has no MCP"),
    'structured output': yes('`format`'),
    reasoning: yes('`think`'),
    logprobs: yes('`logprobs`, `top_logprobs`'),
    ...PIPELINE,
    warnings: yes('a `Warning` header for each field or option set aside'),
  },
  'ollama embed': { ...TEXT_ONLY, ...PIPELINE, warnings: yes('a `Warning` header for each option set aside') },
}

/** The table as docs/api.md shows it: a row per protocol, ✓ or — with the note. */
export function protocolFeaturesMarkdown(): string {
  const header = `| protocol | ${FEATURES.join(' | ')} |`
  const rule = `|---|${FEATURES.map(() => '---').join('|')}|`
  const rows = PROTOCOLS.map((p) => `| ${p} | ${FEATURES.map((f) => cellText(PROTOCOL_FEATURES[p][f])).join(' | ')} |`)
  return [header, rule, ...rows].join('\n')
}

function cellText(cell: FeatureCell): string {
  return (cell.carried ? `✓ ${cell.how}` : `— ${cell.why}`).replace(/\|/g, '\\|')
}
