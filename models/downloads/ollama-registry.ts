/**
 * The registry protocol as Ollama's client speaks it (server/images.go, server/download.go,
 * server/auth.go), which is the Docker/OCI distribution protocol: a model is a manifest at
 * `/v2/<namespace>/<model>/manifests/<tag>` (asked for with the Docker schema 2 media type), whose
 * config and layers are blobs at `/v2/<namespace>/<model>/blobs/<digest>`. A registry that wants a
 * token answers 401 with `WWW-Authenticate: Bearer realm=…,service=…,scope=…`; the client fetches one
 * from the realm (anonymously here: Ollama signs that request with its own key, which Hearth has
 * not) and asks again once. A blob is usually a redirect to another host (Ollama's registry sends
 * its blobs from a CDN): same-host redirects are followed, and the first one to another host is
 * where the blob's ranges are fetched from, without the registry's token.
 */
import { DownloadError } from './download-error.ts'
import type { PullName } from './ollama-pull-name.ts'
import { registryBaseUrl } from './ollama-pull-name.ts'

export const MANIFEST_ACCEPT = 'application/vnd.docker.distribution.manifest.v2+json'
export const OLLAMA_MEDIA = 'application/vnd.ollama.image.'
/** Ollama's manifests are a few kilobytes; more is not one. */
const MAX_MANIFEST_BYTES = 4 * 1024 * 1024
const MAX_REDIRECTS = 10
const DIGEST = /^sha256:[0-9a-f]{64}$/

export interface ManifestLayer {
  mediaType: string
  digest: string
  size: number
}

export interface RegistryManifest {
  schemaVersion: number
  mediaType?: string
  config: ManifestLayer | undefined
  layers: ManifestLayer[]
}

export interface FetchedManifest {
  manifest: RegistryManifest
  /** The manifest as the registry sent it: written as it is, so its digest stays the registry's. */
  bytes: Buffer
}

type Registry = Extract<PullName, { kind: 'registry' }>

export interface RegistryClientOptions {
  /** Plain http, as `ollama pull --insecure`; https otherwise. */
  insecure?: boolean
  fetch?: typeof fetch
  /** Time to the answer's headers for manifests, tokens and redirects. */
  requestTimeoutMs?: number
}

export class RegistryClient {
  readonly baseUrl: string
  private token: string | undefined
  private readonly fetch: typeof fetch
  private readonly timeoutMs: number

  constructor(
    readonly name: Registry,
    options: RegistryClientOptions = {},
  ) {
    if (name.scheme === 'http' && !options.insecure) {
      throw new DownloadError('invalid_value', `${name.shortName}: insecure protocol http (pull with insecure to allow plain http)`, 'model')
    }
    this.baseUrl = registryBaseUrl(name.name, options.insecure === true)
    this.fetch = options.fetch ?? fetch
    this.timeoutMs = options.requestTimeoutMs ?? 30_000
  }

  /** GET the manifest; a name the registry lacks is Ollama's "file does not exist". */
  async manifest(signal: AbortSignal): Promise<FetchedManifest> {
    const url = `${this.baseUrl}/v2/${this.name.repository}/manifests/${encodeURIComponent(this.name.name.tag)}`
    const res = await this.request(url, { accept: MANIFEST_ACCEPT }, signal, 'follow', 'pull model manifest')
    const bytes = await readLimited(res, MAX_MANIFEST_BYTES, this.name.shortName)
    return { manifest: parseManifest(bytes, this.name.shortName), bytes }
  }

  /** A small blob (the config), whole, checked against its digest. */
  async smallBlob(layer: ManifestLayer, limit: number, signal: AbortSignal): Promise<Buffer> {
    const { url, headers } = await this.blobLocation(layer.digest, signal)
    const res = await this.timed(url, { headers: { ...headers, 'accept-encoding': 'identity' }, redirect: 'follow' }, signal)
    if (!res.ok) {
      await res.body?.cancel()
      throw new DownloadError('source_unavailable', `${this.name.shortName}: blob ${layer.digest}: the registry answered ${res.status}`, 'model')
    }
    return readLimited(res, limit, this.name.shortName)
  }

  /**
   * Where a blob's bytes are: its registry URL, or the first redirect to another host (a CDN), as
   * Ollama's download finds its "direct URL". The headers go with every request there (the token,
   * only to the registry's own host).
   */
  async blobLocation(digest: string, signal: AbortSignal): Promise<{ url: string; headers: Record<string, string> }> {
    let url = `${this.baseUrl}/v2/${this.name.repository}/blobs/${digest}`
    const origin = new URL(url)
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      const res = await this.request(url, { range: 'bytes=0-0' }, signal, 'manual', `blob ${digest}`)
      await res.body?.cancel()
      const location = res.headers.get('location')
      if (res.status >= 300 && res.status < 400 && location) {
        const next = new URL(location, url)
        if (next.hostname !== origin.hostname) return { url: next.href, headers: {} }
        url = next.href
        continue
      }
      return { url, headers: this.authHeaders() }
    }
    throw new DownloadError('network', `${this.name.shortName}: blob ${digest}: more than ${MAX_REDIRECTS} redirects`, 'model')
  }

  /** A request to the registry with its token, asking for one when it answers 401 (once, as Ollama). */
  private async request(url: string, headers: Record<string, string>, signal: AbortSignal, redirect: RequestRedirect, what: string): Promise<Response> {
    for (let attempt = 0; attempt < 2; attempt++) {
      const res = await this.timed(url, { headers: { ...headers, ...this.authHeaders() }, redirect }, signal)
      if (res.status === 401 && attempt === 0) {
        await res.body?.cancel()
        this.token = await this.fetchToken(res.headers.get('www-authenticate'), signal)
        continue
      }
      if (res.status === 404) {
        await res.body?.cancel()
        // Ollama's makeRequestWithRetry turns a 404 into os.ErrNotExist, which reads so.
        throw new DownloadError('not_found', `${what}: file does not exist (${this.name.shortName} is not in ${new URL(url).host})`, 'model')
      }
      if (res.status === 401 || res.status === 403) {
        await res.body?.cancel()
        throw new DownloadError('source_unavailable', `${this.name.shortName}: unauthorized: access denied (HTTP ${res.status})`, 'model')
      }
      if (res.status >= 400) {
        const body = (await res.text().catch(() => '')).slice(0, 300)
        const code = res.status >= 500 || res.status === 429 ? 'network' : 'source_unavailable'
        throw new DownloadError(code, `${this.name.shortName}: the registry answered ${res.status}${body ? `: ${body.trim()}` : ''}`, 'model')
      }
      return res
    }
    throw new DownloadError('source_unavailable', `${this.name.shortName}: unauthorized: access denied`, 'model')
  }

  private authHeaders(): Record<string, string> {
    return this.token ? { authorization: `Bearer ${this.token}` } : {}
  }

  /** The token the challenge's realm gives an anonymous client for this scope. */
  private async fetchToken(challenge: string | null, signal: AbortSignal): Promise<string> {
    const fields = parseChallenge(challenge)
    if (!fields.realm)
      throw new DownloadError('source_unavailable', `${this.name.shortName}: unauthorized: the registry asks for credentials without a token realm`, 'model')
    let realm: URL
    try {
      realm = new URL(fields.realm)
    } catch {
      throw new DownloadError('source_unavailable', `${this.name.shortName}: unauthorized: the token realm "${fields.realm}" is not a URL`, 'model')
    }
    if (realm.protocol !== 'https:' && !(realm.protocol === 'http:' && this.baseUrl.startsWith('http:'))) {
      throw new DownloadError('source_unavailable', `${this.name.shortName}: the token realm ${realm.origin} is not https`, 'model')
    }
    if (fields.service) realm.searchParams.append('service', fields.service)
    for (const scope of (fields.scope ?? `repository:${this.name.repository}:pull`).split(' ')) if (scope) realm.searchParams.append('scope', scope)
    const res = await this.timed(realm.href, { headers: {}, redirect: 'follow' }, signal)
    const body = await res.text().catch(() => '')
    if (!res.ok)
      throw new DownloadError(
        'source_unavailable',
        `${this.name.shortName}: unauthorized: the token realm answered ${res.status}${body ? `: ${body.slice(0, 200).trim()}` : ''}`,
        'model',
      )
    let token: unknown
    try {
      const json = JSON.parse(body) as { token?: unknown; access_token?: unknown }
      token = json.token ?? json.access_token
    } catch {
      // below
    }
    if (typeof token !== 'string' || token === '')
      throw new DownloadError('source_unavailable', `${this.name.shortName}: the token realm sent no token`, 'model')
    return token
  }

  private async timed(url: string, init: { headers: Record<string, string>; redirect: RequestRedirect }, signal: AbortSignal): Promise<Response> {
    try {
      return await this.fetch(url, {
        headers: { 'user-agent': 'hearth (ollama registry client)', ...init.headers },
        redirect: init.redirect,
        signal: AbortSignal.any([signal, AbortSignal.timeout(this.timeoutMs)]),
      })
    } catch (e) {
      if (signal.aborted) throw signal.reason ?? e
      throw new DownloadError('network', `${this.name.shortName}: cannot reach ${new URL(url).host} (${describeFetchError(e)})`, 'model')
    }
  }
}

/** `Bearer realm="…",service="…",scope="…"` → its fields (quoted values may hold commas). */
export function parseChallenge(header: string | null): { realm?: string; service?: string; scope?: string } {
  if (!header || !/^bearer\s/i.test(header.trim())) return {}
  const fields: Record<string, string> = {}
  for (const m of header
    .trim()
    .slice(6)
    .matchAll(/([A-Za-z_]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))/g)) {
    fields[m[1]!.toLowerCase()] = m[2] !== undefined ? m[2].replace(/\\(.)/g, '$1') : m[3]!
  }
  return { realm: fields.realm, service: fields.service, scope: fields.scope }
}

/** A manifest as Ollama writes one: schema 2, a config and layers, each with a sha256 digest and a size. */
export function parseManifest(bytes: Buffer, name: string): RegistryManifest {
  let json: unknown
  try {
    json = JSON.parse(bytes.toString('utf8'))
  } catch (e) {
    throw new DownloadError('source_unavailable', `${name}: the registry's manifest is not JSON (${(e as Error).message})`, 'model')
  }
  const bad = (why: string) => new DownloadError('source_unavailable', `${name}: the registry's manifest is not one Ollama can pull: ${why}`, 'model')
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw bad('not a JSON object')
  const m = json as Record<string, unknown>
  if (m.schemaVersion !== 2) throw bad(`schemaVersion ${JSON.stringify(m.schemaVersion)}`)
  if (typeof m.mediaType === 'string' && /manifest\.list|image\.index/.test(m.mediaType)) throw bad(`it is an index of several images (${m.mediaType})`)
  if (!Array.isArray(m.layers)) throw bad('no layers')
  const layer = (value: unknown, where: string): ManifestLayer => {
    const l = value as Record<string, unknown> | null
    if (typeof l !== 'object' || l === null) throw bad(`${where} is not an object`)
    if (typeof l.digest !== 'string' || !DIGEST.test(l.digest)) throw bad(`${where} has no sha256 digest`)
    if (typeof l.size !== 'number' || !Number.isSafeInteger(l.size) || l.size < 0) throw bad(`${where} has no size`)
    return { mediaType: typeof l.mediaType === 'string' ? l.mediaType : '', digest: l.digest, size: l.size }
  }
  const layers = m.layers.map((l, i) => layer(l, `layer ${i}`))
  const configValue = m.config as Record<string, unknown> | undefined
  const config = configValue && typeof configValue.digest === 'string' && configValue.digest !== '' ? layer(configValue, 'its config') : undefined
  return { schemaVersion: 2, ...(typeof m.mediaType === 'string' ? { mediaType: m.mediaType } : {}), config, layers }
}

async function readLimited(res: Response, limit: number, name: string): Promise<Buffer> {
  const chunks: Uint8Array[] = []
  let size = 0
  if (res.body) {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      size += chunk.length
      if (size > limit) {
        await res.body.cancel().catch(() => undefined)
        throw new DownloadError('source_unavailable', `${name}: the registry sent more than ${limit} bytes where a few kilobytes were expected`, 'model')
      }
      chunks.push(chunk)
    }
  }
  return Buffer.concat(chunks)
}

export function describeFetchError(e: unknown): string {
  const cause = (e as { cause?: { code?: string; message?: string } }).cause
  return cause?.code ?? cause?.message ?? (e as Error).message ?? String(e)
}
