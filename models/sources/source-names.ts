/** The stores in words, for problems and refusals: where a model lies, and how its owner removes it. */
import type { ModelSource, ModelSourceKind } from '../catalog/model-record.ts'

/** Where the models Hearth pulled by name live, in its models folder (see models/downloads/ollama-pull.ts). */
export const PULLED_SOURCE_NAME = 'the models Hearth pulled from a registry'

const NAMES: Record<ModelSourceKind, string> = {
  ollama: "Ollama's store",
  lmstudio: "LM Studio's models folder",
  huggingface: 'the Hugging Face cache',
  'llama.cpp': "llama.cpp's download cache",
}

export function sourceName(source: ModelSourceKind | ModelSource): string {
  if (typeof source === 'string') return NAMES[source]
  return source.pulled ? PULLED_SOURCE_NAME : NAMES[source.kind]
}

/** Why Hearth will not delete a model of another program's store, and what does. */
export function readOnlyRefusal(id: string, source: ModelSource, file: string): string {
  const where = `${id} is in ${sourceName(source)} (${source.dir}), which Hearth only reads`
  switch (source.kind) {
    case 'ollama':
      return `${where}: remove it with \`ollama rm ${id}\``
    case 'lmstudio':
      return `${where}: remove it in LM Studio (My Models), or delete ${file} yourself`
    case 'huggingface':
      return `${where}: remove its repository with \`huggingface-cli delete-cache\`, which keeps the cache consistent`
    case 'llama.cpp':
      return `${where}: delete ${file} yourself`
  }
}
