// Entry point of the audio decode worker thread, in plain JavaScript on purpose: a worker does not
// always inherit the parent's TypeScript loader (it does under the `tsx` CLI, it does not under
// vitest or an embedder). If this thread cannot load .ts files, tsx's scoped import loads them.
const workerModule = new URL('./decode-audio.worker.ts', import.meta.url).href

// Node 22.18 and later strip types by themselves, but only the erasable ones: a file with a
// parameter property fails with ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX, and tsx loads it instead.
const NEEDS_TSX = new Set(['ERR_UNKNOWN_FILE_EXTENSION', 'ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX'])

try {
  await import(workerModule)
} catch (error) {
  if (!NEEDS_TSX.has(error?.code)) throw error
  const { tsImport } = await import('tsx/esm/api')
  await tsImport(workerModule, import.meta.url)
}
