/**
 * A tool call's arguments from a conversation's history, made readable for the chat template
 * (which needs a JSON object): as they are when they already are one, completed when a call was
 * cut off mid-way (`{"path": "src/ma` → `{"path":"src/ma"}`), unwrapped when they were encoded
 * twice, and `{}` when nothing can be read from them.
 */
export function repairedArguments(text: string): string {
  const parsed = parse(text)
  if (isObject(parsed)) return text
  if (typeof parsed === 'string' && isObject(parse(parsed))) return parsed
  const completed = completeTruncated(text)
  return JSON.stringify(isObject(completed) ? completed : {})
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

/**
 * JSON cut off part way, closed: the open string, then the open arrays and objects, innermost
 * first. A member cut before its value, or a trailing comma, cannot be closed: those are dropped.
 */
function completeTruncated(text: string): unknown {
  const open: string[] = []
  let inString = false
  let escaped = false
  for (const ch of text) {
    if (inString) {
      if (escaped) escaped = false
      else if (ch === '\\') escaped = true
      else if (ch === '"') inString = false
    } else if (ch === '"') inString = true
    else if (ch === '{') open.push('}')
    else if (ch === '[') open.push(']')
    else if (ch === '}' || ch === ']') open.pop()
  }
  const closed = inString ? text + (escaped ? '\\"' : '"') : text
  const closers = open.reverse().join('')
  const candidates = [
    closed,
    closed.replace(/,\s*$/, ''),
    closed.replace(/([,{])\s*"(?:[^"\\]|\\.)*"\s*(?::\s*)?$/, (_, before: string) => (before === '{' ? '{' : '')),
  ]
  for (const candidate of candidates) {
    const value = parse(candidate + closers)
    if (value !== undefined) return value
  }
  return undefined
}
