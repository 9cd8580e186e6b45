/**
 * What to pull instead of an Ollama model that llama.cpp cannot load. Ollama's own engine writes
 * some models as one GGUF holding the text model and its vision (or audio) tower, or in
 * architectures upstream llama.cpp lacks; llama.cpp runs the same models from GGUFs that keep the
 * projector apart. The repositories here are the ones llama.cpp's own documentation names for them
 * (docs/multimodal.md and the server's docs at the pinned commit): each has the model's GGUFs (and
 * its mmproj, for a vision model), which `hf.co/<repo>:<quantization>` pulls together. A model is
 * refused by what its own files say (ollama-store.ts, llama-loadability.ts), never by this table,
 * which only says what to pull instead.
 */

interface Alternative {
  /** The Ollama library model (`gemma3`), and the sizes its tags name (`4b`). */
  model: string
  sizes: Record<string, string>
}

const ALTERNATIVES: Alternative[] = [
  { model: 'gemma3', sizes: { '4b': 'ggml-org/gemma-3-4b-it-GGUF', '12b': 'ggml-org/gemma-3-12b-it-GGUF', '27b': 'ggml-org/gemma-3-27b-it-GGUF' } },
  {
    model: 'qwen2.5vl',
    sizes: {
      '3b': 'ggml-org/Qwen2.5-VL-3B-Instruct-GGUF',
      '7b': 'ggml-org/Qwen2.5-VL-7B-Instruct-GGUF',
      '32b': 'ggml-org/Qwen2.5-VL-32B-Instruct-GGUF',
      '72b': 'ggml-org/Qwen2.5-VL-72B-Instruct-GGUF',
    },
  },
  { model: 'mistral-small3.1', sizes: { '24b': 'ggml-org/Mistral-Small-3.1-24B-Instruct-2503-GGUF' } },
  { model: 'llama4', sizes: { scout: 'ggml-org/Llama-4-Scout-17B-16E-Instruct-GGUF', '16x17b': 'ggml-org/Llama-4-Scout-17B-16E-Instruct-GGUF' } },
  { model: 'gpt-oss', sizes: { '20b': 'ggml-org/gpt-oss-20b-GGUF', '120b': 'ggml-org/gpt-oss-120b-GGUF' } },
  {
    model: 'gemma4',
    sizes: {
      e2b: 'ggml-org/gemma-4-E2B-it-GGUF',
      e4b: 'ggml-org/gemma-4-E4B-it-GGUF',
      '26b': 'ggml-org/gemma-4-26B-A4B-it-GGUF',
      '31b': 'ggml-org/gemma-4-31B-it-GGUF',
    },
  },
]

/** The default size where a tag names none (`gemma3` is `gemma3:4b` in Ollama's library). */
const DEFAULT_SIZE: Record<string, string> = { gemma3: '4b', 'qwen2.5vl': '7b', 'mistral-small3.1': '24b', llama4: 'scout', gemma4: 'e4b', 'gpt-oss': '20b' }

/**
 * An `hf.co/…` name for the same model in llama.cpp's layout, where one is known; else what to look
 * for. `model` and `tag` are the Ollama name's (`gemma3`, `4b-it-qat`).
 */
export function hfAlternative(model: string, tag: string): string {
  const known = ALTERNATIVES.find((a) => a.model === model.toLowerCase())
  if (known) {
    const size =
      Object.keys(known.sizes).find((s) => tag.toLowerCase() === s || tag.toLowerCase().startsWith(`${s}-`)) ??
      (tag === 'latest' ? DEFAULT_SIZE[known.model] : undefined)
    const repo = size ? known.sizes[size] : undefined
    if (repo) return `pull hf.co/${repo}:Q4_K_M instead (the same model as llama.cpp loads it, with its projector)`
    return `pull one of ${[...new Set(Object.values(known.sizes))].map((r) => `hf.co/${r}:Q4_K_M`).join(', ')} instead (the same model as llama.cpp loads it)`
  }
  return `pull a GGUF of the same model from Hugging Face instead: hf.co/<user>/<repo>:<quantization> (a repository whose GGUFs keep the projector apart, as ggml-org's and unsloth's do)`
}
