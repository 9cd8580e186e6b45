/**
 * Whether llama.cpp, as Hearth builds it, can load a GGUF, read from its header before any engine
 * tries: a file it cannot load is listed with the reason instead of failing each request.
 */
import { LLAMA_ARCHITECTURES } from './llama-architectures.ts'
import type { ModelFileHeader } from './model-file-header.ts'

type GgufHeader = Extract<ModelFileHeader, { format: 'gguf' }>

/** Why llama.cpp cannot load this file as a model, or undefined when it can. */
export function llamaLoadProblem(header: GgufHeader): string | undefined {
  const { architecture, tensorsByPrefix } = header
  if (architecture === 'clip') return 'is a vision projector (mmproj): it pairs with a model and is not served alone'
  // llama.cpp loads exactly the tensors of the text model: a tower inside the file fails the load
  // ("wrong number of tensors"). Ollama's own engine writes such files (gemma3, mistral-small3.1, …).
  const vision = (tensorsByPrefix?.v ?? 0) + (tensorsByPrefix?.mm ?? 0)
  const audio = tensorsByPrefix?.a ?? 0
  if (vision > 0 || audio > 0) {
    const tower = vision > 0 ? 'vision' : 'audio'
    return `holds its ${tower} encoder inside the model file (${vision + audio} tensors), a format of Ollama's own engine that llama.cpp cannot load: llama.cpp needs the text model and its projector (mmproj) as two files`
  }
  if (architecture !== undefined && !LLAMA_ARCHITECTURES.has(architecture)) {
    return `has the architecture "${architecture}", which the llama.cpp Hearth builds cannot load`
  }
  return undefined
}
