/**
 * The one HTTP client: every call to the server goes through here, with the key, the base URL and
 * the API's error body turned into an Error whose message a person can read.
 */
import { readSseJson } from './sse.ts'

export interface Connection {
  /** '' when the page is served by the server itself; the embedded server's URL in the desktop app. */
  baseUrl: string
  apiKey: string | undefined
}

export class ApiError extends Error {
  override name = 'ApiError'
  constructor(
    message: string,
    /** 0 when the server could not be reached at all. */
    readonly status: number,
    readonly code: string | null = null,
    readonly param: string | null = null,
  ) {
    super(message)
  }

  /** The endpoint does not exist on this server (an older or newer version). */
  get missingEndpoint(): boolean {
    return this.status === 404 && this.code === 'unknown_url'
  }
}

interface ErrorBody {
  error?: { message?: unknown; code?: unknown; param?: unknown }
}

/** An `{"error": …}` body (or SSE event) as an ApiError; undefined when it is not one. */
export function apiErrorFrom(body: unknown, status: number): ApiError | undefined {
  const error = (body as ErrorBody | null)?.error
  if (!error || typeof error !== 'object') return undefined
  const message = typeof error.message === 'string' && error.message ? error.message : `The server answered ${status}`
  return new ApiError(message, status, typeof error.code === 'string' ? error.code : null, typeof error.param === 'string' ? error.param : null)
}

export interface RequestOptions {
  method?: 'GET' | 'POST' | 'PATCH' | 'DELETE'
  /** A plain object is sent as JSON; FormData as multipart. */
  body?: unknown
  signal?: AbortSignal
  /** What the server set aside or did differently for this request (its `Warning` header), once the answer starts. */
  onNotices?: (notices: string[]) => void
}

/** The texts of the server's `Warning: 299 hearth "…"` notices (request-notices.ts). */
export function noticesOf(headers: Headers): string[] {
  const header = headers.get('warning')
  if (!header) return []
  return [...header.matchAll(/299 hearth "((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!.replace(/\\(.)/g, '$1'))
}

export class ApiClient {
  constructor(
    private readonly connection: () => Connection,
    /** Called on 401, so the app can ask for a key. */
    private readonly onUnauthorized: (error: ApiError) => void = () => undefined,
  ) {}

  url(path: string): string {
    return `${this.connection().baseUrl}${path}`
  }

  /** The response, once its status is 2xx; anything else is thrown as an ApiError. */
  async request(path: string, options: RequestOptions = {}): Promise<Response> {
    const { apiKey } = this.connection()
    const headers: Record<string, string> = {}
    if (apiKey) headers.authorization = `Bearer ${apiKey}`
    let body: BodyInit | undefined
    if (options.body instanceof FormData) body = options.body
    else if (options.body !== undefined) {
      headers['content-type'] = 'application/json'
      body = JSON.stringify(options.body)
    }
    let response: Response
    try {
      response = await fetch(this.url(path), { method: options.method ?? (body ? 'POST' : 'GET'), headers, body, signal: options.signal })
    } catch (e) {
      if ((e as Error).name === 'AbortError') throw e
      throw new ApiError(`Cannot reach the Hearth server${this.connection().baseUrl ? ` at ${this.connection().baseUrl}` : ''}. Is it running?`, 0)
    }
    if (response.ok) return response
    const text = await response.text().catch(() => '')
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      parsed = undefined
    }
    const error = apiErrorFrom(parsed, response.status) ?? new ApiError(`The server answered ${response.status} ${response.statusText}`.trim(), response.status)
    if (response.status === 401) this.onUnauthorized(error)
    throw error
  }

  async json<T>(path: string, options: RequestOptions = {}): Promise<T> {
    const response = await this.request(path, options)
    return (await response.json()) as T
  }

  /**
   * Server-sent events as parsed JSON. An `{"error": …}` event (the API's way of failing after a
   * stream started) is thrown as an ApiError.
   */
  async *events<T>(path: string, options: RequestOptions = {}): AsyncGenerator<T> {
    const response = await this.request(path, options)
    const notices = noticesOf(response.headers)
    if (notices.length) options.onNotices?.(notices)
    if (!response.body) throw new ApiError('The server sent an empty stream', response.status)
    for await (const event of readSseJson<T>(response.body, options.signal)) {
      const error = apiErrorFrom(event, 500)
      if (error) throw error
      yield event
    }
  }
}
