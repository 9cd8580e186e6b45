/**
 * The desktop app's life: one instance; hardening, the app:// protocol and the IPC handlers before
 * any page exists; the server before the window (so the page finds it running); the tray last.
 * Quitting stops the server (requests end, engine processes stop) before the app exits, and a
 * closed window leaves the server running in the tray when the person asked for that.
 */
import { availableParallelism } from 'node:os'
import { app, BrowserWindow, clipboard, dialog, ipcMain, Menu, nativeImage, nativeTheme, protocol, session, shell, Tray } from 'electron'
import type { ServerSettings } from '../server/settings.ts'
import { resolveSettings } from '../server/settings.ts'
import type { DesktopServerState } from '../../preload/hearth-bridge.ts'
import { APP_SCHEME, APP_SCHEME_PRIVILEGES, APP_START_URL, appProtocolHandler } from './app-protocol.ts'
import { DesktopPreferences } from './desktop-preferences.ts'
import { EmbeddedServer, type StartServer } from './embedded-server.ts'
import { Channel } from '../../preload/ipc-channels.ts'
import { registerIpcHandlers, type DesktopActions } from './ipc-handlers.ts'
import { hardenContents, hardenSession } from './security.ts'
import { trayMenu, trayTooltip } from './tray.ts'
import { TRAY_ICON_RUNNING, TRAY_ICON_STOPPED } from './tray-icons.ts'
import { mainWindowOptions } from './window-options.ts'

export interface DesktopAppOptions {
  preloadPath: string
  rendererDir: string
  startServer: StartServer
  /** Defaults to the settings file and environment, as `npm run serve` reads them (no flags). */
  settings?: ServerSettings
  log?: (line: string) => void
}

/** Returns undefined when another instance already runs (this one quits and focuses that one). */
export async function startDesktopApp(options: DesktopAppOptions): Promise<DesktopApp | undefined> {
  if (!app.requestSingleInstanceLock()) {
    app.quit()
    return undefined
  }
  // Every renderer sandboxed, whatever a window's options say (before ready, as Electron asks).
  app.enableSandbox()
  protocol.registerSchemesAsPrivileged([APP_SCHEME_PRIVILEGES])
  const settings = options.settings ?? resolveSettings([], process.env, availableParallelism()).settings
  const desktop = new DesktopApp(options, settings)
  app.on('second-instance', () => desktop.showWindow())
  app.on('web-contents-created', (_event, contents) => hardenContents(contents, (url) => void shell.openExternal(url)))
  app.on('window-all-closed', () => desktop.allWindowsClosed())
  app.on('activate', () => desktop.showWindow())
  app.on('before-quit', (event) => desktop.beforeQuit(event))
  await app.whenReady()
  await desktop.start()
  return desktop
}

export class DesktopApp {
  window: BrowserWindow | undefined
  tray: Tray | undefined
  readonly server: EmbeddedServer
  readonly preferences: DesktopPreferences
  private quitting = false
  private stopped = false
  private shutdown: Promise<void> | undefined

  constructor(
    private readonly options: DesktopAppOptions,
    settings: ServerSettings,
  ) {
    this.server = new EmbeddedServer(settings, options.startServer, options.log)
    this.preferences = new DesktopPreferences(settings.dataDir)
  }

  async start(): Promise<void> {
    hardenSession(session.defaultSession)
    protocol.handle(APP_SCHEME, appProtocolHandler(this.options.rendererDir))
    await this.preferences.load()
    registerIpcHandlers(ipcMain, this.actions())
    this.server.onChange((state) => this.serverChanged(state))
    await this.server.start(this.preferences.value.lan, this.preferences.value.ollama, this.preferences.value.lend || undefined)
    this.createWindow()
    this.createTray()
  }

  showWindow(): void {
    if (!this.window || this.window.isDestroyed()) this.createWindow()
    const window = this.window!
    if (window.isMinimized()) window.restore()
    window.show()
    window.focus()
  }

  allWindowsClosed(): void {
    if (!this.tray || !this.preferences.value.keepRunningInTray) app.quit()
  }

  /** Electron asks before quitting: stop the server first, then let it go. */
  beforeQuit(event: { preventDefault(): void }): void {
    if (this.stopped) return
    event.preventDefault()
    this.quitting = true
    this.shutdown ??= this.server
      .stop()
      .catch((e: unknown) => console.error('hearth: the server did not stop cleanly:', e))
      .then(() => {
        this.tray?.destroy()
        this.tray = undefined
        this.stopped = true
        app.quit()
      })
  }

  private createWindow(): void {
    const window = new BrowserWindow(mainWindowOptions(this.options.preloadPath, nativeTheme.shouldUseDarkColors))
    this.window = window
    window.once('ready-to-show', () => window.show())
    window.on('close', (event) => {
      // Closing the window is not quitting: the server keeps serving other programs.
      if (!this.quitting && this.tray && this.preferences.value.keepRunningInTray) {
        event.preventDefault()
        window.hide()
      }
    })
    window.on('closed', () => {
      if (this.window === window) this.window = undefined
    })
    void window.loadURL(APP_START_URL)
  }

  private createTray(): void {
    const tray = new Tray(nativeImage.createFromDataURL(this.server.state.running ? TRAY_ICON_RUNNING : TRAY_ICON_STOPPED))
    this.tray = tray
    tray.on('click', () => this.showWindow())
    this.updateTray(this.server.state)
  }

  private updateTray(state: DesktopServerState): void {
    if (!this.tray || this.tray.isDestroyed()) return
    this.tray.setImage(nativeImage.createFromDataURL(state.running ? TRAY_ICON_RUNNING : TRAY_ICON_STOPPED))
    this.tray.setToolTip(trayTooltip(state))
    this.tray.setContextMenu(
      Menu.buildFromTemplate(
        trayMenu(state, {
          openWindow: () => this.showWindow(),
          setServerRunning: (running) => void this.server.setRunning(running),
          copyAddress: () => {
            if (state.url) void clipboard.writeText(`${state.url}/v1`)
          },
          quit: () => app.quit(),
        }),
      ),
    )
  }

  private serverChanged(state: DesktopServerState): void {
    if (this.window && !this.window.isDestroyed()) this.window.webContents.send(Channel.ServerState, state)
    this.updateTray(state)
  }

  private actions(): DesktopActions {
    return {
      serverState: () => this.server.state,
      apiKey: () => this.server.apiKey(),
      setServerRunning: (running) => this.server.setRunning(running),
      setLanAccess: async (lan) => {
        await this.preferences.update({ lan })
        return this.server.setLan(lan)
      },
      setOllamaPort: async (on) => {
        await this.preferences.update({ ollama: on })
        return this.server.setOllama(on)
      },
      setLending: async (on) => {
        await this.preferences.update({ lend: on })
        return this.server.setLending(on)
      },
      preferences: () => ({ keepRunningInTray: this.preferences.value.keepRunningInTray }),
      setKeepRunningInTray: async (keep) => ({ keepRunningInTray: (await this.preferences.update({ keepRunningInTray: keep })).keepRunningInTray }),
      pickModelFile: async () => {
        const options = { title: 'Import a model file', properties: ['openFile' as const], filters: [{ name: 'Models', extensions: ['gguf', 'bin'] }] }
        const result = this.window ? await dialog.showOpenDialog(this.window, options) : await dialog.showOpenDialog(options)
        return result.canceled ? undefined : result.filePaths[0]
      },
      copyText: (text) => void clipboard.writeText(text),
    }
  }
}
