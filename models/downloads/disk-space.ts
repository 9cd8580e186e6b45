import { statfs } from 'node:fs/promises'

/** Bytes this user may still write on the disk that holds `dir`. */
export async function freeDiskBytes(dir: string): Promise<number> {
  const stats = await statfs(dir)
  return stats.bavail * stats.bsize
}
