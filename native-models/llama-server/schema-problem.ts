/**
 * Where in a request's schemas the engine's grammar builder got stuck. llama.cpp says what it could
 * not use (an unresolved `$ref`, a pattern it cannot parse) but not where; this finds the place, so
 * the 400 names it: `response_format.json_schema.schema.properties.a.$ref`.
 */
import type { ChatJob } from '../engine/engine-protocol.ts'

export interface SchemaProblem {
  param: string
  message: string
}

/** The problem in the request's schemas that this engine message describes, if it describes one. */
export function schemaProblemOf(job: ChatJob, engineMessage: string): SchemaProblem | undefined {
  // "JSON schema error at #/properties/a: cannot resolve $ref #/$defs/missing, $defs not found"
  const located = /JSON schema error at #([^:\s]*): (.+)$/m.exec(engineMessage)
  if (located) {
    const pointer = located[1]!.split('/').slice(1).map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    for (const [root, schema] of schemaRoots(job)) {
      if (!resolves(schema, pointer)) continue
      return { param: [root, ...pointer].join('.'), message: `The schema cannot be turned into a grammar: ${located[2]}` }
    }
  }
  const ref = /Unresolved \$ref (\S+)/.exec(engineMessage)
  const pattern = /Invalid pattern (.+?): (.+)$/m.exec(engineMessage)
  const found = ref ? { key: '$ref', value: ref[1]! } : pattern ? { key: 'pattern', value: pattern[1]! } : undefined
  if (!found) return undefined
  for (const [root, schema] of schemaRoots(job)) {
    const path = pathTo(schema, found.key, found.value, root)
    if (!path) continue
    const message = ref
      ? `The schema refers to '${found.value}', which it does not define`
      : `The schema's pattern '${found.value}' cannot be used: ${pattern![2]}`
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
