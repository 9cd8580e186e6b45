/** A chat job's messages in OpenAI's shape, as llama-server and OpenAI-style remote servers read them. */
import { pngDataUrl } from '../media/images/normalize-image.ts'
import type { ChatMessage } from './engine-jobs.ts'

export function openAiMessages(messages: readonly ChatMessage[]): unknown[] {
  return messages.map((m) =>
    Array.isArray(m.content)
      ? { ...m, content: m.content.map((p) => (p.type === 'image' ? { type: 'image_url', image_url: { url: pngDataUrl(p.png) } } : p)) }
      : m,
  )
}
