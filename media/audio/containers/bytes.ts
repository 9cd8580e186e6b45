/** Small readers shared by the container parsers. All of them tolerate reading past the end (they return 0 / ''). */

export function ascii(bytes: Uint8Array, start: number, length: number): string {
  let text = ''
  for (let i = start; i < start + length && i < bytes.length; i++) text += String.fromCharCode(bytes[i]!)
  return text
}

export function hasAscii(bytes: Uint8Array, at: number, text: string): boolean {
  if (at < 0 || at + text.length > bytes.length) return false
  for (let i = 0; i < text.length; i++) if (bytes[at + i] !== text.charCodeAt(i)) return false
  return true
}

export function u16le(bytes: Uint8Array, at: number): number {
  return (bytes[at] ?? 0) | ((bytes[at + 1] ?? 0) << 8)
}

export function u32le(bytes: Uint8Array, at: number): number {
  return (u16le(bytes, at) + u16le(bytes, at + 2) * 0x10000) >>> 0
}

export function u16be(bytes: Uint8Array, at: number): number {
  return ((bytes[at] ?? 0) << 8) | (bytes[at + 1] ?? 0)
}

export function u32be(bytes: Uint8Array, at: number): number {
  return (u16be(bytes, at) * 0x10000 + u16be(bytes, at + 2)) >>> 0
}

export function u64be(bytes: Uint8Array, at: number): number {
  return u32be(bytes, at) * 0x1_0000_0000 + u32be(bytes, at + 4)
}
