export type ModelKind = 'chat' | 'embedding' | 'rerank' | 'speech'
export type Capability = 'chat' | 'vision' | 'tools' | 'embeddings' | 'rerank' | 'transcription' | 'translation'

/** llama.cpp's `pooling_type` of an encoder with a classification head: it scores query–document pairs. */
const POOLING_RANK = 4

/** GGUF architectures that are encoders: they embed text and cannot chat. */
const EMBEDDING_ARCHITECTURES = new Set([
  'bert',
  'nomic-bert',
  'nomic-bert-moe',
  'jina-bert-v2',
  'jina-bert-v3',
  'modern-bert',
  'neo-bert',
  't5encoder',
  'eurobert',
])

export function kindFromArchitecture(architecture: string | undefined, poolingType?: number): ModelKind {
  if (!architecture || !EMBEDDING_ARCHITECTURES.has(architecture)) return 'chat'
  return poolingType === POOLING_RANK ? 'rerank' : 'embedding'
}

/**
 * Whether a chat template can call tools, read from its text before the model is loaded: templates
 * that take tools name `tools`, `tool_calls`, `xml_tools` or (Firefunction) `functions`; those
 * without (Gemma 2, Phi 3.5, SmolLM3, RWKV) name none. llama-server's own check, after loading,
 * decides what a request gets; this one only lets the chat say so before offering tools.
 */
export function templateCallsTools(chatTemplate: string | undefined): boolean {
  return chatTemplate !== undefined && /\btools\b|\btool_calls\b|\bxml_tools\b|\bfunctions\b/.test(chatTemplate)
}

export function capabilitiesOf(kind: ModelKind, hasProjector: boolean, callsTools = false): Capability[] {
  switch (kind) {
    case 'chat':
      return ['chat', ...(hasProjector ? (['vision'] as const) : []), ...(callsTools ? (['tools'] as const) : [])]
    case 'embedding':
      return ['embeddings']
    case 'rerank':
      return ['rerank']
    case 'speech':
      return ['transcription', 'translation']
  }
}

/**
 * Whether a chat template thinks apart: Ollama's test (`<think>` tags), and the other ways
 * llama.cpp's parsers know (reasoning content, gpt-oss's channels, a thinking switch).
 */
export function templateThinks(template: string | undefined): boolean {
  return (
    template !== undefined &&
    ['<think>', 'reasoning_content', 'enable_thinking', '<|channel|>', '<|START_THINKING|>', '[THINK]'].some((mark) => template.includes(mark))
  )
}
