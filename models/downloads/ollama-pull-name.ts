/**
 * What a name given to `ollama pull` (or `POST /api/pull`) stands for, read as Ollama's
 * types/model/name.go reads it (ParseName): `qwen3:0.6b` is `registry.ollama.ai/library/qwen3:0.6b`,
 * `user/model:tag` is in the user's namespace on Ollama's registry, and `host[:port]/namespace/
 * model[:tag]` is on that registry; the tag is `latest` where none is given. Three kinds:
 * - `registry`: a model in a registry that speaks Ollama's protocol (ollama-registry.ts pulls it);
 * - `huggingface`: `hf.co/<owner>/<repo>[:<quantization>]`, a GGUF repository on Hugging Face,
 *   which the existing pull path resolves to files (main/server/ollama/ollama-pull.ts);
 * - `reference`: Hearth's own references (`hf://…`, an https URL of a `.gguf` or `.bin` file).
 */
import {
  displayOllamaName,
  OLLAMA_DEFAULT_HOST,
  OLLAMA_DEFAULT_NAMESPACE,
  OLLAMA_DEFAULT_TAG,
  OLLAMA_NAME_PARTS,
  type OllamaName,
} from '../sources/ollama-names.ts'
import { DownloadError } from './download-error.ts'

export type PullName =
  | {
      kind: 'registry'
      /** Every part, the defaults filled in. */
      name: OllamaName
      /** As `ollama list` shows it: `qwen3:0.6b`, `user/model:tag`, `host:port/namespace/model:tag`. */
      shortName: string
      /** `<namespace>/<model>`: the repository in the registry's /v2/ paths. */
      repository: string
      /** The scheme the name was written with (`http://host/…`), if any. */
      scheme: 'http' | 'https' | undefined
    }
  | { kind: 'huggingface'; name: string; owner: string; repo: string; tag: string | undefined }
  | { kind: 'reference'; reference: string }

const HUB_HOSTS = new Set(['hf.co', 'huggingface.co'])
const FILE_URL = /\.(gguf|bin)(\?.*)?$/i

/**
 * Reads a pull name; throws DownloadError('invalid_value', …, param) naming the name and the part
 * that is wrong. `param` is the request field the name came in (`model` for /api/pull).
 */
export function parsePullName(text: unknown, param = 'model'): PullName {
  if (typeof text !== 'string' || text.trim() === '') throw invalid(String(text ?? ''), 'a model name is needed, e.g. qwen3:0.6b', param)
  const written = text.trim()
  if (/^hf:\/\//i.test(written)) return { kind: 'reference', reference: written }
  const schemeMatch = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(written)
  const scheme = schemeMatch?.[1]!.toLowerCase()
  if (scheme !== undefined && scheme !== 'http' && scheme !== 'https') throw invalid(written, `the scheme "${schemeMatch![1]}" is not http or https`, param)
  const rest = schemeMatch ? written.slice(schemeMatch[0].length) : written
  // An https URL of a file is a download of that file, as `POST /api/models/pull` takes it.
  if (scheme !== undefined && (FILE_URL.test(rest) || rest.split('/').length > 3)) return { kind: 'reference', reference: written }

  let body = rest
  let tag: string | undefined
  // "/" cannot be in a tag, so a ":" after the last "/" starts it ("host:port/x" has none).
  if (body.lastIndexOf(':') > body.lastIndexOf('/')) {
    tag = body.slice(body.lastIndexOf(':') + 1)
    body = body.slice(0, body.lastIndexOf(':'))
    if (tag === '') throw invalid(written, 'the tag after ":" is empty', param)
  }
  const parts = body.split('/')
  if (parts.length > 3) throw invalid(written, 'a name has at most three parts before its tag: host/namespace/model', param)
  if (parts.some((p) => p === '')) throw invalid(written, 'a part between "/" is empty', param)
  const [model, namespace, host] = [...parts].reverse() as [string, string | undefined, string | undefined]

  if (host === undefined && namespace !== undefined && HUB_HOSTS.has(namespace.toLowerCase())) {
    throw invalid(written, 'a Hugging Face name is hf.co/<owner>/<repo>[:<quantization>]', param)
  }
  if (host !== undefined && HUB_HOSTS.has(host.toLowerCase())) {
    if (namespace === undefined) throw invalid(written, 'a Hugging Face name is hf.co/<owner>/<repo>[:<quantization>]', param)
    return { kind: 'huggingface', name: written, owner: namespace, repo: model, tag }
  }
  const name: OllamaName = {
    host: host ?? OLLAMA_DEFAULT_HOST,
    namespace: namespace ?? OLLAMA_DEFAULT_NAMESPACE,
    model,
    tag: tag ?? OLLAMA_DEFAULT_TAG,
  }
  for (const part of ['host', 'namespace', 'model', 'tag'] as const) {
    const rule = OLLAMA_NAME_PARTS[part]
    if (!rule.pattern.test(name[part])) throw invalid(written, `the ${part} "${name[part]}" may hold only ${rule.rule}`, param)
  }
  return {
    kind: 'registry',
    name,
    shortName: displayOllamaName(name),
    repository: `${name.namespace}/${name.model}`,
    scheme: scheme as 'http' | 'https' | undefined,
  }
}

/** The registry's base URL: https, or plain http where the caller allows it (`ollama pull --insecure`). */
export function registryBaseUrl(name: OllamaName, insecure: boolean): string {
  return `${insecure ? 'http' : 'https'}://${name.host}`
}

function invalid(name: string, why: string, param: string): DownloadError {
  return new DownloadError('invalid_value', `invalid model name "${name}": ${why}`, param)
}
