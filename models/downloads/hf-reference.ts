/**
 * Where a model comes from: `hf://owner/repo[@revision]/path/file.gguf` (a Hugging Face file) or a
 * plain https URL. Parsing also decides the local file name, so nothing a request says can name a
 * path outside the models folder.
 */
import { DownloadError } from './download-error.ts'

export const DEFAULT_HUB_ENDPOINT = 'https://huggingface.co'

export interface ModelSource {
  /** The reference in its canonical form (hf:// kept as hf://), as downloads and the catalog show it. */
  source: string
  url: string
  /** The file's name in the models folder: the URL's last segment, sanitised. */
  fileName: string
  /** Set when the file lives on the hub: its headers then carry the sha256 and the size. */
  hub: { repo: string; revision: string; path: string } | undefined
}

const NAME_PART = /^[A-Za-z0-9][A-Za-z0-9._-]*$/
const REVISION = /^[A-Za-z0-9][A-Za-z0-9._%-]*$/
const MODEL_FILE = /^[A-Za-z0-9+-][^/]*\.(gguf|bin)$/i

/** The hub's base URL: `HEARTH_HF_ENDPOINT` (like huggingface_hub's `HF_ENDPOINT`), else huggingface.co. */
export function hubEndpointFromEnv(env: NodeJS.ProcessEnv = process.env): string {
  return (env.HEARTH_HF_ENDPOINT || env.HF_ENDPOINT || DEFAULT_HUB_ENDPOINT).replace(/\/+$/, '')
}

/**
 * Parses a reference; throws DownloadError('invalid_value', …, param) when it is not one we take.
 * `param` is the request field the reference came from (`source` or `mmproj`).
 */
export function parseModelSource(input: unknown, param: string, hubEndpoint = DEFAULT_HUB_ENDPOINT): ModelSource {
  const bad = (why: string) => new DownloadError('invalid_value', `Invalid value for '${param}': ${why}`, param)
  if (typeof input !== 'string' || input.trim() === '') throw bad('expected hf://owner/repo/file.gguf or an https URL')
  const text = input.trim()
  if (/^hf:\/\//i.test(text)) return parseHubReference(text.slice(5), hubEndpoint, bad)

  let url: URL
  try {
    url = new URL(text)
  } catch {
    throw bad('expected hf://owner/repo/file.gguf or an https URL')
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopback(url.hostname))) {
    throw bad('only https URLs are downloaded (http only from this computer)')
  }
  if (url.username || url.password) throw bad('URLs with credentials are not accepted')
  url.hash = ''

  const hub = new URL(hubEndpoint)
  if (url.origin === hub.origin) {
    // A link copied from the hub's web page (…/blob/main/x.gguf) names the same file as …/resolve/…
    const m = /^\/([^/]+)\/([^/]+)\/(?:resolve|blob)\/([^/]+)\/(.+)$/.exec(url.pathname)
    if (m) {
      const path = m[4]!.split('/').map(decodeSegment).join('/')
      return parseHubReference(`${m[1]}/${m[2]}@${m[3]}/${path}`, hubEndpoint, bad)
    }
  }
  const segments = url.pathname.split('/')
  const fileName = sanitiseFileName(decodeSegment(segments[segments.length - 1] ?? ''), bad)
  return { source: url.href, url: url.href, fileName, hub: undefined }
}

function parseHubReference(rest: string, hubEndpoint: string, bad: (why: string) => DownloadError): ModelSource {
  const parts = rest.split('/')
  if (parts.length < 3) throw bad('expected hf://owner/repo/path/to/file.gguf')
  const owner = parts[0]!
  const [repo, named] = parts[1]!.split('@', 2) as [string, string | undefined]
  const revision = named ?? 'main'
  const path = parts.slice(2)
  if (!NAME_PART.test(owner) || !NAME_PART.test(repo)) throw bad(`"${owner}/${repo}" is not a Hugging Face repository name`)
  if (!REVISION.test(revision) || decodeSegment(revision).includes('..')) throw bad(`"${revision}" is not a revision`)
  for (const segment of path) {
    if (segment === '' || segment === '.' || segment === '..' || /[\\\x00-\x1f]/.test(segment)) {
      throw bad(`"${path.join('/')}" is not a file path inside the repository`)
    }
  }
  const fileName = sanitiseFileName(path[path.length - 1]!, bad)
  const encodedPath = path.map((s) => encodeURIComponent(s)).join('/')
  const revisionPart = revision === 'main' ? '' : `@${revision}`
  return {
    source: `hf://${owner}/${repo}${revisionPart}/${path.join('/')}`,
    url: `${hubEndpoint}/${owner}/${repo}/resolve/${revision}/${encodedPath}`,
    fileName,
    hub: { repo: `${owner}/${repo}`, revision, path: path.join('/') },
  }
}

/**
 * A name that is safe as a single file in the models folder: no separators, no leading dot (the
 * folder scan skips those), only plain characters, ending in .gguf or .bin.
 */
export function sanitiseFileName(raw: string, bad: (why: string) => Error = (why) => new DownloadError('invalid_value', why)): string {
  const name = raw
    .replace(/[^A-Za-z0-9._+-]/g, '_')
    .replace(/^[._]+/, '')
    .replace(/\.{2,}/g, '.')
  if (!MODEL_FILE.test(name)) throw bad(`the file name "${raw}" must end in .gguf or .bin`)
  if (name.length > 200) throw bad(`the file name "${raw}" is too long`)
  return name
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment)
  } catch {
    return segment
  }
}

function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(hostname)
}
