/**
 * `POST /api/create`, as `ollama create NAME -f Modelfile` sends it: FROM a model Hearth serves (by
 * its name), or GGUF files uploaded as blobs, with the Modelfile's PARAMETER, SYSTEM, MESSAGE,
 * TEMPLATE, ADAPTER, LICENSE and REQUIRES. The new model is a catalog entry: the base's weights
 * are never copied, and what the Modelfile adds is the entry's `modelfile`.
 */
import { link, mkdir, rm, stat } from 'node:fs/promises'
import { dirname, join, relative } from 'node:path'
import { z } from 'zod'
import type { ModelfileEntry } from '../../../../models/catalog/catalog-schema.ts'
import { addCatalogEntry, editCatalog, readCatalogEntries, removeCatalogEntries } from '../../../../models/catalog/catalog-writer.ts'
import { readGgufMetadata } from '../../../../models/catalog/gguf-metadata.ts'
import type { ModelFolder } from '../../../../models/catalog/model-folder.ts'
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import { importModel } from '../../../../models/downloads/model-import.ts'
import type { Notices } from '../../services/pipeline/request-notices.ts'
import { ollamaFieldDecisions } from '../field-decisions.ts'
import type { OllamaBlobs } from './ollama-blobs.ts'
import { OllamaError } from './ollama-errors.ts'
import { ollamaSampling } from './ollama-options.ts'
import { modelNamed, requireOllamaModel } from './ollama-names.ts'

export const ollamaCreateSchema = z.looseObject({
  model: z.string().nullish(),
  name: z.string().nullish(),
  stream: z.boolean().nullish(),
  from: z.string().nullish(),
  files: z.record(z.string(), z.string()).nullish(),
  adapters: z.record(z.string(), z.string()).nullish(),
  template: z.string().nullish(),
  license: z.union([z.string(), z.array(z.string())]).nullish(),
  system: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  messages: z.array(z.looseObject({ role: z.string(), content: z.string().nullish() })).nullish(),
  requires: z.string().nullish(),
})

export type OllamaCreateBody = z.infer<typeof ollamaCreateSchema>

/** The smallest context a Modelfile may ask for (llama.cpp's own floor for a usable prompt). */
const MIN_CONTEXT = 16

export interface CreateDeps {
  folder: ModelFolder
  blobs: OllamaBlobs
  /** Where uploads wait while they are linked into the models folder. */
  stagingDir: string
  notices: Notices
}

/** Makes the model; `status` is told each step, in Ollama's progress words. */
export async function createOllamaModel(body: OllamaCreateBody, deps: CreateDeps, status: (text: string) => void): Promise<void> {
  // The command line sends `model` and `name`, one of them empty.
  const requested = body.model || body.name
  if (!requested) throw new OllamaError(400, 'model is required')
  // Named as Hearth names its own models: `persona`, listed by Ollama's API as `persona:latest`, and found by either.
  const id = requested.endsWith(':latest') ? requested.slice(0, -':latest'.length) : requested
  // Made again from an edited Modelfile, a model is replaced, as in Ollama; any other model of that
  // name (a download, another program's) is never dropped to make room.
  const existing = await modelNamed(deps.folder, id)
  const madeByModelfile = (entry: unknown) =>
    (entry as { id?: unknown } | null)?.id === existing?.id && (entry as { modelfile?: unknown }).modelfile !== undefined
  if (existing && !(await readCatalogEntries(deps.folder.dir)).some(madeByModelfile))
    throw new OllamaError(400, `a model named '${id}' already exists: remove it first (ollama rm ${id}), or pick another name`)
  const ggufs = Object.entries(body.files ?? {}).filter(([file]) => /\.gguf$/i.test(file))
  if (Object.keys(body.files ?? {}).length > ggufs.length) {
    throw new OllamaError(
      400,
      'Hearth creates models from GGUF files: safetensors and other weights need converting to GGUF first (llama.cpp convert_hf_to_gguf.py)',
    )
  }
  if (ggufs.length === 0 && !body.from) throw new OllamaError(400, 'no model to create from: the Modelfile needs FROM (a model name or a GGUF file)')

  status('parsing modelfile')
  // FROM an uploaded blob by its digest is FROM that file.
  const blob = /^@?(sha256[:-][0-9a-f]{64})$/.exec(body.from ?? '')?.[1]
  if (blob) ggufs.push(['model.gguf', blob.replace('-', ':')])
  if (ggufs.length > 0) {
    const modelfile = await modelfileOf(body, undefined, deps)
    // Every check is done: the model it replaces goes, and the new one takes its name.
    if (existing) await removeCatalogEntries(deps.folder.dir, madeByModelfile)
    await createFromFiles(id, ggufs, modelfile, deps, status)
  } else {
    const base = await requireOllamaModel(deps.folder, body.from)
    if (base.remote) throw new OllamaError(400, `'${body.from}' runs on another machine: a model made from it is added in models.json ("remote")`)
    if (base.kind !== 'chat' && (body.system || body.messages?.length))
      throw new OllamaError(400, `'${body.from}' is not a chat model: SYSTEM and MESSAGE need one`)
    const modelfile = await modelfileOf(body, base, deps)
    await createFrom(id, base, modelfile, deps, existing ? madeByModelfile : undefined)
  }
  // The next request sees the new model (and not the one it replaced), however young the last scan.
  await deps.folder.cachedScan(0)
  status('writing manifest')
}

/**
 * What the Modelfile adds, over the base's own (for a model made FROM another): each part replaces
 * the base's, and parameters replace the base's one by one, as Ollama's create does.
 */
async function modelfileOf(
  body: OllamaCreateBody,
  base: ModelRecord | undefined,
  deps: CreateDeps,
): Promise<{ modelfile: ModelfileEntry; contextLength: number | undefined }> {
  const inherited = base?.ollama
  const parameters = { ...(inherited?.parameters ?? {}), ...(body.parameters ?? {}) }
  const { num_ctx: numCtx, ...sampling } = parameters
  checkParameters(sampling, deps.notices)
  const contextLength = numCtx === undefined ? base?.catalogEntry?.context_length : contextOf(numCtx)
  const template = await templateOf(body.template, base)
  const messages = body.messages?.length ? body.messages.map((m, i) => messageOf(m, i)) : inherited?.messages?.map((m, i) => messageOf(m, i))
  const license = body.license == null ? inherited?.license : typeof body.license === 'string' ? [body.license] : body.license
  const system = body.system ?? inherited?.system
  const adapters = await adaptersOf(body.adapters ?? {}, deps)
  const modelfile: ModelfileEntry = {
    ...(body.from ? { parent: body.from } : {}),
    ...(system ? { system } : {}),
    ...(template !== undefined ? { template } : {}),
    ...(Object.keys(parameters).length ? { parameters } : {}),
    ...(messages?.length ? { messages } : {}),
    ...(license?.length ? { license } : {}),
    ...(adapters.length ? { adapters } : {}),
    ...(body.requires ? { requires: body.requires } : {}),
    created_at: new Date().toISOString(),
  }
  return { modelfile, contextLength }
}

/** Each parameter is one Ollama's options know, checked as a request's options are; refused ones by name. */
function checkParameters(parameters: Record<string, unknown>, notices: Notices): void {
  const decisions = ollamaFieldDecisions('options')
  for (const name of Object.keys(parameters)) {
    if (!decisions.has(name)) throw new OllamaError(400, `unknown parameter '${name}'`)
  }
  // The same checks (types, ranges, refusals) as a request's options get.
  ollamaSampling(parameters, undefined, notices)
}

function contextOf(value: unknown): number {
  const n = typeof value === 'string' ? Number(value) : value
  if (typeof n !== 'number' || !Number.isInteger(n) || n < MIN_CONTEXT)
    throw new OllamaError(400, `parameter 'num_ctx' must be a whole number of tokens, at least ${MIN_CONTEXT}`)
  return n
}

function messageOf(m: { role: string; content?: string | null | undefined }, i: number): { role: 'system' | 'user' | 'assistant'; content: string } {
  const role = m.role.toLowerCase()
  if (role !== 'system' && role !== 'user' && role !== 'assistant')
    throw new OllamaError(400, `MESSAGE ${i + 1}: the role must be system, user or assistant, not '${m.role}'`)
  return { role, content: m.content ?? '' }
}

/**
 * TEMPLATE: the model's own template is kept as it is (a Modelfile that `ollama show --modelfile`
 * wrote names it again); a Jinja template replaces the file's; a different Go template is refused:
 * llama.cpp, which writes Hearth's prompts and reads the model's tool calls, runs Jinja only.
 */
async function templateOf(template: string | null | undefined, base: ModelRecord | undefined): Promise<string | undefined> {
  if (!template?.trim()) return base?.catalogEntry?.modelfile?.template
  const own = base ? [base.chatTemplate, base.ollama?.template, await fileTemplate(base)] : []
  if (own.some((t) => t !== undefined && t.trim() === template.trim())) return base?.catalogEntry?.modelfile?.template
  if (isGoTemplate(template)) {
    throw new OllamaError(
      400,
      "TEMPLATE is not supported as a Go template: Hearth writes prompts with llama.cpp, which runs Jinja chat templates (the model's own, in its GGUF); leave TEMPLATE out to use the model's own, or write it in Jinja",
    )
  }
  return template
}

async function fileTemplate(model: ModelRecord): Promise<string | undefined> {
  const value = (await readGgufMetadata(model.path).catch(() => undefined))?.['tokenizer.chat_template']
  return typeof value === 'string' ? value : undefined
}

/** Ollama's templates speak of `.Prompt`, `.System`, `.Messages`, `.Response`; Jinja of `messages` with `{%`. */
function isGoTemplate(template: string): boolean {
  return /\{\{-?\s*(\.|range\s+\.|if\s+\.|\$)/.test(template) || !/\{%/.test(template)
}

/** ADAPTER: each LoRA (a GGUF of type adapter) linked into the models folder's own adapters. */
async function adaptersOf(adapters: Record<string, string>, deps: CreateDeps): Promise<string[]> {
  const placed: string[] = []
  for (const [file, digest] of Object.entries(adapters)) {
    if (!(await deps.blobs.has(digest))) throw new OllamaError(400, `blob ${digest} was not uploaded (POST /api/blobs/${digest} first)`)
    const type = (await readGgufMetadata(deps.blobs.pathOf(digest)).catch(() => undefined))?.['general.type']
    if (type !== 'adapter')
      throw new OllamaError(
        400,
        `ADAPTER ${file} is not a LoRA adapter in GGUF (general.type is ${type === undefined ? 'missing' : `'${String(type)}'`}); convert it with llama.cpp's convert_lora_to_gguf.py`,
      )
    const name = `${digest.replace(':', '-')}.gguf`
    const path = join(deps.folder.dir, ADAPTERS_DIR, name)
    await mkdir(dirname(path), { recursive: true })
    await link(deps.blobs.pathOf(digest), path).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'EEXIST') throw e
    })
    placed.push(`${ADAPTERS_DIR}/${name}`)
  }
  return placed
}

/** Where adapters live in the models folder: a dot folder, which the scan does not serve as models. */
export const ADAPTERS_DIR = '.adapters'

/** FROM a model by name: a new entry on the same weights (the file itself, or the base's name where Hearth only reads its store). */
async function createFrom(
  id: string,
  base: ModelRecord,
  made: { modelfile: ModelfileEntry; contextLength: number | undefined },
  deps: CreateDeps,
  replaces: ((entry: unknown) => boolean) | undefined,
): Promise<void> {
  const entry = base.catalogEntry
  const inFolder = !base.source && !entry?.from
  const weights = inFolder
    ? { file: relative(deps.folder.dir, base.path), ...(base.projectorPath ? { mmproj: relative(deps.folder.dir, base.projectorPath) } : {}) }
    : { from: entry?.from ?? base.id }
  // A file the folder found (no entry of its own) gets one first: an entry claims its file, which would hide the old name.
  if (inFolder && !entry) await addCatalogEntry(deps.folder.dir, { id: base.id, ...weights })
  // How the base is served (its output limit, threads, draft model, time to live …) is the new
  // model's too, as `ollama cp` keeps it: only the name, the context and the Modelfile are its own.
  const {
    id: _id,
    file: _file,
    mmproj: _mmproj,
    from: _from,
    modelfile: _modelfile,
    context_length: _context,
    ...settings
  } = (entry ?? {}) as Record<string, unknown>
  const entryOfModel = {
    id,
    ...weights,
    ...settings,
    ...(made.contextLength !== undefined ? { context_length: made.contextLength } : {}),
    modelfile: made.modelfile,
  }
  // One write: the model made again takes the old one's place, and no moment lacks either.
  await editCatalog(deps.folder.dir, (models) => {
    const at = replaces ? models.findIndex(replaces) : -1
    if (at >= 0) models.splice(at, 1, entryOfModel)
    else models.push(entryOfModel)
  })
}

/** FROM GGUF files uploaded as blobs: linked into the models folder (a projector beside the model), then named. */
async function createFromFiles(
  id: string,
  ggufs: Array<[string, string]>,
  made: { modelfile: ModelfileEntry; contextLength: number | undefined },
  deps: CreateDeps,
  status: (text: string) => void,
): Promise<void> {
  const [projectorFile] = ggufs.filter(([file]) => /mmproj/i.test(file))
  const [modelFile] = ggufs.filter(([file]) => !/mmproj/i.test(file))
  if (!modelFile) throw new OllamaError(400, 'no model GGUF among files (only a projector)')
  status('parsing GGUF')
  const staging = join(deps.stagingDir, `create-${process.pid}-${Date.now()}`)
  await mkdir(staging, { recursive: true })
  try {
    // Named by their digest, so the same upload made into another model is the same file.
    const nameOf = ([file, digest]: [string, string]) =>
      `${file
        .split('/')
        .pop()!
        .replace(/\.gguf$/i, '')
        .replace(/[^\w.-]/g, '-')}-${digest.slice(7, 19)}.gguf`
    const inFolder = async (blob: [string, string]) => (await stat(join(deps.folder.dir, nameOf(blob))).catch(() => undefined))?.isFile() === true
    const placed = async (blob: [string, string]) => {
      if (!(await deps.blobs.has(blob[1]))) throw new OllamaError(400, `blob ${blob[1]} was not uploaded (POST /api/blobs/${blob[1]} first)`)
      const path = join(staging, nameOf(blob))
      await link(deps.blobs.pathOf(blob[1]), path)
      return path
    }
    const entry = { ...(made.contextLength !== undefined ? { context_length: made.contextLength } : {}), modelfile: made.modelfile }
    if ((await inFolder(modelFile)) && (!projectorFile || (await inFolder(projectorFile)))) {
      await addCatalogEntry(deps.folder.dir, { id, file: nameOf(modelFile), ...(projectorFile ? { mmproj: nameOf(projectorFile) } : {}), ...entry })
    } else {
      const path = await placed(modelFile)
      const mmproj = projectorFile ? await placed(projectorFile) : undefined
      await importModel(deps.folder, { path, mode: 'link', id, ...(mmproj ? { mmproj } : {}), entry })
    }
    await rm(deps.blobs.pathOf(modelFile[1]), { force: true })
    if (projectorFile) await rm(deps.blobs.pathOf(projectorFile[1]), { force: true })
  } finally {
    await rm(staging, { recursive: true, force: true })
  }
}
