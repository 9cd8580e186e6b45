/**
 * The one Content-Security-Policy of Hearth's page, wherever it is served: by the server at `/`
 * (web-ui.ts) and by the desktop app through `app://hearth/` (main/electron/app-protocol.ts).
 * Scripts and styles only from the page's own origin, images and recordings as data or blob URLs
 * (attachments, previews), requests only back to where the page came from.
 */

/** `alsoConnectTo`: origins the page may send requests to besides its own. */
export function pageCsp(alsoConnectTo: readonly string[] = []): string {
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data: blob:",
    "media-src 'self' blob:",
    ["connect-src 'self'", ...alsoConnectTo].join(' '),
    "font-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ')
}
