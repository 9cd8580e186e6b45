/**
 * One page of an OpenAI-style list (`order`, `limit`, `after`; `first_id`, `last_id`, `has_more`),
 * as `/v1/files` and a stored response's input items answer it. Errors name the query field.
 */
import { invalidRequest } from '../services/api-error.ts'

export interface ListPaging {
  /** What an id names, for the errors: "file", "input item"; and how `after` is described: "a file id". */
  noun: string
  anId: string
  defaultLimit: number
  maxLimit: number
}

export interface ListPage<T> {
  object: 'list'
  data: T[]
  first_id: string | null
  last_id: string | null
  has_more: boolean
}

/** The page the query asks for of `items` (oldest first), each shown as `show` makes it. */
export function listPage<T, U>(items: readonly T[], query: Record<string, unknown>, paging: ListPaging, show: (item: T) => U): ListPage<U> {
  const order = query.order ?? 'desc'
  if (order !== 'asc' && order !== 'desc') throw invalidRequest("'order' must be 'asc' or 'desc'", 'order')
  const limit = query.limit === undefined ? paging.defaultLimit : Number(query.limit)
  if (!Number.isInteger(limit) || limit < 1 || limit > paging.maxLimit) throw invalidRequest(`'limit' must be an integer from 1 to ${paging.maxLimit}`, 'limit')
  const after = query.after
  if (after !== undefined && typeof after !== 'string') throw invalidRequest(`'after' must be ${paging.anId}`, 'after')
  let listed = order === 'desc' ? [...items].reverse() : [...items]
  if (after !== undefined) {
    const at = listed.findIndex((item) => (item as { id?: unknown }).id === after)
    if (at < 0) throw invalidRequest(`No ${paging.noun} has the id '${after}'`, 'after')
    listed = listed.slice(at + 1)
  }
  const data = listed.slice(0, limit).map(show)
  const idOf = (item: U | undefined) => (item as { id?: string } | undefined)?.id ?? null
  return { object: 'list', data, first_id: idOf(data[0]), last_id: idOf(data.at(-1)), has_more: listed.length > data.length }
}
