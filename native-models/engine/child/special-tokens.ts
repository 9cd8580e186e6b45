/**
 * How many special tokens llama.cpp wraps around a text when the binding's embedding queue
 * tokenizes it. The binding's `tokenize()` adds none, so what a model really processes is
 * `tokenize(text).length` plus this number.
 *
 * It mirrors llama-vocab.cpp as shipped in @fugood/llama.node 1.7.15, and the binding's own rule in
 * `queueEmbedding`: special tokens are added only when the vocabulary adds a BOS token or the model
 * has an encoder (T5). WordPiece (BERT) then adds [CLS] and [SEP]; the others add BOS and/or EOS as
 * their flags say.
 */

/** BPE pre-tokenizers for which llama.cpp turns `add_bos` on when the GGUF does not say. */
const BPE_PRE_WITH_BOS = new Set([
  'llama3',
  'llama-v3',
  'llama-bpe',
  'falcon3',
  'falcon-h1',
  'pixtral',
  'midm-2.0',
  'lfm2',
  'jina-v5-nano',
  'tekken',
  'chameleon',
])

const ENCODER_ARCHITECTURES = new Set(['t5', 't5encoder'])

/** Whether llama.cpp puts a BOS token in front of a prompt it tokenizes for generation. */
export function addsBosToken(metadata: Record<string, string>): boolean {
  const defaults = defaultFlags(metadata['tokenizer.ggml.model'], metadata['tokenizer.ggml.pre'])
  return flag(metadata['tokenizer.ggml.add_bos_token']) ?? defaults.bos
}

/** `metadata` as the binding's getModelInfo() reports it: every value a string. */
export function specialTokensAdded(metadata: Record<string, string>): number {
  const tokenizer = metadata['tokenizer.ggml.model']
  const defaults = defaultFlags(tokenizer, metadata['tokenizer.ggml.pre'])
  const addBos = addsBosToken(metadata)
  const addEos = flag(metadata['tokenizer.ggml.add_eos_token']) ?? defaults.eos
  const hasEncoder = ENCODER_ARCHITECTURES.has(metadata['general.architecture'] ?? '')
  if (!addBos && !hasEncoder) return 0
  // WordPiece adds its [CLS] and [SEP] whatever the flags say.
  if (tokenizer === 'bert') return 2
  return (addBos ? 1 : 0) + (addEos ? 1 : 0)
}

function defaultFlags(tokenizer: string | undefined, pre: string | undefined): { bos: boolean; eos: boolean } {
  switch (tokenizer) {
    case 'bert':
    case 'llama':
      return { bos: true, eos: false }
    case 't5':
      return { bos: false, eos: true }
    case 'gpt2':
      return { bos: BPE_PRE_WITH_BOS.has(pre ?? ''), eos: false }
    default:
      return { bos: false, eos: false }
  }
}

function flag(value: string | undefined): boolean | undefined {
  if (value === undefined) return undefined
  return value === 'true' || value === '1'
}
