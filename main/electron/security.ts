/**
 * Electron's security checklist, applied to every web contents the app makes: no navigation away
 * from the app's page, no new windows (web links open in the browser), no webviews, and every
 * permission refused except the microphone (and reaching the embedded server on loopback) for our
 * own page.
 */
import type { Session, WebContents } from 'electron'
import { APP_ORIGIN } from './app-protocol.ts'

/** Permissions our page may have. Copying goes through the preload, so clipboard is not one. */
const ALLOWED_FOR_APP = new Set(['media', 'loopback-network', 'local-network-access'])

export function isAppUrl(url: string | undefined): boolean {
  if (!url) return false
  try {
    const parsed = new URL(url)
    return `${parsed.protocol}//${parsed.host}` === APP_ORIGIN
  } catch {
    return false
  }
}

interface PermissionDetails {
  requestingUrl?: string
  mediaTypes?: Array<'video' | 'audio'>
}

/** One decision for requests and checks: the microphone, never the camera, only for our page. */
export function permissionAllowed(permission: string, requestingUrl: string | undefined, details: PermissionDetails = {}): boolean {
  if (!ALLOWED_FOR_APP.has(permission) || !isAppUrl(requestingUrl)) return false
  if (permission === 'media') return (details.mediaTypes ?? []).every((t) => t === 'audio')
  return true
}

export function hardenSession(session: Session): void {
  session.setPermissionRequestHandler((_contents, permission, callback, details) => {
    const media = details as PermissionDetails
    // The callback must be called exactly once on every path, or the request hangs.
    callback(permissionAllowed(permission, details.requestingUrl, media))
  })
  session.setPermissionCheckHandler((_contents, permission, requestingOrigin, details) =>
    permissionAllowed(permission, details.requestingUrl ?? requestingOrigin, {
      ...(details.mediaType === 'video' ? { mediaTypes: ['video'] } : details.mediaType === 'audio' ? { mediaTypes: ['audio'] } : {}),
    }),
  )
}

/** Web links: opened in the person's browser; anything else (file:, app:, javascript:) nowhere. */
export function externalUrl(url: string): string | undefined {
  try {
    const parsed = new URL(url)
    return parsed.protocol === 'https:' || parsed.protocol === 'http:' ? parsed.href : undefined
  } catch {
    return undefined
  }
}

export function hardenContents(contents: WebContents, openExternal: (url: string) => void): void {
  const stayInApp = (event: { preventDefault(): void }, url: string) => {
    if (!isAppUrl(url)) event.preventDefault()
  }
  contents.on('will-navigate', stayInApp)
  contents.on('will-redirect', stayInApp)
  contents.on('will-attach-webview', (event) => event.preventDefault())
  contents.setWindowOpenHandler(({ url }) => {
    const external = externalUrl(url)
    if (external) openExternal(external)
    return { action: 'deny' }
  })
}
