/** The main window's options: the security settings Electron's checklist asks for, and a size that fits 800×600. */
import type { BrowserWindowConstructorOptions } from 'electron'

export function mainWindowOptions(preloadPath: string, dark: boolean): BrowserWindowConstructorOptions {
  return {
    width: 1100,
    height: 760,
    minWidth: 800,
    minHeight: 600,
    title: 'Hearth',
    show: false, // shown on ready-to-show: no white flash
    backgroundColor: dark ? '#171716' : '#f7f7f5',
    autoHideMenuBar: true,
    webPreferences: {
      preload: preloadPath,
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInWorker: false,
      nodeIntegrationInSubFrames: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      webviewTag: false,
      navigateOnDragDrop: false,
      spellcheck: true,
    },
  }
}
