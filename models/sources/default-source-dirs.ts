/**
 * Where each program keeps the models it downloaded, as it decides itself from the environment.
 * Folders that do not exist yet are listed too: a store made after Hearth started is read from
 * the next scan on.
 */
import { readFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { isAbsolute, join } from 'node:path'
import type { ModelSourceDirs } from './external-model.ts'

export type { ModelSourceDirs }

/** Every store, where the environment puts it. */
export function defaultModelSources(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): ModelSourceDirs {
  const home = (platform === 'win32' ? env.USERPROFILE : env.HOME) || homedir()
  return {
    ollama: [ollamaDir(env, home)],
    lmstudio: lmStudioDirs(home),
    huggingface: [hubCacheDir(env, home)],
    'llama.cpp': [llamaCacheDir(env, home, platform)],
  }
}

/** Ollama's envconfig.Models(): `$OLLAMA_MODELS` (trimmed of spaces and quotes), else ~/.ollama/models. */
function ollamaDir(env: NodeJS.ProcessEnv, home: string): string {
  const set = env.OLLAMA_MODELS?.trim().replace(/^["']+|["']+$/g, '')
  return set || join(home, '.ollama', 'models')
}

/**
 * LM Studio's models folder: the one chosen in its settings (`downloadsFolder` in settings.json of
 * its home, which `~/.lmstudio-home-pointer` names where it is not ~/.lmstudio), and the defaults of
 * today (~/.lmstudio/models) and of versions before 0.3 (~/.cache/lm-studio/models).
 */
function lmStudioDirs(home: string): string[] {
  const pointer = readText(join(home, '.lmstudio-home-pointer'))?.trim()
  const lmStudioHome = pointer && isAbsolute(pointer) ? pointer : join(home, '.lmstudio')
  let chosen: string | undefined
  try {
    const folder = (JSON.parse(readText(join(lmStudioHome, 'settings.json')) ?? '{}') as { downloadsFolder?: unknown }).downloadsFolder
    if (typeof folder === 'string' && isAbsolute(folder)) chosen = folder
  } catch {
    // Settings LM Studio is writing, or never wrote: its default folders are read.
  }
  const dirs = [chosen, join(lmStudioHome, 'models'), join(home, '.lmstudio', 'models'), join(home, '.cache', 'lm-studio', 'models')]
  return [...new Set(dirs.filter((d): d is string => d !== undefined))]
}

/** huggingface_hub's constants: HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub. */
function hubCacheDir(env: NodeJS.ProcessEnv, home: string): string {
  if (env.HF_HUB_CACHE) return env.HF_HUB_CACHE
  if (env.HUGGINGFACE_HUB_CACHE) return env.HUGGINGFACE_HUB_CACHE
  if (env.HF_HOME) return join(env.HF_HOME, 'hub')
  return join(env.XDG_CACHE_HOME || join(home, '.cache'), 'huggingface', 'hub')
}

/** llama.cpp's fs_get_cache_directory(): $LLAMA_CACHE, else the platform's cache folder + llama.cpp. */
function llamaCacheDir(env: NodeJS.ProcessEnv, home: string, platform: NodeJS.Platform): string {
  if (env.LLAMA_CACHE) return env.LLAMA_CACHE
  if (platform === 'darwin') return join(home, 'Library', 'Caches', 'llama.cpp')
  if (platform === 'win32') return join(env.LOCALAPPDATA || join(home, 'AppData', 'Local'), 'llama.cpp')
  return join(env.XDG_CACHE_HOME || join(home, '.cache'), 'llama.cpp')
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return undefined
  }
}
