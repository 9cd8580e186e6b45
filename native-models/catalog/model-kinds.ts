export type ModelKind = 'chat' | 'embedding' | 'speech'
export type Capability = 'chat' | 'vision' | 'embeddings' | 'translation'

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

export function kindFromArchitecture(architecture: string | undefined): ModelKind {
  return architecture && EMBEDDING_ARCHITECTURES.has(architecture) ? 'embedding' : 'chat'
}

export function capabilitiesOf(kind: ModelKind, hasProjector: boolean): Capability[] {
  switch (kind) {
    case 'chat':
      return hasProjector ? ['chat', 'vision'] : ['chat']
    case 'embedding':
      return ['embeddings']
    case 'speech':
      return ['translation']
  }
}
