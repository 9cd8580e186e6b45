/**
 * The chat template a GGUF without one gets. llama.cpp falls back to ChatML for every such file,
 * whatever the model was trained on; a Gemma or Llama 3 model then reads turns it has never seen
 * and writes `<|im_end|>` as text. llama.cpp does know these families' formats (its built-in
 * templates, src/llama-chat.cpp: `gemma`, `llama3`, `phi3`), but only without `--jinja`, which
 * Hearth needs for tools and thinking. So each is written here as the Jinja equivalent of
 * llama.cpp's built-in, and chosen from the file itself: its architecture and the turn markers
 * its vocabulary holds (a template whose markers are not tokens would be read as plain text).
 */

export type FallbackTemplateName = 'gemma' | 'llama3' | 'phi3' | 'chatml'

/** The vocabulary tokens that tell the families apart (read from the GGUF as its vocabulary is skipped). */
export const TEMPLATE_MARKER_TOKENS: readonly string[] = [
  '<start_of_turn>',
  '<end_of_turn>',
  '<|start_header_id|>',
  '<|end_header_id|>',
  '<|eot_id|>',
  '<|user|>',
  '<|assistant|>',
  '<|end|>',
  '<|im_start|>',
  '<|im_end|>',
]

export function fallbackTemplateFor(architecture: string | undefined, vocabularyHas: ReadonlySet<string>): FallbackTemplateName {
  const has = (...tokens: string[]) => tokens.every((t) => vocabularyHas.has(t))
  if (architecture?.startsWith('gemma') && has('<start_of_turn>', '<end_of_turn>')) return 'gemma'
  if (has('<|start_header_id|>', '<|end_header_id|>', '<|eot_id|>')) return 'llama3'
  if (architecture === 'phi3' && has('<|user|>', '<|assistant|>', '<|end|>')) return 'phi3'
  return 'chatml'
}

/** The Jinja source for `--chat-template`; undefined for ChatML, which llama.cpp uses by itself. */
export function fallbackTemplateSource(name: FallbackTemplateName): string | undefined {
  return name === 'chatml' ? undefined : SOURCES[name]
}

/** What the person reads on the Models page and in `/api/show`. */
export function fallbackTemplateNote(name: FallbackTemplateName, architecture: string | undefined): string {
  return name === 'chatml'
    ? "guessed: the file has no chat template, so llama.cpp's default, ChatML, is used"
    : `guessed: the file has no chat template, so llama.cpp's ${name} format is used (its architecture is ${architecture ?? 'unnamed'} and its vocabulary has that format's turn markers)`
}

// Message content as text: a string, or the text parts of a list of parts.
const TEXT = `{%- macro text(content) -%}
{%- if content is string -%}{{ content }}{%- elif content is iterable -%}{%- for part in content -%}{%- if part.type == 'text' -%}{{ part.text }}{%- endif -%}{%- endfor -%}{%- endif -%}
{%- endmacro -%}
`

const SOURCES: Record<Exclude<FallbackTemplateName, 'chatml'>, string> = {
  // llama.cpp's `gemma`: no system turn (it goes before the first user message), `model` for the assistant.
  gemma: `${TEXT}{%- set ns = namespace(system='') -%}
{%- for message in messages -%}
{%- if message.role == 'system' -%}{%- set ns.system = ns.system + (text(message.content) | trim) -%}
{%- else -%}
{%- set role = 'model' if message.role == 'assistant' else message.role -%}
{{ '<start_of_turn>' + role + '\\n' }}{%- if ns.system and role != 'model' -%}{{ ns.system + '\\n\\n' }}{%- set ns.system = '' -%}{%- endif -%}
{{ (text(message.content) | trim) + '<end_of_turn>\\n' }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}
`,
  // llama.cpp's `llama3`.
  llama3: `${TEXT}{%- for message in messages -%}
{{ '<|start_header_id|>' + message.role + '<|end_header_id|>\\n\\n' + (text(message.content) | trim) + '<|eot_id|>' }}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif -%}
`,
  // llama.cpp's `phi3`.
  phi3: `${TEXT}{%- for message in messages -%}
{{ '<|' + message.role + '|>\\n' + text(message.content) + '<|end|>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<|assistant|>\\n' }}{%- endif -%}
`,
}
