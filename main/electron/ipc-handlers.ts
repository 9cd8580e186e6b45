/**
 * The main process's side of the preload bridge. Every channel comes from the Channel enum, every
 * message is checked to come from our own page's top frame, and every argument is checked before
 * it is used: a compromised or foreign page gets nothing.
 */
import type { IpcMain, IpcMainInvokeEvent } from 'electron'
import type { DesktopPreferences, DesktopServerState } from '../../preload/hearth-bridge.ts'
import { Channel } from '../../preload/ipc-channels.ts'
import { isAppUrl } from './security.ts'

export interface DesktopActions {
  serverState(): DesktopServerState
  apiKey(): Promise<string | undefined>
  setServerRunning(running: boolean): Promise<DesktopServerState>
  setLanAccess(lan: boolean): Promise<DesktopServerState>
  setOllamaPort(on: boolean): Promise<DesktopServerState>
  setLending(on: boolean): Promise<DesktopServerState>
  preferences(): DesktopPreferences
  setKeepRunningInTray(keep: boolean): Promise<DesktopPreferences>
  pickModelFile(): Promise<string | undefined>
  copyText(text: string): void
}

export class UntrustedSenderError extends Error {
  override name = 'UntrustedSenderError'
}

const MAX_COPY_CHARS = 1_000_000

/** Our page, in the window's top frame (not an iframe, not another site). */
export function isTrustedSender(event: Pick<IpcMainInvokeEvent, 'senderFrame' | 'sender'>): boolean {
  const frame = event.senderFrame
  if (!frame) return false
  return isAppUrl(frame.url) && frame === event.sender.mainFrame
}

function boolean(value: unknown, name: string): boolean {
  if (typeof value !== 'boolean') throw new TypeError(`${name} must be true or false`)
  return value
}

export function registerIpcHandlers(ipc: Pick<IpcMain, 'handle'>, actions: DesktopActions): void {
  const handle = (channel: Channel, handler: (...args: unknown[]) => unknown) => {
    ipc.handle(channel, (event, ...args: unknown[]) => {
      if (!isTrustedSender(event)) throw new UntrustedSenderError(`refused ${channel} from ${event.senderFrame?.url ?? 'an unknown frame'}`)
      return handler(...args)
    })
  }
  handle(Channel.GetServerState, () => actions.serverState())
  handle(Channel.GetApiKey, () => actions.apiKey())
  handle(Channel.SetServerRunning, (running) => actions.setServerRunning(boolean(running, 'running')))
  handle(Channel.SetLanAccess, (lan) => actions.setLanAccess(boolean(lan, 'lan')))
  handle(Channel.SetOllamaPort, (on) => actions.setOllamaPort(boolean(on, 'on')))
  handle(Channel.SetLending, (on) => actions.setLending(boolean(on, 'on')))
  handle(Channel.GetPreferences, () => actions.preferences())
  handle(Channel.SetKeepRunningInTray, (keep) => actions.setKeepRunningInTray(boolean(keep, 'keep')))
  handle(Channel.PickModelFile, () => actions.pickModelFile())
  handle(Channel.CopyText, (text) => {
    if (typeof text !== 'string' || text.length > MAX_COPY_CHARS) throw new TypeError('text must be a string')
    actions.copyText(text)
  })
}
