/**
 * Ollama's model names, as its types/model/name.go parses and shows them. A full name is
 * `host/namespace/model:tag`; a part left out takes its default (`registry.ollama.ai`, `library`,
 * `latest`), so `llama3.2` is `registry.ollama.ai/library/llama3.2:latest`. Names are shown in their
 * shortest form: `llama3.2:latest`, `user/model:tag`, `other.host/namespace/model:tag` (the tag is
 * always shown). Hearth serves each model of Ollama's store under that short form.
 */

export const OLLAMA_DEFAULT_HOST = 'registry.ollama.ai'
export const OLLAMA_DEFAULT_NAMESPACE = 'library'
export const OLLAMA_DEFAULT_TAG = 'latest'

export interface OllamaName {
  host: string
  namespace: string
  model: string
  tag: string
}

/** A name as a client writes it, with the defaults for the parts it leaves out (Ollama's ParseName). */
export function parseOllamaName(text: string): OllamaName | undefined {
  let rest = text.trim()
  let tag = ''
  // "/" cannot be in a tag, so a ":" after the last "/" starts the tag ("host:port/x" has none).
  if (rest.lastIndexOf(':') > rest.lastIndexOf('/')) {
    tag = rest.slice(rest.lastIndexOf(':') + 1)
    rest = rest.slice(0, rest.lastIndexOf(':'))
  }
  const parts = rest.split('/')
  if (parts.length > 3) {
    // Only a scheme ("https://host/ns/model") may add slashes, and it is dropped.
    const scheme = /^[a-z][a-z0-9+.-]*:$/i.test(parts[0]!) && parts[1] === ''
    if (!scheme) return undefined
    parts.splice(0, 2)
    if (parts.length > 3) return undefined
  }
  const [model, namespace, host] = parts.reverse() as [string, string?, string?]
  const name: OllamaName = {
    host: host ?? OLLAMA_DEFAULT_HOST,
    namespace: namespace ?? OLLAMA_DEFAULT_NAMESPACE,
    model,
    tag: tag || OLLAMA_DEFAULT_TAG,
  }
  return isValidOllamaName(name) ? name : undefined
}

/** The name of a manifest at `manifests/<host>/<namespace>/<model>/<tag>`, when every part is valid. */
export function ollamaNameFromManifestPath(parts: readonly string[]): OllamaName | undefined {
  if (parts.length !== 4) return undefined
  const [host, namespace, model, tag] = parts as [string, string, string, string]
  const name = { host, namespace, model, tag }
  return isValidOllamaName(name) ? name : undefined
}

/** The shortest form, as `ollama list` shows it (DisplayShortest). */
export function displayOllamaName(name: OllamaName): string {
  const prefix =
    name.host.toLowerCase() !== OLLAMA_DEFAULT_HOST
      ? `${name.host}/${name.namespace}/`
      : name.namespace.toLowerCase() !== OLLAMA_DEFAULT_NAMESPACE
        ? `${name.namespace}/`
        : ''
  return `${prefix}${name.model}:${name.tag}`
}

/**
 * The ids a requested name may be served under, to try in order: the name as written first (an id
 * of Hearth's own folder, or an Ollama name given in full short form), then the Ollama model it
 * means once the defaults are filled in, so `llama3.2` and `registry.ollama.ai/library/llama3.2`
 * both find `llama3.2:latest`.
 */
export function ollamaNameCandidates(requested: string): string[] {
  const written = requested.trim()
  const parsed = parseOllamaName(written)
  return [...new Set(parsed ? [written, displayOllamaName(parsed)] : [written])]
}

/**
 * Ollama's rules per part (isValidPart): letters, digits and `_` first; then also `-`, and `.`
 * except in a namespace; `:` in a host only (its port). Each with its rule in words, for errors.
 */
export const OLLAMA_NAME_PARTS: Record<keyof OllamaName, { pattern: RegExp; rule: string }> = {
  host: { pattern: /^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,349}$/, rule: 'letters, digits, _ . - and : (at most 350), starting with a letter, digit or _' },
  namespace: { pattern: /^[A-Za-z0-9_][A-Za-z0-9_-]{0,79}$/, rule: 'letters, digits, _ and - (at most 80), starting with a letter, digit or _' },
  model: { pattern: /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}$/, rule: 'letters, digits, _ . and - (at most 80), starting with a letter, digit or _' },
  tag: { pattern: /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,79}$/, rule: 'letters, digits, _ . and - (at most 80), starting with a letter, digit or _' },
}

function isValidOllamaName(name: OllamaName): boolean {
  return (Object.keys(OLLAMA_NAME_PARTS) as Array<keyof OllamaName>).every((part) => OLLAMA_NAME_PARTS[part].pattern.test(name[part]))
}
