/**
 * The last few hundred API requests, kept in memory for the Server page's live log. Nothing is
 * written to disk: the history is for watching what tools are doing right now, not for auditing.
 */

/** One finished request, in the wire shape GET /api/requests returns. */
export interface RequestRecord {
  id: string
  /** ISO time the request arrived. */
  time: string
  method: string
  path: string
  model: string | null
  /**
   * HTTP status sent; 499 when the client went away before the answer finished; a stream that began
   * as a 200 and was cut by an error (the time limit) has that error's status, and `cut`.
   */
  status: number
  cut?: true
  duration_ms: number
  code: string | null
  /** Chat requests: the prompt's tokens, and how many of them came from the engine's cache. */
  prompt_tokens?: number
  cached_tokens?: number
  /** What the request asked for that was set aside (the answer's `Warning` header). */
  notices?: string[]
  /** MCP tools the request ran, as "server/tool" (several comma-separated). */
  tool?: string
}

export type RequestListener = (record: RequestRecord) => void

export class RequestHistory {
  private readonly records: RequestRecord[] = []
  private readonly listeners = new Set<RequestListener>()

  constructor(private readonly capacity = 200) {}

  add(record: RequestRecord): void {
    this.records.push(record)
    if (this.records.length > this.capacity) this.records.splice(0, this.records.length - this.capacity)
    for (const listener of this.listeners) listener(record)
  }

  /** Oldest first. */
  list(): RequestRecord[] {
    return [...this.records]
  }

  /** Returns the function that stops listening. */
  subscribe(listener: RequestListener): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /**
   * API calls only: not the UI's files, not CORS preflights, and not the log's own stream, which
   * would only echo the watcher back.
   */
  static records(method: string, path: string): boolean {
    return method !== 'OPTIONS' && (path.startsWith('/v1/') || path.startsWith('/api/')) && !path.startsWith('/api/requests')
  }
}
