/** The desktop app's own choices (not the server's settings), kept in <data-dir>/desktop.json. */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { writeFileAtomically } from '../server/services/atomic-write.ts'

export interface DesktopPrefs {
  keepRunningInTray: boolean
  /** Listen on every interface so other computers can reach the server. */
  lan: boolean
  /** Serve what Ollama serves on its port (11434, where it is free), for the programs written for Ollama: on unless switched off. */
  ollama: boolean
  /** Lend this computer's memory to other Hearths' pooled models. */
  lend: boolean
}

export const DEFAULT_PREFS: DesktopPrefs = { keepRunningInTray: true, lan: false, ollama: true, lend: false }

export class DesktopPreferences {
  private current: DesktopPrefs = { ...DEFAULT_PREFS }
  private readonly file: string

  constructor(dataDir: string) {
    this.file = join(dataDir, 'desktop.json')
  }

  get value(): DesktopPrefs {
    return { ...this.current }
  }

  async load(): Promise<DesktopPrefs> {
    try {
      const parsed = JSON.parse(await readFile(this.file, 'utf8')) as Partial<DesktopPrefs>
      this.current = {
        keepRunningInTray: typeof parsed.keepRunningInTray === 'boolean' ? parsed.keepRunningInTray : DEFAULT_PREFS.keepRunningInTray,
        lan: typeof parsed.lan === 'boolean' ? parsed.lan : DEFAULT_PREFS.lan,
        ollama: typeof parsed.ollama === 'boolean' ? parsed.ollama : DEFAULT_PREFS.ollama,
        lend: typeof parsed.lend === 'boolean' ? parsed.lend : DEFAULT_PREFS.lend,
      }
    } catch {
      this.current = { ...DEFAULT_PREFS }
    }
    return this.value
  }

  async update(change: Partial<DesktopPrefs>): Promise<DesktopPrefs> {
    this.current = { ...this.current, ...change }
    // Flushed before it takes the old file's place: a crash leaves the old choices or the new, whole.
    await writeFileAtomically(this.file, `${JSON.stringify(this.current, null, 2)}\n`)
    return this.value
  }
}
