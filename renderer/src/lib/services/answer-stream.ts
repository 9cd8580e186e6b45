/**
 * One streamed answer of the model, read into the turn that shows it. Text reaches the screen at
 * most every `showEveryMs`: a fast model sends hundreds of chunks a second, and each re-render
 * parses the whole answer again.
 */
import { addToolCallPieces, readChunk, type ChatTurn } from './chat-messages.ts'
import type { ChatChunk } from '../../../../main/server/wire-types.ts'

/** Failures end up on the turn (`error`), not thrown; a stop leaves what was said. */
export async function streamInto(turn: ChatTurn, chunks: AsyncIterable<ChatChunk>, signal: AbortSignal, showEveryMs = 50): Promise<void> {
  let unshown = ''
  let timer: ReturnType<typeof setTimeout> | undefined
  const show = () => {
    timer = undefined
    if (unshown) turn.text += unshown
    unshown = ''
  }
  try {
    for await (const chunk of chunks) {
      const update = readChunk(chunk)
      if (update.reasoning) turn.reasoning = (turn.reasoning ?? '') + update.reasoning
      if (update.toolCalls.length) addToolCallPieces((turn.toolCalls ??= []), update.toolCalls)
      if (update.text) {
        unshown += update.text
        timer ??= setTimeout(show, showEveryMs)
      }
      if (update.finishReason) turn.finishReason = update.finishReason
      if (update.usage) turn.usage = update.usage
      if (update.tokensPerSecond !== undefined) turn.tokensPerSecond = update.tokensPerSecond
    }
  } catch (e) {
    if (!signal.aborted) turn.error = (e as Error).message
  } finally {
    clearTimeout(timer)
    show()
  }
}
