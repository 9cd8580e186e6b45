/**
 * The engine's entry in a utility process. There the parent speaks through process.parentPort
 * (MessagePort events) instead of process.send/'message'; this shim maps one onto the other, then
 * runs the same engine-child as a headless fork does.
 */
interface ParentPort {
  postMessage(message: unknown): void
  on(event: 'message', listener: (event: { data: unknown }) => void): void
}

const port = (process as unknown as { parentPort?: ParentPort }).parentPort
if (port) {
  process.send = ((message: unknown) => {
    port.postMessage(message)
    return true
  }) as typeof process.send
  port.on('message', ({ data }) => {
    ;(process.emit as (event: string, ...args: unknown[]) => boolean)('message', data)
  })
}

await import('../../native-models/engine/child/engine-child.ts')
