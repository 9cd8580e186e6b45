/**
 * `npm run models -- pull|list|rm|import|recommended`: the models folder from the command line. It
 * works on the folder directly (same settings as the server), so no server has to run.
 */
import { availableParallelism } from 'node:os'
import { readdirSync, statSync } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { join, relative } from 'node:path'
import { parseArgs } from 'node:util'
import { CatalogWriteError } from '../../models/catalog/catalog-writer.ts'
import { ModelFolder } from '../../models/catalog/model-folder.ts'
import { recommendedModels } from '../../models/catalog/recommended-models.ts'
import { isDownloadError } from '../../models/downloads/download-error.ts'
import { PARTIAL_DIR } from '../../models/downloads/download-job.ts'
import type { DownloadSnapshot } from '../../models/downloads/managed-download.ts'
import { DownloadManager } from '../../models/downloads/download-manager.ts'
import { importModel } from '../../models/downloads/model-import.ts'
import { ollamaProgressLine, pullOllamaModel } from '../../models/downloads/ollama-pull.ts'
import { parsePullName, type PullName } from '../../models/downloads/ollama-pull-name.ts'
import { formatBytes } from '../../models/format-bytes.ts'
import { removeModel } from '../../models/downloads/model-removal.ts'
import { resolveSettings, SettingsError } from '../server/settings.ts'

const USAGE = `Usage: npm run models -- <command> [options]

  pull <hf://owner/repo/file.gguf | https://…> [--mmproj REF] [--id ID]
                          download a model (and its projector) into the models folder;
                          run it again after an interruption to resume
  pull <name> [--insecure]
                          a model of Ollama's library by its name (qwen3:0.6b, user/model:tag,
                          host:port/namespace/model:tag; --insecure for a plain-http registry),
                          into the folder's ollama/ store, in Ollama's layout
  list                    the models in the folder (and unfinished downloads)
  rm <id>                 remove a model: its catalog entry and the files it owns
  import <path> [--link] [--id ID] [--mmproj PATH]
                          copy (or hard-link) a model file into the folder
  recommended             models to start with, ready to pull

  --models-dir DIR, --data-dir DIR, --settings FILE: as for \`npm run serve\` (also HEARTH_MODELS_DIR, …)
  HEARTH_HF_ENDPOINT      another hub (a mirror); HF_TOKEN for gated repositories
`

class UsageError extends Error {}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    args: process.argv.slice(2),
    allowPositionals: true,
    strict: true,
    options: {
      mmproj: { type: 'string' },
      id: { type: 'string' },
      link: { type: 'boolean' },
      insecure: { type: 'boolean' },
      'models-dir': { type: 'string' },
      'data-dir': { type: 'string' },
      settings: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  })
  const [command, ...args] = positionals
  if (values.help || !command) {
    console.log(USAGE)
    return command || values.help ? 0 : 2
  }
  const settingsArgs = (['models-dir', 'data-dir', 'settings'] as const).flatMap((k) => (values[k] === undefined ? [] : [`--${k}`, values[k]!]))
  const { settings } = resolveSettings(settingsArgs, process.env, availableParallelism())
  const folder = new ModelFolder(settings.modelsDir, { sources: settings.modelSources })
  await mkdir(folder.dir, { recursive: true })

  const one = (what: string) => {
    if (args.length !== 1) throw new UsageError(`${command} takes one ${what}`)
    return args[0]!
  }
  switch (command) {
    case 'pull': {
      const reference = one('reference')
      const named = parsePullName(reference, 'reference')
      if (named.kind === 'registry') {
        if (values.mmproj !== undefined || values.id !== undefined)
          throw new UsageError('a model pulled by its Ollama name keeps that name and its own projector: --mmproj and --id do not apply')
        return pullByName(folder, named, values.insecure === true)
      }
      if (named.kind === 'huggingface') throw new UsageError(`name the GGUF file: hf://${named.owner}/${named.repo}/<file>.gguf`)
      return pull(folder, reference, values.mmproj, values.id)
    }
    case 'list':
      return list(folder)
    case 'rm':
    case 'remove': {
      const removed = await removeModel(folder, one('model id'))
      console.log(`removed ${removed.id}${removed.files.length ? ` (deleted ${removed.files.join(', ')})` : ''}`)
      return 0
    }
    case 'import': {
      const imported = await importModel(folder, { path: one('path'), mode: values.link ? 'link' : 'copy', id: values.id, mmproj: values.mmproj })
      console.log(`imported ${imported.id} (${imported.file}${imported.mmproj ? ` + ${imported.mmproj}` : ''}) into ${folder.dir}`)
      return 0
    }
    case 'recommended':
      for (const m of recommendedModels()) {
        console.log(`${m.id}  (${m.kind}, ${formatBytes(m.size_bytes)})\n  ${m.description}`)
        console.log(`  npm run models -- pull ${m.source}${m.mmproj_source ? ` --mmproj ${m.mmproj_source}` : ''} --id ${m.id}\n`)
      }
      return 0
    default:
      throw new UsageError(`unknown command "${command}"`)
  }
}

async function pull(folder: ModelFolder, source: string, mmproj: string | undefined, id: string | undefined): Promise<number> {
  const downloads = new DownloadManager({ folder })
  const job = await downloads.pull({ source, mmproj, id })
  const progress = process.stdout.isTTY ? new ProgressBar() : new ProgressLines()
  job.subscribe((s) => progress.update(s))
  let interrupted = false
  const onSignal = () => {
    interrupted = true
    job.interrupt()
  }
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)
  const done = await job.finished
  progress.finish(done)
  if (interrupted) {
    console.error('interrupted: run the same command again to resume')
    return 130
  }
  if (done.state !== 'done') {
    console.error(`hearth: ${done.error ?? done.state}`)
    return 1
  }
  console.log(`${done.modelId}: ${formatBytes(done.total ?? done.bytes)} in ${folder.dir}`)
  return 0
}

/** `ollama pull`'s lines: each step once, a blob's progress on one line (on a terminal) or every tenth. */
async function pullByName(folder: ModelFolder, name: Extract<PullName, { kind: 'registry' }>, insecure: boolean): Promise<number> {
  const controller = new AbortController()
  const onSignal = () => controller.abort()
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)
  const tty = process.stdout.isTTY
  const shown = new Map<string, number>()
  try {
    for await (const event of pullOllamaModel(name, { modelsDir: folder.dir, insecure, signal: controller.signal })) {
      const line = ollamaProgressLine(event)
      if (event.status !== 'pulling') {
        if (tty && shown.size > 0) process.stdout.write('\n')
        shown.clear()
        console.log(line.status)
        continue
      }
      const percent = event.total ? Math.floor((event.completed / event.total) * 100) : 100
      const text = `${line.status} ${String(percent).padStart(3)}% ${formatBytes(event.completed)}/${formatBytes(event.total)}${event.reused ? ` (from ${event.reused === 'ollama' ? "Ollama's store" : 'this folder'})` : ''}`
      if (tty) {
        if (shown.size > 0 && !shown.has(event.digest)) process.stdout.write('\n')
        process.stdout.write(`\r${text}\x1b[K`)
        shown.set(event.digest, percent)
      } else if ((shown.get(event.digest) ?? -1) < Math.floor(percent / 10) * 10 || (percent === 100 && shown.get(event.digest) !== 100)) {
        shown.set(event.digest, percent === 100 ? 100 : Math.floor(percent / 10) * 10)
        console.log(text)
      }
    }
  } catch (e) {
    if (tty && shown.size > 0) process.stdout.write('\n')
    if (controller.signal.aborted) {
      console.error('interrupted: run the same command again to resume')
      return 130
    }
    throw e
  } finally {
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
  }
  console.log(`${name.shortName}: in ${folder.dir}/ollama (OLLAMA_MODELS=${folder.dir}/ollama lets Ollama run it too)`)
  return 0
}

async function list(folder: ModelFolder): Promise<number> {
  const { models, broken, catalogProblem } = await folder.scan()
  console.log(`models folder: ${folder.dir}`)
  if (catalogProblem) console.log(`warning: ${catalogProblem}`)
  const rows = models.map((m) => [
    m.id,
    m.capabilities.join(','),
    formatBytes(m.sizeBytes + m.projectorSizeBytes),
    m.source ? `${m.path} (${m.source.kind}'s)` : relative(folder.dir, m.path),
  ])
  if (rows.length === 0) console.log('no models yet: try `npm run models -- recommended`')
  else printTable([['ID', 'CAN', 'SIZE', 'FILE'], ...rows])
  for (const b of broken) console.log(`cannot serve ${b.id}: ${b.problem}`)
  const partialDir = join(folder.dir, PARTIAL_DIR)
  let partials: string[] = []
  try {
    partials = readdirSync(partialDir).filter((f) => f.endsWith('.part'))
  } catch {
    // no unfinished downloads
  }
  for (const p of partials) {
    console.log(`unfinished download: ${p.replace(/\.[0-9a-f]{12}\.part$/, '')} (${formatBytes(statSync(join(partialDir, p)).size)}; pull it again to resume)`)
  }
  return 0
}

function printTable(rows: string[][]): void {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
  for (const r of rows) console.log(r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  '))
}

/** One line redrawn in place. */
class ProgressBar {
  private last = ''

  update(s: DownloadSnapshot): void {
    const width = 30
    const fraction = s.total ? Math.min(1, s.bytes / s.total) : 0
    const bar = s.total ? '█'.repeat(Math.round(fraction * width)).padEnd(width, '░') : '░'.repeat(width)
    const amount = s.total ? `${formatBytes(s.bytes)} / ${formatBytes(s.total)}` : formatBytes(s.bytes)
    const rate = s.rateBps > 0 ? `  ${formatBytes(s.rateBps)}/s` : ''
    const eta = s.etaSeconds !== null && s.state === 'downloading' ? `  ETA ${clock(s.etaSeconds)}` : ''
    const percent = s.total ? `${Math.floor(fraction * 100)}%`.padStart(4) : ''
    const line = `${s.file} ${bar} ${percent} ${amount}${rate}${eta}  ${s.state === 'downloading' ? '' : s.state}`.trimEnd()
    if (line === this.last) return
    this.last = line
    process.stdout.write(`\r\x1b[2K${line.slice(0, (process.stdout.columns || 120) - 1)}`)
  }

  finish(s: DownloadSnapshot): void {
    this.update(s)
    process.stdout.write('\n')
  }
}

/** For logs and pipes: a line per state change and every 10%. */
class ProgressLines {
  private state = ''
  private tenth = -1

  update(s: DownloadSnapshot): void {
    const tenth = s.total ? Math.floor((s.bytes / s.total) * 10) : -1
    if (s.state === this.state && tenth === this.tenth) return
    this.state = s.state
    this.tenth = tenth
    const amount = s.total ? `${formatBytes(s.bytes)} / ${formatBytes(s.total)} (${Math.floor((s.bytes / s.total) * 100)}%)` : formatBytes(s.bytes)
    console.log(`${s.file}: ${s.state} ${amount}${s.rateBps > 0 ? ` ${formatBytes(s.rateBps)}/s` : ''}`)
  }

  finish(s: DownloadSnapshot): void {
    this.update(s)
  }
}

function clock(seconds: number): string {
  const h = Math.floor(seconds / 3600)
  const m = Math.floor((seconds % 3600) / 60)
  const s = seconds % 60
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${String(s).padStart(2, '0')}` : `${m}:${String(s).padStart(2, '0')}`
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    if (e instanceof UsageError || (e as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
      console.error(`hearth: ${(e as Error).message}\n\n${USAGE}`)
      process.exit(2)
    }
    if (e instanceof SettingsError || e instanceof CatalogWriteError || isDownloadError(e)) {
      console.error(`hearth: ${(e as Error).message}`)
      process.exit(1)
    }
    console.error('hearth:', e)
    process.exit(1)
  },
)
