/**
 * Where the models Hearth pulls by name live: `<models folder>/ollama`, in Ollama's own layout
 * (`manifests/<host>/<namespace>/<model>/<tag>`, `blobs/sha256-<hex>`). Hearth writes there and
 * only there: Ollama's own store (`~/.ollama/models`, `$OLLAMA_MODELS`) is another program's, which
 * Hearth reads and never writes. Because the layout is Ollama's, `OLLAMA_MODELS=<models>/ollama`
 * lets Ollama run them too, and the reader of Ollama's store (ollama-store.ts) lists them.
 */
import { join } from 'node:path'

export const PULLED_OLLAMA_DIR = 'ollama'

export function pulledOllamaDir(modelsDir: string): string {
  return join(modelsDir, PULLED_OLLAMA_DIR)
}
