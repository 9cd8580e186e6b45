/**
 * Byte counts as people read them, in the decimal units disks and the web UI
 * (renderer/src/lib/services/format.ts) use. Here, in the lowest layer, so the model downloads,
 * the engine builder and the command line all write sizes the same way.
 */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB']
  let value = bytes
  let unit = 0
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000
    unit++
  }
  return `${unit === 0 ? value : value.toFixed(value < 10 ? 2 : 1)} ${units[unit]}`
}
