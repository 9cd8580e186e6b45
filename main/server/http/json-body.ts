import express, { type Request, type RequestHandler } from 'express'
import { invalidRequest } from '../services/api-error.ts'

/**
 * Parses JSON bodies (any JSON media type) up to the limit; odd bodies become clear 400/413s.
 * The common case, a UTF-8 body of a stated length within the limit, is read here directly:
 * body-parser's general path (charsets, compression, chunked bodies) costs every request a few
 * tenths of a millisecond before its first token. Everything else still goes through it, and
 * both fail the same way (the same error types, mapped in http-errors.ts).
 */
export function jsonBodyParser(limitBytes: number, { anyContentType = false } = {}): RequestHandler {
  // Ollama's clients (and the curl lines in its docs) send JSON under any content type, or none.
  const general = express.json({ limit: limitBytes, type: anyContentType ? () => true : JSON_TYPES, reviver: wellFormedStrings })
  const read: RequestHandler = (req, res, next) => {
    const length = Number(req.headers['content-length'])
    if (!isPlainJson(req, anyContentType) || !(length <= limitBytes)) return general(req, res, next)
    readBody(req)
      .then(parseJson)
      .then((body) => {
        req.body = body
        next()
      }, next)
  }
  return (req, res, next) =>
    read(req, res, (e?: unknown) => {
      if (e === undefined && nestedDeeperThan(req.body, MAX_DEPTH)) {
        return next(invalidRequest(`The request body is nested deeper than ${MAX_DEPTH} levels`, null, 'invalid_json'))
      }
      next(e)
    })
}

/**
 * Objects and arrays inside each other this deep are no request anyone means to send, and the
 * code that walks a body (validation, schemas, the engine's grammar) recurses.
 */
const MAX_DEPTH = 128

/** Whether objects and arrays sit more than `limit` levels deep; a walk with its own stack, no recursion. */
function nestedDeeperThan(value: unknown, limit: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]]
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!
    if (typeof node !== 'object' || node === null) continue
    if (depth > limit) return true
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (typeof child === 'object' && child !== null) stack.push([child, depth + 1])
    }
  }
  return false
}

const JSON_TYPES = ['application/json', 'application/*+json']

/** JSON in UTF-8, uncompressed, with its length stated. */
function isPlainJson(req: Request, anyContentType: boolean): boolean {
  const encoding = req.headers['content-encoding']
  if (encoding !== undefined && encoding.toLowerCase() !== 'identity') return false
  if (req.headers['transfer-encoding'] !== undefined || req.headers['content-length'] === undefined) return false
  const type = req.headers['content-type']?.toLowerCase() ?? ''
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/.exec(type)?.[1]
  return (charset === undefined || charset === 'utf-8') && (anyContentType || req.is(JSON_TYPES) !== false)
}

function readBody(req: Request): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    // Decoded as body-parser decodes: a byte order mark dropped, bad bytes as U+FFFD.
    req.once('end', () => resolve(new TextDecoder().decode(Buffer.concat(chunks))))
    const aborted = () => reject(Object.assign(new Error('request aborted'), { type: 'request.aborted', status: 400 }))
    req.once('close', () => req.complete || aborted())
    req.once('error', aborted)
  })
}

/** As body-parser's strict mode: an object or an array; an empty body is `{}`. */
function parseJson(text: string): unknown {
  if (text.length === 0) return {}
  const first = /^[\x20\x09\x0a\x0d]*(.)/.exec(text)?.[1]
  const fail = () => Object.assign(new SyntaxError('The request body is not valid JSON'), { type: 'entity.parse.failed', status: 400 })
  if (first !== '{' && first !== '[') throw fail()
  try {
    // A lone surrogate can only arrive as a \u escape; without one, no string needs mending.
    return /\\u[dD][89a-fA-F]/.test(text) ? JSON.parse(text, wellFormedStrings) : JSON.parse(text)
  } catch {
    throw fail()
  }
}

/**
 * `"\ud800"` is valid JSON but no valid text: a lone UTF-16 surrogate. Native code that reads the
 * string as JSON or UTF-8 may reject it (llama.cpp's chat templating aborted the engine process
 * on one), so every such code unit becomes U+FFFD, as a UTF-8 decoder would make it.
 */
function wellFormedStrings(_key: string, value: unknown): unknown {
  if (typeof value !== 'string') return value
  const s = value as string & { isWellFormed(): boolean; toWellFormed(): string }
  return s.isWellFormed() ? value : s.toWellFormed()
}

/** For routes that only take JSON: anything else is refused before it is looked at. */
export const requireJsonBody: RequestHandler = (req, _res, next) => {
  if (!req.is(['application/json', 'application/*+json'])) {
    throw invalidRequest(
      `This endpoint takes a JSON body: send 'Content-Type: application/json' (got ${req.headers['content-type'] ? `'${req.headers['content-type']}'` : 'no content type'})`,
      null,
      'invalid_content_type',
    )
  }
  next()
}
