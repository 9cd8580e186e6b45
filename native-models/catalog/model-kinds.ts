export type ModelKind = 'chat' | 'embedding' | 'rerank' | 'speech'
export type Capability = 'chat' | 'vision' | 'embeddings' | 'rerank' | 'transcription' | 'translation'

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

export function capabilitiesOf(kind: ModelKind, hasProjector: boolean): Capability[] {
  switch (kind) {
    case 'chat':
      return hasProjector ? ['chat', 'vision'] : ['chat']
    case 'embedding':
      return ['embeddings']
    case 'rerank':
      return ['rerank']
    case 'speech':
      return ['transcription', 'translation']
  }
}
