/** The desktop app's preload bridge, when the page runs inside it (undefined in a browser). */
import type { HearthBridge } from '../../../../preload/hearth-bridge.ts'

export type { DesktopServerState, HearthBridge } from '../../../../preload/hearth-bridge.ts'

declare global {
  interface Window {
    hearth?: HearthBridge
  }
}

export function desktopBridge(): HearthBridge | undefined {
  return typeof window === 'undefined' ? undefined : window.hearth
}
