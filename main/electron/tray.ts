/** The tray icon: the server's state at a glance, and the way back to the window when it is closed. */
import type { MenuItemConstructorOptions } from 'electron'
import type { DesktopServerState } from '../../preload/hearth-bridge.ts'

export interface TrayActions {
  openWindow(): void
  setServerRunning(running: boolean): void
  copyAddress(): void
  quit(): void
}

export function trayTooltip(state: DesktopServerState): string {
  if (state.running) return `Hearth — serving at ${state.url}/v1${state.lan ? ' (also on the network)' : ''}`
  return state.error ? `Hearth — server stopped: ${state.error}` : 'Hearth — server stopped'
}

export function trayMenu(state: DesktopServerState, actions: TrayActions): MenuItemConstructorOptions[] {
  return [
    { label: trayTooltip(state), enabled: false },
    { type: 'separator' },
    { label: 'Open Hearth', click: () => actions.openWindow() },
    { label: 'Copy the API address', enabled: state.running, click: () => actions.copyAddress() },
    { label: 'Run the API server', type: 'checkbox', checked: state.running, click: () => actions.setServerRunning(!state.running) },
    { type: 'separator' },
    { label: 'Quit Hearth', click: () => actions.quit() },
  ]
}
