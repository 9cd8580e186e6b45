/**
 * An MCP tool result as one text for a model to read: text blocks as they are, joined by a blank
 * line, everything else summarised in a few words (a model reading a chat turn cannot see images).
 */
export function summarizeContent(content: unknown[], structured?: unknown): string {
  const parts = content.map(describeBlock).filter((part) => part !== '')
  // A server that answers only with structuredContent still has something to say.
  if (parts.length === 0 && structured !== undefined) return JSON.stringify(structured)
  return parts.join('\n\n')
}

function describeBlock(block: unknown): string {
  const b = (block ?? {}) as Record<string, unknown>
  const mime = typeof b.mimeType === 'string' ? `, ${b.mimeType}` : ''
  switch (b.type) {
    case 'text':
      return typeof b.text === 'string' ? b.text : ''
    case 'image':
      return `(an image${mime})`
    case 'audio':
      return `(an audio clip${mime})`
    case 'resource_link':
      return `(a link to ${String(b.uri)}${typeof b.name === 'string' ? `, "${b.name}"` : ''})`
    case 'resource': {
      const resource = (b.resource ?? {}) as Record<string, unknown>
      if (typeof resource.text === 'string') return resource.text
      return `(a resource, ${String(resource.uri)}${typeof resource.mimeType === 'string' ? `, ${resource.mimeType}` : ''})`
    }
    default:
      return `(a ${typeof b.type === 'string' ? b.type : 'content'} block)`
  }
}
