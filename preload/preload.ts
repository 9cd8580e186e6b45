/**
 * The bridge between the window's page and the main process: one typed function per channel,
 * nothing generic (no ipcRenderer, no send-anything). Runs sandboxed, bundled to CommonJS.
 */
import { contextBridge, ipcRenderer, type IpcRendererEvent } from 'electron'
import { Channel } from './ipc-channels.ts'
import type { DesktopPreferences, DesktopServerState, HearthBridge } from './hearth-bridge.ts'

const bridge: HearthBridge = {
  getServerState: () => ipcRenderer.invoke(Channel.GetServerState) as Promise<DesktopServerState>,
  getApiKey: () => ipcRenderer.invoke(Channel.GetApiKey) as Promise<string | undefined>,
  setServerRunning: (running) => ipcRenderer.invoke(Channel.SetServerRunning, running === true) as Promise<DesktopServerState>,
  setLanAccess: (lan) => ipcRenderer.invoke(Channel.SetLanAccess, lan === true) as Promise<DesktopServerState>,
  setOllamaPort: (on) => ipcRenderer.invoke(Channel.SetOllamaPort, on === true) as Promise<DesktopServerState>,
  setLending: (on) => ipcRenderer.invoke(Channel.SetLending, on === true) as Promise<DesktopServerState>,
  getPreferences: () => ipcRenderer.invoke(Channel.GetPreferences) as Promise<DesktopPreferences>,
  setKeepRunningInTray: (keep) => ipcRenderer.invoke(Channel.SetKeepRunningInTray, keep === true) as Promise<DesktopPreferences>,
  pickModelFile: () => ipcRenderer.invoke(Channel.PickModelFile) as Promise<string | undefined>,
  copyText: (text) => ipcRenderer.invoke(Channel.CopyText, String(text)) as Promise<void>,
  onServerState: (listener) => {
    // The page gets the state, never the IPC event (which would leak the sender object).
    const forward = (_event: IpcRendererEvent, state: DesktopServerState) => listener(state)
    ipcRenderer.on(Channel.ServerState, forward)
    return () => {
      ipcRenderer.removeListener(Channel.ServerState, forward)
    }
  },
}

contextBridge.exposeInMainWorld('hearth', bridge)
