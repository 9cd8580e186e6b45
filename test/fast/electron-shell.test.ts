/**
 * The desktop shell's logic with `electron` mocked (its binary cannot be downloaded here): window
 * options, hardening, the app:// protocol, IPC handlers and sender checks, the embedded server's
 * restarts, the startup and shutdown order, the preload, and what `npm start` says when Electron
 * is missing.
 */
import { execFile } from 'node:child_process'
import { EventEmitter } from 'node:events'
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { beforeEach, describe, expect, it, vi } from 'vitest'
import type { RunningServer } from '../../main/server/server.ts'
import type { ServerSettings } from '../../main/server/settings.ts'
import { PROJECT_ROOT } from '../support/server-process.ts'

/** Every call the fake Electron sees, in order. */
const electron = vi.hoisted(() => {
  // A hoisted mock runs before the imports: require is the only way to reach a module here.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { EventEmitter } = require('node:events') as typeof import('node:events')
  const calls: string[] = []
  const record =
    (name: string) =>
    (...args: unknown[]) => {
      calls.push(name)
      return args
    }
  const app = Object.assign(new EventEmitter(), {
    lock: true,
    requestSingleInstanceLock: () => {
      calls.push('app.requestSingleInstanceLock')
      return app.lock
    },
    whenReady: async () => {
      calls.push('app.whenReady')
    },
    quit: () => {
      calls.push('app.quit')
      const event = { defaultPrevented: false, preventDefault: () => (event.defaultPrevented = true) }
      app.emit('before-quit', event)
      if (!event.defaultPrevented) calls.push('app.exited')
    },
    exit: record('app.exit'),
    enableSandbox: record('app.enableSandbox'),
  })
  const windows: any[] = []
  class BrowserWindow extends EventEmitter {
    destroyed = false
    visible = false
    webContents = { send: (channel: string) => calls.push(`webContents.send ${channel}`) }
    constructor(readonly options: unknown) {
      super()
      calls.push('new BrowserWindow')
      windows.push(this)
    }
    loadURL(url: string) {
      calls.push(`window.loadURL ${url}`)
      return Promise.resolve()
    }
    show() {
      this.visible = true
    }
    hide() {
      this.visible = false
      calls.push('window.hide')
    }
    focus() {}
    restore() {}
    isMinimized() {
      return false
    }
    isDestroyed() {
      return this.destroyed
    }
    /** What clicking the window's close button does. */
    close() {
      const event = { defaultPrevented: false, preventDefault: () => (event.defaultPrevented = true) }
      this.emit('close', event)
      if (!event.defaultPrevented) {
        this.destroyed = true
        this.emit('closed')
        app.emit('window-all-closed')
      }
    }
  }
  const trays: any[] = []
  class Tray extends EventEmitter {
    destroyed = false
    tooltip = ''
    menu: unknown
    constructor() {
      super()
      calls.push('new Tray')
      trays.push(this)
    }
    setImage() {}
    setToolTip(t: string) {
      this.tooltip = t
    }
    setContextMenu(m: unknown) {
      this.menu = m
    }
    destroy() {
      this.destroyed = true
      calls.push('tray.destroy')
    }
    isDestroyed() {
      return this.destroyed
    }
  }
  const ipcHandlers = new Map<string, (...args: any[]) => unknown>()
  const exposed: Record<string, unknown> = {}
  const rendererListeners = new EventEmitter()
  return {
    calls,
    windows,
    trays,
    ipcHandlers,
    exposed,
    rendererListeners,
    module: {
      app,
      BrowserWindow,
      Tray,
      Menu: { buildFromTemplate: (template: unknown) => template },
      nativeImage: { createFromDataURL: (url: string) => ({ url }) },
      nativeTheme: { shouldUseDarkColors: false },
      clipboard: { writeText: record('clipboard.writeText') },
      shell: { openExternal: record('shell.openExternal') },
      dialog: { showOpenDialog: async () => ({ canceled: false, filePaths: ['/models/picked.gguf'] }), showErrorBox: record('dialog.showErrorBox') },
      session: {
        defaultSession: {
          setPermissionRequestHandler: record('session.setPermissionRequestHandler'),
          setPermissionCheckHandler: record('session.setPermissionCheckHandler'),
        },
      },
      protocol: {
        registerSchemesAsPrivileged: record('protocol.registerSchemesAsPrivileged'),
        handle: record('protocol.handle'),
      },
      ipcMain: {
        handle: (channel: string, handler: (...args: any[]) => unknown) => {
          calls.push(`ipcMain.handle ${channel}`)
          ipcHandlers.set(channel, handler)
        },
      },
      contextBridge: { exposeInMainWorld: (name: string, api: unknown) => (exposed[name] = api) },
      ipcRenderer: {
        invoke: async (channel: string, ...args: unknown[]) => ({ channel, args }),
        on: (channel: string, listener: (...a: any[]) => void) => rendererListeners.on(channel, listener),
        removeListener: (channel: string, listener: (...a: any[]) => void) => rendererListeners.removeListener(channel, listener),
      },
    },
  }
})

vi.mock('electron', () => electron.module)

const { mainWindowOptions } = await import('../../main/electron/window-options.ts')
const { hardenContents, hardenSession, permissionAllowed } = await import('../../main/electron/security.ts')
const { APP_CSP, APP_ORIGIN, appProtocolHandler, resolveAppPath } = await import('../../main/electron/app-protocol.ts')
const { WEB_UI_CSP } = await import('../../main/server/http/web-ui.ts')
const { Channel } = await import('../../preload/ipc-channels.ts')
const { registerIpcHandlers, isTrustedSender } = await import('../../main/electron/ipc-handlers.ts')
const { EmbeddedServer } = await import('../../main/electron/embedded-server.ts')
const { startDesktopApp } = await import('../../main/electron/desktop-app.ts')
const { trayMenu } = await import('../../main/electron/tray.ts')
const { findElectron } = await import('../../main/cli/start-electron.ts')

function settings(dataDir: string, change: Partial<ServerSettings> = {}): ServerSettings {
  return {
    host: '127.0.0.1',
    port: 8181,
    dataDir,
    modelsDir: join(dataDir, 'models'),
    apiKeys: [],
    auth: true,
    threads: 1,
    gpuLayers: 0,
    requestTimeoutMs: 1000,
    maxQueuePerModel: 1,
    bodyLimitBytes: 1024,
    settingsFile: join(dataDir, 'settings.json'),
    ...change,
  } as ServerSettings
}

/** A startServer that records how it was called and what was stopped. */
function fakeStartServer(keyFile?: string) {
  const started: ServerSettings[] = []
  let closed = 0
  const failWith: Array<NodeJS.ErrnoException | undefined> = []
  const start = async (s: ServerSettings): Promise<RunningServer> => {
    electron.calls.push(`startServer ${s.host}:${s.port}${s.ollamaPort !== undefined ? ` ollama ${s.ollamaPort}` : ''}${s.lend ? ' lend' : ''}`)
    const failure = failWith.shift()
    if (failure) throw failure
    started.push(s)
    return {
      url: `http://${s.host}:${s.port === 0 ? 40123 : s.port}`,
      keyFile,
      context: {} as RunningServer['context'],
      close: async () => {
        closed++
        electron.calls.push('server.close')
      },
    }
  }
  return { start, started, failWith, closed: () => closed }
}

const appFrame = { url: `${APP_ORIGIN}/index.html` }
const trustedEvent = { senderFrame: appFrame, sender: { mainFrame: appFrame } } as any

beforeEach(() => {
  electron.calls.length = 0
  electron.windows.length = 0
  electron.trays.length = 0
  electron.ipcHandlers.clear()
  electron.module.app.removeAllListeners()
  electron.module.app.lock = true
})

describe('window options', () => {
  it('isolate the page as the security checklist asks and fit 800×600', () => {
    const options = mainWindowOptions('/app/preload.cjs', false)
    expect(options.webPreferences).toMatchObject({
      preload: '/app/preload.cjs',
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInWorker: false,
      nodeIntegrationInSubFrames: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      webviewTag: false,
    })
    expect(options).toMatchObject({ minWidth: 800, minHeight: 600, show: false })
  })
})

describe('hardening', () => {
  it('allows the microphone to our page only, and never the camera', () => {
    expect(permissionAllowed('media', `${APP_ORIGIN}/index.html`, { mediaTypes: ['audio'] })).toBe(true)
    expect(permissionAllowed('media', `${APP_ORIGIN}/index.html`, { mediaTypes: ['audio', 'video'] })).toBe(false)
    expect(permissionAllowed('media', 'https://evil.example/', { mediaTypes: ['audio'] })).toBe(false)
    for (const other of ['notifications', 'geolocation', 'clipboard-read', 'clipboard-sanitized-write', 'openExternal', 'fullscreen']) {
      expect(permissionAllowed(other, `${APP_ORIGIN}/index.html`)).toBe(false)
    }
  })

  it('answers every permission request exactly once', () => {
    let requestHandler: any
    let checkHandler: any
    hardenSession({ setPermissionRequestHandler: (h: any) => (requestHandler = h), setPermissionCheckHandler: (h: any) => (checkHandler = h) } as any)
    const answers: boolean[] = []
    requestHandler(null, 'media', (ok: boolean) => answers.push(ok), { requestingUrl: `${APP_ORIGIN}/`, mediaTypes: ['audio'] })
    requestHandler(null, 'geolocation', (ok: boolean) => answers.push(ok), { requestingUrl: `${APP_ORIGIN}/` })
    requestHandler(null, 'media', (ok: boolean) => answers.push(ok), { requestingUrl: 'https://x.example/', mediaTypes: ['audio'] })
    expect(answers).toEqual([true, false, false])
    expect(checkHandler(null, 'media', APP_ORIGIN, { mediaType: 'audio' })).toBe(true)
    expect(checkHandler(null, 'media', APP_ORIGIN, { mediaType: 'video' })).toBe(false)
    expect(checkHandler(null, 'notifications', APP_ORIGIN, {})).toBe(false)
  })

  it('blocks navigation away from the app and new windows; web links go to the browser', () => {
    const contents = Object.assign(new EventEmitter(), { openHandler: undefined as any, setWindowOpenHandler: (h: any) => (contents.openHandler = h) })
    const opened: string[] = []
    hardenContents(contents as any, (url) => opened.push(url))
    const navigate = (url: string, event = 'will-navigate') => {
      let prevented = false
      contents.emit(event, { preventDefault: () => (prevented = true) }, url)
      return prevented
    }
    expect(navigate('https://evil.example/')).toBe(true)
    expect(navigate('file:///etc/passwd')).toBe(true)
    expect(navigate('http://127.0.0.1:8181/', 'will-redirect')).toBe(true)
    expect(navigate(`${APP_ORIGIN}/index.html`)).toBe(false)
    expect(navigate('app://other/index.html')).toBe(true)
    let webview = false
    contents.emit('will-attach-webview', { preventDefault: () => (webview = true) })
    expect(webview).toBe(true)
    expect(contents.openHandler({ url: 'https://llama.cpp.example/docs' })).toEqual({ action: 'deny' })
    expect(contents.openHandler({ url: 'javascript:alert(1)' })).toEqual({ action: 'deny' })
    expect(contents.openHandler({ url: 'file:///etc/passwd' })).toEqual({ action: 'deny' })
    expect(opened).toEqual(['https://llama.cpp.example/docs'])
  })
})

describe('the app:// protocol', () => {
  const root = mkdtempSync(join(tmpdir(), 'hearth-app-root-'))
  mkdirSync(join(root, 'assets'))
  writeFileSync(join(root, 'index.html'), '<!doctype html><title>Hearth</title>')
  writeFileSync(join(root, 'assets', 'app.js'), 'console.log(1)')
  writeFileSync(join(tmpdir(), 'hearth-secret.txt'), 'secret')

  it('reads only files inside the UI folder', () => {
    expect(resolveAppPath(root, `${APP_ORIGIN}/`)).toBe(join(root, 'index.html'))
    expect(resolveAppPath(root, `${APP_ORIGIN}/assets/app.js?v=1#x`)).toBe(join(root, 'assets', 'app.js'))
    for (const bad of [
      `${APP_ORIGIN}/../hearth-secret.txt`,
      `${APP_ORIGIN}/%2e%2e/hearth-secret.txt`,
      `${APP_ORIGIN}/assets/%2e%2e%2f%2e%2e%2fhearth-secret.txt`,
      `${APP_ORIGIN}/..%5chearth-secret.txt`,
      `${APP_ORIGIN}/%00index.html`,
      `${APP_ORIGIN}/%E0%A4%A`,
      'app://elsewhere/index.html',
      'https://hearth/index.html',
    ]) {
      const resolved = resolveAppPath(root, bad)
      expect(resolved === undefined || resolved.startsWith(root + '/'), bad).toBe(true)
    }
  })

  it('serves the page with its CSP, assets with their type, and 404s the rest', async () => {
    const handle = appProtocolHandler(root)
    const page = await handle(new Request(`${APP_ORIGIN}/index.html`))
    expect(page.status).toBe(200)
    expect(page.headers.get('content-security-policy')).toBe(APP_CSP)
    expect(APP_CSP).toContain("script-src 'self'")
    expect(APP_CSP).toContain("connect-src 'self' http://127.0.0.1:*")
    // The web UI's policy, with the embedded server as the one other origin the page may reach.
    expect(APP_CSP.replace(' http://127.0.0.1:*', '')).toBe(WEB_UI_CSP)
    expect(await page.text()).toContain('<title>Hearth</title>')
    const script = await handle(new Request(`${APP_ORIGIN}/assets/app.js`))
    expect(script.headers.get('content-type')).toBe('text/javascript; charset=utf-8')
    expect(script.headers.get('content-security-policy')).toBeNull()
    expect((await handle(new Request(`${APP_ORIGIN}/missing.js`))).status).toBe(404)
    expect((await handle(new Request(`${APP_ORIGIN}/../hearth-secret.txt`))).status).toBe(404)
    expect((await handle(new Request(`${APP_ORIGIN}/index.html`, { method: 'POST', body: 'x' }))).status).toBe(404)
  })
})

describe('IPC handlers', () => {
  function actions() {
    const done: string[] = []
    return {
      done,
      actions: {
        serverState: () => ({ running: true, url: 'http://127.0.0.1:8181', lan: false, ollama: false, ollamaUrl: undefined, lend: false, error: undefined }),
        apiKey: async () => 'key',
        setServerRunning: async (running: boolean) => (
          done.push(`running ${running}`),
          { running, url: undefined, lan: false, ollama: false, ollamaUrl: undefined, lend: false, error: undefined }
        ),
        setLanAccess: async (lan: boolean) => (
          done.push(`lan ${lan}`),
          { running: true, url: 'x', lan, ollama: false, ollamaUrl: undefined, lend: false, error: undefined }
        ),
        setOllamaPort: async (on: boolean) => (
          done.push(`ollama ${on}`),
          { running: true, url: 'x', lan: false, ollama: on, ollamaUrl: undefined, lend: false, error: undefined }
        ),
        setLending: async (on: boolean) => (
          done.push(`lend ${on}`),
          { running: true, url: 'x', lan: false, ollama: false, ollamaUrl: undefined, lend: on, error: undefined }
        ),
        preferences: () => ({ keepRunningInTray: true }),
        setKeepRunningInTray: async (keep: boolean) => (done.push(`keep ${keep}`), { keepRunningInTray: keep }),
        pickModelFile: async () => '/a.gguf',
        copyText: (text: string) => done.push(`copy ${text}`),
      },
    }
  }

  it('handles every channel of the enum but the main → page event', () => {
    registerIpcHandlers(electron.module.ipcMain as any, actions().actions)
    expect([...electron.ipcHandlers.keys()].sort()).toEqual(
      Object.values(Channel)
        .filter((c) => c !== Channel.ServerState)
        .sort(),
    )
  })

  it('answers our page and checks the arguments', async () => {
    const { actions: a, done } = actions()
    registerIpcHandlers(electron.module.ipcMain as any, a)
    // ipcMain.handle turns a handler's throw into the invoke's rejection.
    const call = (channel: string, ...args: unknown[]) => new Promise((resolve) => resolve(electron.ipcHandlers.get(channel)!(trustedEvent, ...args)))
    expect(await call(Channel.GetApiKey)).toBe('key')
    await call(Channel.SetLanAccess, true)
    await call(Channel.SetOllamaPort, true)
    await call(Channel.SetLending, true)
    await call(Channel.SetKeepRunningInTray, false)
    await call(Channel.CopyText, 'hello')
    expect(done).toEqual(['lan true', 'ollama true', 'lend true', 'keep false', 'copy hello'])
    await expect(call(Channel.SetLanAccess, 'yes')).rejects.toThrow(/true or false/)
    await expect(call(Channel.SetOllamaPort, 1)).rejects.toThrow(/true or false/)
    await expect(call(Channel.SetLending, 'on')).rejects.toThrow(/true or false/)
    await expect(call(Channel.CopyText, { toString: () => 'x' })).rejects.toThrow(/string/)
    expect(done).toHaveLength(5)
  })

  it('refuses other pages, other schemes and subframes', async () => {
    const { actions: a, done } = actions()
    registerIpcHandlers(electron.module.ipcMain as any, a)
    const subframe = { url: `${APP_ORIGIN}/index.html` }
    const untrusted = [
      { senderFrame: { url: 'https://evil.example/' }, sender: { mainFrame: { url: 'https://evil.example/' } } },
      { senderFrame: subframe, sender: { mainFrame: appFrame } },
      { senderFrame: null, sender: { mainFrame: appFrame } },
      { senderFrame: { url: 'file:///index.html' }, sender: {} },
    ]
    for (const event of untrusted) {
      expect(isTrustedSender(event as any)).toBe(false)
      expect(() => electron.ipcHandlers.get(Channel.SetServerRunning)!(event, false)).toThrow(/refused/)
      expect(() => electron.ipcHandlers.get(Channel.GetApiKey)!(event)).toThrow(/refused/)
    }
    expect(done).toEqual([])
  })
})

describe('the embedded server', () => {
  it('starts on loopback for our page, restarts on every interface for LAN access, and stops', async () => {
    const fake = fakeStartServer()
    const server = new EmbeddedServer(settings(mkdtempSync(join(tmpdir(), 'hearth-emb-'))), fake.start, () => undefined)
    const seen: boolean[] = []
    server.onChange((s) => seen.push(s.lan))
    expect(await server.start()).toEqual({
      running: true,
      url: 'http://127.0.0.1:8181',
      lan: false,
      ollama: false,
      ollamaUrl: undefined,
      lend: false,
      error: undefined,
    })
    expect(fake.started[0]).toMatchObject({ host: '127.0.0.1', corsOrigins: [APP_ORIGIN] })
    electron.calls.length = 0
    const lan = await server.setLan(true)
    expect(electron.calls).toEqual(['server.close', 'startServer 0.0.0.0:8181'])
    expect(lan).toMatchObject({ running: true, lan: true, url: 'http://127.0.0.1:8181' })
    expect(await server.setRunning(false)).toMatchObject({ running: false, url: undefined })
    expect(fake.closed()).toBe(2)
    // LAN access chosen while stopped applies at the next start.
    await server.setLan(false)
    expect(fake.started).toHaveLength(2)
    expect(seen).toEqual([false, true, true, false])
  })

  it('runs quick switches one after another, never two servers at once', async () => {
    const fake = fakeStartServer()
    const server = new EmbeddedServer(settings(mkdtempSync(join(tmpdir(), 'hearth-emb-'))), fake.start, () => undefined)
    await Promise.all([server.start(), server.setRunning(false), server.setRunning(true), server.setLan(true), server.setRunning(false)])
    expect(electron.calls.filter((c) => c.startsWith('startServer') || c === 'server.close')).toEqual([
      'startServer 127.0.0.1:8181',
      'server.close',
      'startServer 127.0.0.1:8181',
      'server.close',
      'startServer 0.0.0.0:8181',
      'server.close',
    ])
    expect(server.state.running).toBe(false)
  })

  it('takes a free port when its port is taken, and reports other failures', async () => {
    const fake = fakeStartServer()
    const server = new EmbeddedServer(settings(mkdtempSync(join(tmpdir(), 'hearth-emb-'))), fake.start, () => undefined)
    fake.failWith.push(Object.assign(new Error('listen EADDRINUSE'), { code: 'EADDRINUSE' }))
    expect(await server.start()).toMatchObject({ running: true, url: 'http://127.0.0.1:40123' })
    await server.stop()
    fake.failWith.push(Object.assign(new Error('permission denied'), { code: 'EACCES' }))
    expect(await server.start()).toMatchObject({ running: false, error: 'The server could not start: permission denied' })
  })

  it('reads the generated key fresh (the page may have regenerated it), or gives the configured one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hearth-emb-'))
    writeFileSync(join(dir, 'api-key'), 'hearth-first\n')
    const server = new EmbeddedServer(settings(dir), fakeStartServer(join(dir, 'api-key')).start, () => undefined)
    await server.start()
    expect(await server.apiKey()).toBe('hearth-first')
    writeFileSync(join(dir, 'api-key'), 'hearth-second\n')
    expect(await server.apiKey()).toBe('hearth-second')
    const configured = new EmbeddedServer(settings(dir, { apiKeys: ['given-key-123'] }), fakeStartServer().start)
    expect(await configured.apiKey()).toBe('given-key-123')
    const open = new EmbeddedServer(settings(dir, { auth: false }), fakeStartServer().start)
    expect(await open.apiKey()).toBeUndefined()
  })
})

describe('startup and shutdown', () => {
  async function startApp() {
    const dataDir = mkdtempSync(join(tmpdir(), 'hearth-desktop-'))
    const fake = fakeStartServer()
    const desktop = await startDesktopApp({
      preloadPath: '/app/dist-electron/preload.cjs',
      rendererDir: '/app/renderer/dist',
      startServer: fake.start,
      settings: settings(dataDir),
      log: () => undefined,
    })
    return { desktop: desktop!, fake, dataDir }
  }

  it('hardens and wires everything before the page exists, starts the server before the window, the tray last', async () => {
    await startApp()
    const order = electron.calls.filter((c) => !c.startsWith('ipcMain.handle ') || c.endsWith(Channel.GetServerState))
    expect(order).toEqual([
      'app.requestSingleInstanceLock',
      'app.enableSandbox',
      'protocol.registerSchemesAsPrivileged',
      'app.whenReady',
      'session.setPermissionRequestHandler',
      'session.setPermissionCheckHandler',
      'protocol.handle',
      `ipcMain.handle ${Channel.GetServerState}`,
      // The Ollama port is on unless the person switched it off (it is taken only where it is free).
      'startServer 127.0.0.1:8181 ollama 11434',
      'new BrowserWindow',
      `window.loadURL ${APP_ORIGIN}/index.html`,
      'new Tray',
    ])
    expect(electron.windows[0].options.webPreferences).toMatchObject({ preload: '/app/dist-electron/preload.cjs', sandbox: true, contextIsolation: true })
    expect(electron.trays[0].tooltip).toBe('Hearth — serving at http://127.0.0.1:8181/v1')
  })

  it('a second instance quits at once and focuses the first', async () => {
    electron.module.app.lock = false
    const desktop = await startDesktopApp({ preloadPath: '', rendererDir: '', startServer: fakeStartServer().start, settings: settings(tmpdir()) })
    expect(desktop).toBeUndefined()
    expect(electron.calls).toEqual(['app.requestSingleInstanceLock', 'app.quit', 'app.exited'])
  })

  it('closing the window keeps the server in the tray; quitting stops the server, then the tray, then exits', async () => {
    const { desktop } = await startApp()
    electron.calls.length = 0
    electron.windows[0].close()
    expect(electron.calls).toEqual(['window.hide'])
    expect(desktop.server.state.running).toBe(true)

    electron.module.app.quit()
    await vi.waitFor(() => expect(electron.calls).toContain('app.exited'))
    // The hidden page still hears that the server stopped.
    expect(electron.calls).toEqual([
      'window.hide',
      'app.quit',
      'server.close',
      `webContents.send ${Channel.ServerState}`,
      'tray.destroy',
      'app.quit',
      'app.exited',
    ])
  })

  it('quits with the window when the tray setting is off', async () => {
    const { desktop } = await startApp()
    await desktop.preferences.update({ keepRunningInTray: false })
    electron.calls.length = 0
    electron.windows[0].close()
    await vi.waitFor(() => expect(electron.calls).toContain('app.exited'))
    expect(electron.calls.filter((c) => !c.startsWith('webContents.send'))).toEqual(['app.quit', 'server.close', 'tray.destroy', 'app.quit', 'app.exited'])
  })

  it('remembers LAN access and tells the page and the tray when the server moves', async () => {
    const { dataDir } = await startApp()
    electron.calls.length = 0
    const state = await electron.ipcHandlers.get(Channel.SetLanAccess)!(trustedEvent, true)
    expect(state).toMatchObject({ running: true, lan: true })
    expect(electron.calls).toEqual(['server.close', 'startServer 0.0.0.0:8181 ollama 11434', `webContents.send ${Channel.ServerState}`])
    expect(JSON.parse(readFileSync(join(dataDir, 'desktop.json'), 'utf8'))).toEqual({ keepRunningInTray: true, lan: true, ollama: true, lend: false })
    expect(electron.trays[0].tooltip).toContain('(also on the network)')
  })

  it.each([
    ['the Ollama port switched off', Channel.SetOllamaPort, 'ollama', false, 'startServer 127.0.0.1:8181'],
    ['lending', Channel.SetLending, 'lend', true, 'startServer 127.0.0.1:8181 ollama 11434 lend'],
  ] as const)('remembers %s and restarts the server with it, on loopback', async (_what, channel, key, on, started) => {
    const { dataDir } = await startApp()
    electron.calls.length = 0
    const state = await electron.ipcHandlers.get(channel)!(trustedEvent, on)
    expect(state).toMatchObject({ running: true, [key]: on })
    expect(electron.calls).toEqual(['server.close', started, `webContents.send ${Channel.ServerState}`])
    expect(JSON.parse(readFileSync(join(dataDir, 'desktop.json'), 'utf8'))).toMatchObject({ [key]: on })
  })

  it('builds the tray menu from the server state', () => {
    const clicked: string[] = []
    const menu = trayMenu(
      { running: false, url: undefined, lan: false, ollama: false, ollamaUrl: undefined, lend: false, error: 'port taken' },
      {
        openWindow: () => clicked.push('open'),
        setServerRunning: (r) => clicked.push(`run ${r}`),
        copyAddress: () => clicked.push('copy'),
        quit: () => clicked.push('quit'),
      },
    )
    expect(menu[0]!.label).toBe('Hearth — server stopped: port taken')
    const item = (label: string) => menu.find((m) => m.label === label)!
    expect(item('Copy the API address').enabled).toBe(false)
    expect(item('Run the API server').checked).toBe(false)
    ;(item('Run the API server').click as () => void)()
    ;(item('Quit Hearth').click as () => void)()
    expect(clicked).toEqual(['run true', 'quit'])
  })
})

describe('the preload bridge', () => {
  it('exposes one typed call per channel and never the IPC event', async () => {
    await import('../../preload/preload.ts')
    const bridge = electron.exposed.hearth as Record<string, (...args: any[]) => any>
    expect(Object.keys(bridge).sort()).toEqual(
      [
        'copyText',
        'getApiKey',
        'getPreferences',
        'getServerState',
        'onServerState',
        'pickModelFile',
        'setKeepRunningInTray',
        'setLanAccess',
        'setLending',
        'setOllamaPort',
        'setServerRunning',
      ].sort(),
    )
    expect(Object.values(bridge).every((f) => typeof f === 'function')).toBe(true)
    expect(await bridge.setLanAccess!('yes')).toEqual({ channel: Channel.SetLanAccess, args: [false] })
    expect(await bridge.getApiKey!()).toEqual({ channel: Channel.GetApiKey, args: [] })
    const states: unknown[][] = []
    const stop = bridge.onServerState!((...args: unknown[]) => states.push(args))
    electron.rendererListeners.emit(Channel.ServerState, { sender: 'secret' }, { running: true })
    stop()
    electron.rendererListeners.emit(Channel.ServerState, {}, { running: false })
    expect(states).toEqual([[{ running: true }]])
  })
})

describe('npm start without Electron', () => {
  it('finds the binary the package points at, or says what is missing', () => {
    const root = mkdtempSync(join(tmpdir(), 'hearth-electron-'))
    writeFileSync(join(root, 'package.json'), '{}')
    expect(findElectron(root, {})).toMatchObject({ found: false, problem: 'package-missing' })
    const pkg = join(root, 'node_modules', 'electron')
    mkdirSync(join(pkg, 'dist'), { recursive: true })
    writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: 'electron', version: '45.4.1', main: 'index.js' }))
    expect(findElectron(root, {})).toMatchObject({ found: false, problem: 'binary-missing', version: '45.4.1' })
    writeFileSync(join(pkg, 'path.txt'), 'electron')
    writeFileSync(join(pkg, 'dist', 'electron'), '')
    expect(findElectron(root, {})).toEqual({ found: true, binary: join(pkg, 'dist', 'electron'), version: '45.4.1' })
    const elsewhere = mkdtempSync(join(tmpdir(), 'hearth-electron-dist-'))
    writeFileSync(join(elsewhere, 'electron'), '')
    expect(findElectron(root, { ELECTRON_OVERRIDE_DIST_PATH: elsewhere })).toMatchObject({ found: true, binary: join(elsewhere, 'electron') })
  })

  it('explains itself and exits 1 without trying to download anything', async () => {
    const lookup = findElectron()
    if (lookup.found) return // a machine with Electron installed opens the window instead
    const run = promisify(execFile)
    const started = performance.now()
    const result = await run(process.execPath, ['--import', 'tsx', join(PROJECT_ROOT, 'main/cli/start-electron.ts')], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, ELECTRON_GET_USE_PROXY: '', npm_config_offline: 'true' },
    }).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => ({ code: e.code, stderr: e.stderr }),
    )
    expect(result.code).toBe(1)
    expect(result.stderr).toContain('binary is not installed')
    expect(result.stderr).toContain('npm run serve')
    expect(result.stderr).toContain('ELECTRON_OVERRIDE_DIST_PATH')
    expect(performance.now() - started).toBeLessThan(20_000)
  })
})

describe('engines shipped in the installer', () => {
  it('points the server at the packaged builds, unless the environment names its own', async () => {
    const { usePackagedEngines } = await import('../../main/electron/packaged-engines.ts')
    const resources = mkdtempSync(join(tmpdir(), 'hearth-resources-'))
    const env: NodeJS.ProcessEnv = {}
    expect(usePackagedEngines(resources, env)).toEqual([]) // a dev run: nothing packaged
    for (const name of ['llama', 'whisper']) {
      mkdirSync(join(resources, 'engines', name), { recursive: true })
      writeFileSync(join(resources, 'engines', name, 'build.json'), '{}')
    }
    const own: NodeJS.ProcessEnv = { HEARTH_WHISPER_BUILD_DIR: '/opt/my-whisper' }
    expect(usePackagedEngines(resources, own)).toEqual(['HEARTH_LLAMA_BUILD_DIR'])
    expect(own).toEqual({ HEARTH_LLAMA_BUILD_DIR: join(resources, 'engines', 'llama'), HEARTH_WHISPER_BUILD_DIR: '/opt/my-whisper' })
  })
})
