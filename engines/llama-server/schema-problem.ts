/**
 * Where in a request's schemas the engine's grammar builder got stuck. llama.cpp says what it could
 * not use (an unresolved `$ref`, a pattern it cannot parse) but not always where; this finds the place, so
 * the 400 names it: `response_format.json_schema.schema.properties.a.$ref`.
 */
import type { ChatJob } from '../engine-jobs.ts'
import type { UpstreamError } from './upstream-errors.ts'

export interface SchemaProblem {
  param: string
  message: string
}

/** The place in the request's schemas that the engine's schema error (upstream-errors.ts) is about, if it finds one. */
export function schemaProblemOf(job: ChatJob, error: UpstreamError): SchemaProblem | undefined {
  if (error.kind === 'schema_at') {
    for (const [root, schema] of schemaRoots(job)) {
      if (!resolves(schema, error.pointer)) continue
      return { param: [root, ...error.pointer].join('.'), message: `The schema cannot be turned into a grammar: ${error.reason}` }
    }
  }
  const found =
    error.kind === 'schema_ref' ? { key: '$ref', value: error.ref } : error.kind === 'schema_pattern' ? { key: 'pattern', value: error.pattern } : undefined
  if (!found) return undefined
  for (const [root, schema] of schemaRoots(job)) {
    const path = pathTo(schema, found.key, found.value, root)
    if (!path) continue
    const message =
      error.kind === 'schema_ref'
        ? `The schema refers to '${found.value}', which it does not define`
        : `The schema's pattern '${found.value}' cannot be used: ${error.kind === 'schema_pattern' ? error.reason : ''}`
    return { param: path, message }
  }
  return undefined
}

/** The request's schemas, each with the field that holds it. */
function schemaRoots(job: ChatJob): Array<[string, unknown]> {
  return [
    ['response_format.json_schema.schema', job.jsonSchema],
    ...job.tools.map((t, i): [string, unknown] => [`tools[${i}].function.parameters`, t.function.parameters]),
  ]
}

function resolves(node: unknown, pointer: readonly string[]): boolean {
  let here = node
  for (const part of pointer) {
    if (here === null || typeof here !== 'object' || !(part in here)) return false
    here = (here as Record<string, unknown>)[part]
  }
  return here !== undefined
}

function pathTo(node: unknown, key: string, value: string, here: string): string | undefined {
  if (node === null || typeof node !== 'object') return undefined
  if (Array.isArray(node)) {
    for (const [i, item] of node.entries()) {
      const found = pathTo(item, key, value, `${here}[${i}]`)
      if (found) return found
    }
    return undefined
  }
  for (const [k, v] of Object.entries(node)) {
    if (k === key && v === value) return `${here}.${k}`
    const found = pathTo(v, key, value, `${here}.${k}`)
    if (found) return found
  }
  return undefined
}
