/** Turns a failed zod parse into the 400 the contract asks for, naming the offending field. */
import type { z } from 'zod'
import { ApiError, invalidRequest } from '../api-error.ts'

/** `['messages', 0, 'content', 1, 'image_url', 'url']` → `messages[0].content[1].image_url.url` */
export function paramPath(path: ReadonlyArray<PropertyKey>): string {
  let out = ''
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`
    else out += out ? `.${String(part)}` : String(part)
  }
  return out
}

export function parseOrThrow<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  if (body === undefined || body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw invalidRequest('The request body must be a JSON object', null, 'invalid_json')
  }
  const parsed = schema.safeParse(body)
  if (parsed.success) return parsed.data
  throw zodToApiError(parsed.error, body)
}

function zodToApiError(error: z.ZodError, body: unknown): ApiError {
  const issue = pickIssue(error.issues)
  const param = paramPath(issue.path)
  // A field that is not there at all (a union's issue does not say "received undefined").
  const missing = (issue.code === 'invalid_type' && /received undefined/.test(issue.message)) || (issue.path.length > 0 && isAbsent(body, issue.path))
  if (missing) return invalidRequest(`Missing required parameter: '${param}'`, param, 'missing_required_parameter')
  return invalidRequest(`Invalid value for '${param || 'body'}': ${describe(issue)}`, param || null)
}

/** In a union every branch fails; the issue from the branch that got furthest is the useful one. */
function pickIssue(issues: z.core.$ZodIssue[]): z.core.$ZodIssue {
  const first = issues[0]!
  if (first.code === 'invalid_union' && first.errors.length > 0) {
    const deepest = first.errors
      .map((branch) => branch.map((i) => ({ ...i, path: [...first.path, ...i.path] })))
      .flat()
      .sort((a, b) => b.path.length - a.path.length)[0]
    if (deepest && deepest.path.length > first.path.length) return pickIssue([deepest])
  }
  return first
}

function describe(issue: z.core.$ZodIssue): string {
  return issue.message.replace(/^Invalid input: /, '')
}

/** Whether the field at `path` is simply not there (its parent is an object without it). */
function isAbsent(body: unknown, path: ReadonlyArray<PropertyKey>): boolean {
  let here = body
  for (const key of path) {
    // A parent that is not an object (a string sent for an object, say) is a wrong value, not a missing one.
    if (here === null || typeof here !== 'object') return false
    here = (here as Record<PropertyKey, unknown>)[key]
  }
  return here === undefined
}
