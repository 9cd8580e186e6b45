/**
 * What the Models page's download field holds, said back in words before it is sent: an Ollama
 * name (from Ollama's library, or from the registry the name carries), a file on Hugging Face or at
 * a URL. The server decides and explains a name it refuses (models/downloads/ollama-pull-name.ts
 * reads names as Ollama does); this only words the input, and says whether `insecure` (plain http)
 * can apply: to a name that carries its registry's host.
 */

const OLLAMA_LIBRARY = 'registry.ollama.ai'
const HUB_HOSTS = new Set(['hf.co', 'huggingface.co'])
const FILE_URL = /\.(gguf|bin)(\?.*)?$/i

export interface PullSourceInfo {
  /** `name`: pulled from a registry; `file`: downloaded as it is; `repository`: an hf.co name, whose file must be named. */
  kind: 'name' | 'file' | 'repository'
  /** In words: "qwen3:latest from Ollama's library", "a file on Hugging Face". */
  description: string
  /** The registry host a name carries (undefined for Ollama's library): plain http may be allowed for it. */
  host: string | undefined
}

export function describePullSource(text: string): PullSourceInfo | undefined {
  const written = text.trim()
  if (written === '') return undefined
  if (/^hf:\/\//i.test(written)) return { kind: 'file', description: 'a file on Hugging Face', host: undefined }
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(written)
  if (scheme && !/^https?$/i.test(scheme[1]!)) return undefined
  const rest = scheme ? written.slice(scheme[0].length) : written
  if (scheme && (FILE_URL.test(rest) || rest.split('/').length > 3)) {
    const host = rest.split('/')[0]!
    return { kind: 'file', description: HUB_HOSTS.has(host.toLowerCase()) ? 'a file on Hugging Face' : `a file from ${host}`, host: undefined }
  }

  let body = rest
  let tag = 'latest'
  if (body.lastIndexOf(':') > body.lastIndexOf('/')) {
    tag = body.slice(body.lastIndexOf(':') + 1)
    body = body.slice(0, body.lastIndexOf(':'))
  }
  const parts = body.split('/')
  if (parts.length > 3 || parts.some((p) => p === '') || tag === '') return undefined
  const [model, namespace, host] = [...parts].reverse() as [string, string | undefined, string | undefined]
  const hubHost = host ?? (namespace !== undefined && HUB_HOSTS.has(namespace.toLowerCase()) ? namespace : undefined)
  if (hubHost !== undefined && HUB_HOSTS.has(hubHost.toLowerCase())) {
    return { kind: 'repository', description: 'a Hugging Face repository: name its GGUF file, hf://owner/repo/file.gguf', host: undefined }
  }
  if (host !== undefined && host !== OLLAMA_LIBRARY) {
    return { kind: 'name', description: `${host}/${namespace}/${model}:${tag} from registry ${host}`, host }
  }
  const short = namespace === undefined || namespace === 'library' ? `${model}:${tag}` : `${namespace}/${model}:${tag}`
  return { kind: 'name', description: `${short} from Ollama's library`, host: undefined }
}
