/**
 * Copy text. In the desktop app the main process copies (the page has no clipboard permission).
 * The Clipboard API needs a secure context (https or localhost); a page opened over the LAN at
 * http://192.168.x.y is not one, so fall back to a selected textarea there.
 */
import { desktopBridge } from './bridge.ts'

export async function copyText(text: string): Promise<void> {
  const bridge = desktopBridge()
  if (bridge) {
    await bridge.copyText(text)
    return
  }
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text)
    return
  }
  const area = document.createElement('textarea')
  area.value = text
  area.setAttribute('readonly', '')
  area.className = 'offscreen'
  document.body.append(area)
  area.select()
  try {
    if (!document.execCommand('copy')) throw new Error('The browser refused to copy')
  } finally {
    area.remove()
  }
}
