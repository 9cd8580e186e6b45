// Entry point of the audio decode worker thread, in plain JavaScript on purpose: a worker does not
// always inherit the parent's TypeScript loader (it does under the `tsx` CLI, it does not under
// vitest or an embedder). If this thread cannot load .ts files, tsx's scoped import loads them.
const workerModule = new URL('./decode-audio.worker.ts', import.meta.url).href

try {
  await import(workerModule)
} catch (error) {
  if (error?.code !== 'ERR_UNKNOWN_FILE_EXTENSION') throw error
  const { tsImport } = await import('tsx/esm/api')
  await tsImport(workerModule, import.meta.url)
}
