/**
 * One scan of the models folder: `models.json` read and checked, the model files found beside it
 * (their headers cached by mtime and size, so a scan is cheap to repeat), projectors paired with
 * their models, the remote models the catalog names, and the models other programs downloaded
 * (models/sources/), served where they lie. model-folder.ts decides when to scan.
 */
import { readFile, readdir, stat } from 'node:fs/promises'
import { basename, dirname, extname, join, relative, resolve, sep } from 'node:path'
import { catalogEntrySchema, catalogFileSchema, type CatalogEntry } from './catalog-schema.ts'
import { baseModelOf, modelfileInfo } from './modelfile-models.ts'
import { llamaLoadProblem } from './llama-loadability.ts'
import { readModelFileHeader, type ModelFileHeader } from './model-file-header.ts'
import type { BrokenModel, FolderSnapshot, ModelRecord, ModelShape } from './model-record.ts'
import { capabilitiesOf, kindFromArchitecture, templateCallsTools, templateThinks, type ModelKind } from './model-kinds.ts'
import { remoteRecords, type RemoteListings } from './remote-records.ts'
import type { RemoteReplica } from './remote-target.ts'
import { ExternalSources } from '../sources/external-sources.ts'
import type { ExternalModel, ModelSourceDirs } from '../sources/external-model.ts'
import { pulledOllamaDir } from '../sources/pulled-store.ts'
import { sourceName } from '../sources/source-names.ts'

export const CATALOG_FILE = 'models.json'
const MODEL_EXTENSIONS = new Set(['.gguf', '.bin'])
const MAX_DISCOVERY_DEPTH = 3
const DEFAULT_CONTEXT = 4096
/**
 * What one answer may run to where the catalog says nothing (or less where the context is smaller).
 * Agents ask for 32,000 whatever the model (Claude Code, OpenCode, Qwen Code, Kilo) or nothing at
 * all (Codex, Aider); a CPU writing 14 tokens a second (the real-size 1.1B model in the bench)
 * writes 8,192 in under the 600 s request limit, enough for a file of several hundred lines in one
 * tool call. A turn that runs away (small models loop) then ends with `length` and an answer
 * instead of a cut stream. `max_completion_tokens` in models.json raises it per model.
 */
export const DEFAULT_MAX_COMPLETION_TOKENS = 8192
const ZERO_PRICE = '0.00000000'
/** A model file as it is now: what an engine reported of it holds only while the file is unchanged. */
const fileStamp = (path: string, size: number, createdSeconds: number) => `${path}|${size}|${createdSeconds}`
/** Parts after the first of a split GGUF (`name-00002-of-00003.gguf`) are loaded through the first. */
const LATER_SPLIT_PART = /-0*([2-9]|[1-9]\d+)-of-\d+\.gguf$/

interface HeaderCacheEntry {
  mtimeMs: number
  size: number
  header: ModelFileHeader | Error
}

export interface FolderScanOptions {
  /** Watches the remote servers the catalog names, and says what they serve. */
  remotes?: RemoteListings
  /** Where remote keys are read from (their variables' names are in the catalog). */
  env?: NodeJS.ProcessEnv
  /**
   * Other programs' stores to serve models from, read only (`defaultModelSources(env)` gives them
   * all, where the environment puts them). Left out, none is read.
   */
  sources?: ModelSourceDirs
  /** The context a model gets where its entry sets none (`OLLAMA_CONTEXT_LENGTH`); no more than it was trained with. */
  defaultContextLength?: number
}

export class FolderScanner {
  readonly dir: string
  private readonly headers = new Map<string, HeaderCacheEntry>()
  /** The context an engine reported giving a model file (by path, size and time), where less than asked. */
  private readonly engineContext = new Map<string, number>()
  private readonly engineToolCalling = new Map<string, boolean>()
  private readonly external: ExternalSources

  constructor(
    dir: string,
    private readonly options: FolderScanOptions = {},
  ) {
    this.dir = resolve(dir)
    // The models pulled by name are the folder's own, in Ollama's layout: read whatever stores are on.
    this.external = new ExternalSources(options.sources ?? {}, { pulledOllama: pulledOllamaDir(this.dir) })
  }

  /** From the next scan on, the model's file gets the context its engine gives it. */
  noteEngineContext(model: ModelRecord, contextLength: number): void {
    this.engineContext.set(fileStamp(model.path, model.sizeBytes, model.created), contextLength)
  }

  /** From the next scan on, whether the model's file calls tools is what its engine found. */
  noteEngineToolCalling(model: ModelRecord, callsTools: boolean): void {
    this.engineToolCalling.set(fileStamp(model.path, model.sizeBytes, model.created), callsTools)
  }

  async scan(): Promise<FolderSnapshot> {
    const { entries, problem: catalogProblem } = await this.readCatalog()
    const files = await this.listModelFiles()
    const models: ModelRecord[] = []
    const broken: BrokenModel[] = []
    const takenIds = new Set<string>()
    const claimedFiles = new Set<string>()
    /** Voice-activity models: not served, but used by every speech model. */
    const vadModels: string[] = []
    const remoteReplicas: RemoteReplica[] = []
    const derived: CatalogEntry[] = []

    for (const raw of entries) {
      const parsed = catalogEntrySchema.safeParse(raw)
      if (!parsed.success) {
        const file = typeof (raw as { file?: unknown })?.file === 'string' ? (raw as { file: string }).file : '?'
        broken.push({ id: idOf(raw) ?? file, file, problem: `models.json entry is invalid: ${describeZodError(parsed.error)}` })
        continue
      }
      const entry = parsed.data
      // Made by a Modelfile from another model by name: served once every other model is known.
      if (entry.from !== undefined) {
        derived.push(entry)
        continue
      }
      if (entry.file === undefined) {
        const remote = this.remoteModels(entry, takenIds)
        models.push(...remote.models)
        broken.push(...remote.broken)
        remoteReplicas.push(...remote.replicas)
        continue
      }
      const file = entry.file
      const path = this.resolveInside(file)
      const id = entry.id ?? fileStemId(this.dir, path ?? file)
      if (path) claimedFiles.add(path)
      const projectorPath = entry.mmproj ? this.resolveInside(entry.mmproj) : undefined
      if (projectorPath) claimedFiles.add(projectorPath)
      if (takenIds.has(id)) {
        broken.push({ id, file: file, problem: `duplicate model id "${id}" in models.json` })
        continue
      }
      takenIds.add(id)
      if (!path) {
        broken.push({ id, file: file, problem: `file "${file}" is outside the models folder` })
        continue
      }
      if (entry.mmproj && !projectorPath) {
        broken.push({ id, file: file, problem: `mmproj "${entry.mmproj}" is outside the models folder` })
        continue
      }
      const draftPath = entry.draft ? this.resolveInside(entry.draft) : undefined
      if (entry.draft) {
        const problem = !draftPath ? 'is outside the models folder' : await this.draftProblem(draftPath)
        if (problem) {
          broken.push({ id, file: file, problem: `draft "${entry.draft}" ${problem}` })
          continue
        }
        claimedFiles.add(draftPath!)
      }
      // A pulled voice-activity model gets a catalog entry like any download.
      const header = await this.header(path)
      if (!(header instanceof Error) && header.format === 'vad-ggml') {
        vadModels.push(path)
        continue
      }
      const result = await this.describe(id, path, entry, projectorPath)
      if ('problem' in result) broken.push(result)
      else models.push(draftPath ? { ...result, draftPath } : result)
    }

    const unlisted = files.filter((f) => !claimedFiles.has(f))
    const projectors = await this.findProjectors(unlisted)
    for (const path of unlisted) {
      if (projectors.has(path)) continue
      const header = await this.header(path)
      if (!(header instanceof Error) && header.format === 'vad-ggml') vadModels.push(path)
      if (!(header instanceof Error) && (header.format === 'other-ggml' || header.format === 'vad-ggml')) continue
      const id = fileStemId(this.dir, path)
      if (takenIds.has(id)) continue
      takenIds.add(id)
      const result = await this.describe(id, path, undefined, undefined)
      if ('problem' in result) broken.push(result)
      else models.push(result)
    }

    await this.addExternalModels(models, broken, takenIds, projectors, new Set([...files, ...claimedFiles]))

    const projectorSizes = new Map<string, number>()
    for (const path of projectors.keys()) projectorSizes.set(path, (await stat(path).catch(() => ({ size: 0 }))).size)
    pairProjectors(models, projectors, projectorSizes)
    pairDraftModels(models)
    for (const entry of derived) {
      const result = await this.describeDerived(entry, models, takenIds)
      if ('problem' in result) broken.push(result)
      else models.push(result)
    }
    // Every speech model skips silence with the same detector: the first one, by file name.
    this.options.remotes?.track(remoteReplicas)
    vadModels.sort()
    const vadModelPath = vadModels[0]
    if (vadModelPath) for (const model of models) if (model.kind === 'speech') model.vadModelPath = vadModelPath
    models.sort((a, b) => a.id.localeCompare(b.id))
    return { models, broken, catalogProblem, vadModels }
  }

  private async readCatalog(): Promise<{ entries: unknown[]; problem: string | undefined }> {
    let text: string
    try {
      text = await readFile(join(this.dir, CATALOG_FILE), 'utf8')
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { entries: [], problem: undefined }
      return { entries: [], problem: `cannot read ${CATALOG_FILE}: ${(e as Error).message}` }
    }
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch (e) {
      return { entries: [], problem: `${CATALOG_FILE} is not valid JSON: ${(e as Error).message}` }
    }
    const parsed = catalogFileSchema.safeParse(json)
    if (!parsed.success) return { entries: [], problem: `${CATALOG_FILE} must be {"models": [...]}` }
    return { entries: parsed.data.models, problem: undefined }
  }

  private async listModelFiles(): Promise<string[]> {
    const found: string[] = []
    const walk = async (dir: string, depth: number): Promise<void> => {
      let names: import('node:fs').Dirent[]
      try {
        names = await readdir(dir, { withFileTypes: true })
      } catch {
        return
      }
      for (const d of names) {
        if (d.name.startsWith('.')) continue
        const full = join(dir, d.name)
        // A link is what it points at: people link the files they keep elsewhere (a dangling one is skipped).
        const target = d.isSymbolicLink() ? await stat(full).catch(() => undefined) : d
        if (target?.isDirectory() && depth < MAX_DISCOVERY_DEPTH) await walk(full, depth + 1)
        else if (target?.isFile() && MODEL_EXTENSIONS.has(extname(d.name).toLowerCase()) && !LATER_SPLIT_PART.test(d.name)) {
          found.push(full)
        }
      }
    }
    await walk(this.dir, 0)
    return found.sort()
  }

  /**
   * The models of other programs' stores, after the folder's own: on an id both use, the folder's
   * model is served and the other listed as shadowed. A file the folder serves itself (a store
   * inside the models folder) stays the folder's. Their projectors join the folder's, to pair by
   * the same rules.
   */
  private async addExternalModels(
    models: ModelRecord[],
    broken: BrokenModel[],
    takenIds: Set<string>,
    projectors: Map<string, ModelFileHeader | undefined>,
    ownFiles: Set<string>,
  ): Promise<void> {
    const listing = await this.external.list()
    const outside = (path: string) => !ownFiles.has(path)
    broken.push(...listing.problems)
    for (const path of listing.projectors.filter(outside)) {
      const header = await this.header(path)
      projectors.set(path, header instanceof Error ? undefined : header)
    }
    for (const model of listing.models.filter((m) => outside(m.path))) {
      if (takenIds.has(model.id)) {
        broken.push({
          id: model.id,
          file: model.path,
          problem: `a model of the models folder has the same id, so this one in ${sourceName(model.source)} is not served`,
          source: model.source,
        })
        continue
      }
      takenIds.add(model.id)
      const result = await this.describe(model.id, model.path, undefined, model.projectorPath, model)
      if ('problem' in result) broken.push({ ...result, source: model.source })
      else models.push(result)
    }
  }

  /** Projectors are CLIP GGUFs (or files named mmproj-*); they pair with models, never serve alone. */
  private async findProjectors(paths: string[]): Promise<Map<string, ModelFileHeader | undefined>> {
    const projectors = new Map<string, ModelFileHeader | undefined>()
    for (const path of paths) {
      const header = await this.header(path)
      const isClip = !(header instanceof Error) && header.format === 'gguf' && header.architecture === 'clip'
      if (isClip || basename(path).toLowerCase().startsWith('mmproj')) {
        projectors.set(path, header instanceof Error ? undefined : header)
      }
    }
    return projectors
  }

  private async describe(
    id: string,
    path: string,
    entry: CatalogEntry | undefined,
    projectorPath: string | undefined,
    external?: ExternalModel,
  ): Promise<ModelRecord | BrokenModel> {
    const file = this.fileName(path)
    let info: Awaited<ReturnType<typeof stat>>
    try {
      info = await stat(path)
    } catch {
      return { id, file, problem: `file "${file}" does not exist in ${external ? sourceName(external.source) : this.dir}` }
    }
    if (!info.isFile()) return { id, file, problem: `"${file}" is not a file` }
    const header = await this.header(path)
    if (header instanceof Error) return { id, file, problem: `"${file}" is not a usable model file: ${header.message}` }
    if (header.format === 'other-ggml' || header.format === 'vad-ggml') return { id, file, problem: `"${file}" is a ggml file but not a whisper model` }
    const loadProblem = header.format === 'gguf' ? llamaLoadProblem(header) : undefined
    if (loadProblem) return { id, file, problem: `"${file}" ${loadProblem}` }
    let projectorSizeBytes = 0
    if (projectorPath) {
      const projector = await this.header(projectorPath)
      if (projector instanceof Error) {
        return { id, file, problem: `mmproj "${this.fileName(projectorPath)}" is not usable: ${projector.message}` }
      }
      projectorSizeBytes = (await stat(projectorPath)).size
    }

    const kind: ModelKind = entry?.kind ?? (header.format === 'whisper-ggml' ? 'speech' : kindFromArchitecture(header.architecture, header.poolingType))
    const trained = header.format === 'gguf' ? header.trainedContext : header.textContext
    const fallback = this.options.defaultContextLength
    const asked = entry?.context_length ?? (fallback !== undefined ? Math.min(fallback, trained ?? fallback) : (trained ?? DEFAULT_CONTEXT))
    const { contextLength, contextNote } = this.contextOf(path, info, asked, header.format === 'gguf' ? trained : undefined)
    const maxCompletionTokens = Math.min(entry?.max_completion_tokens ?? DEFAULT_MAX_COMPLETION_TOKENS, contextLength)
    return {
      id,
      kind,
      capabilities: capabilitiesOf(
        kind,
        projectorPath !== undefined,
        this.engineToolCalling.get(fileStamp(path, info.size, Math.floor(info.mtimeMs / 1000))) ??
          (header.format === 'gguf' && templateCallsTools(header.chatTemplate)),
      ),
      path,
      projectorPath,
      ownedBy: entry?.owned_by ?? external?.ownedBy ?? 'local',
      created: Math.floor(info.mtimeMs / 1000),
      contextLength,
      ...(contextNote ? { contextNote } : {}),
      maxCompletionTokens,
      pricing: entry?.pricing ?? { prompt: ZERO_PRICE, completion: ZERO_PRICE },
      sizeBytes: info.size,
      architecture: header.format === 'gguf' ? header.architecture : 'whisper',
      embeddingLength: header.format === 'gguf' ? header.embeddingLength : undefined,
      hasChatTemplate: header.format === 'gguf' && header.chatTemplate !== undefined,
      shape: shapeOf(header),
      projectorSizeBytes,
      catalogEntry: entry,
      ...(external ? { source: external.source } : {}),
      ...(external?.ollama ? { ollama: external.ollama } : {}),
      ...(header.format === 'gguf' ? ggufFacts(header, kind) : {}),
      ...this.modelfileFacts(id, entry),
    }
  }

  /**
   * A model a Modelfile made FROM another by name: that model's file (its projector too), with this
   * entry's context and Modelfile. Not one of another program's store itself: Hearth wrote it, and
   * removes it alone.
   */
  private async describeDerived(entry: CatalogEntry, models: readonly ModelRecord[], takenIds: Set<string>): Promise<ModelRecord | BrokenModel> {
    const id = entry.id!
    if (takenIds.has(id)) return { id, file: entry.from!, problem: `duplicate model id "${id}" in models.json` }
    takenIds.add(id)
    const base = baseModelOf(entry, models)
    if (!base) return { id, file: entry.from!, problem: `it is made from "${entry.from}", which is not among the models served (removed, or its store is off)` }
    if (base.remote) return { id, file: entry.from!, problem: `it is made from "${entry.from}", which runs on another machine` }
    const result = await this.describe(id, base.path, entry, base.projectorPath)
    return 'problem' in result ? result : { ...result, ...(base.draftPath ? { draftPath: base.draftPath } : {}) }
  }

  /** What a Modelfile adds to a model: its Ollama facts, its template, its adapters (inside the models folder). */
  private modelfileFacts(id: string, entry: CatalogEntry | undefined): Partial<ModelRecord> {
    const ollama = modelfileInfo(id, entry)
    if (!ollama) return {}
    const template = entry?.modelfile?.template
    const adapterPaths = (entry?.modelfile?.adapters ?? []).map((a) => this.resolveInside(a)).filter((p): p is string => p !== undefined)
    return {
      ollama,
      ...(template !== undefined ? { chatTemplate: template, hasChatTemplate: true, thinks: templateThinks(template) } : {}),
      ...(adapterPaths.length ? { adapterPaths } : {}),
    }
  }

  /** A path as problems name it: inside the models folder relative to it, elsewhere in full. */
  private fileName(path: string): string {
    return path.startsWith(this.dir + sep) ? relative(this.dir, path) : path
  }

  /**
   * The context a model gets: what the catalog asks, but no more than llama.cpp gives a request
   * (the context the model was trained with) or than its engine reported giving.
   */
  private contextOf(
    path: string,
    info: { size: number; mtimeMs: number },
    asked: number,
    trained: number | undefined,
  ): { contextLength: number; contextNote?: string } {
    const reported = this.engineContext.get(fileStamp(path, info.size, Math.floor(info.mtimeMs / 1000)))
    if (reported !== undefined && reported < asked && (trained === undefined || reported < trained)) {
      return { contextLength: reported, contextNote: `the catalog asks for ${asked} tokens of context; its engine gives each request ${reported}` }
    }
    if (trained !== undefined && trained < asked) {
      return {
        contextLength: trained,
        contextNote: `the catalog asks for ${asked} tokens of context; the model was trained with ${trained}, which is what llama.cpp gives each request`,
      }
    }
    return { contextLength: asked }
  }

  /** A remote entry's models, or why it cannot serve; ids already taken are refused. */
  private remoteModels(entry: CatalogEntry, takenIds: Set<string>): { models: ModelRecord[]; broken: BrokenModel[]; replicas: RemoteReplica[] } {
    const where = entry.remote?.base_url ?? entry.replicas?.[0]?.base_url ?? '?'
    if (!this.options.remotes)
      return { models: [], broken: [{ id: entry.id ?? where, file: where, problem: 'remote models are not served here' }], replicas: [] }
    const result = remoteRecords(entry, this.options.remotes, this.options.env ?? process.env)
    const models: ModelRecord[] = []
    for (const model of result.models) {
      if (takenIds.has(model.id)) {
        result.broken.push({ id: model.id, file: where, problem: `duplicate model id "${model.id}" in models.json` })
        continue
      }
      takenIds.add(model.id)
      models.push(model)
    }
    return { models, broken: result.broken, replicas: result.replicas }
  }

  /** Why a draft model file cannot serve (missing, not a GGUF chat model), or undefined. */
  private async draftProblem(path: string): Promise<string | undefined> {
    const header = await this.header(path)
    if (header instanceof Error) return `is not usable: ${header.message}`
    return header.format === 'gguf' ? undefined : 'is not a GGUF model'
  }

  private async header(path: string): Promise<ModelFileHeader | Error> {
    let info
    try {
      info = await stat(path)
    } catch (e) {
      return e as Error
    }
    const cached = this.headers.get(path)
    if (cached && cached.mtimeMs === info.mtimeMs && cached.size === info.size) return cached.header
    const header = await readModelFileHeader(path).catch((e: Error) => e)
    this.headers.set(path, { mtimeMs: info.mtimeMs, size: info.size, header })
    return header
  }

  /** Catalog paths are relative to the folder and may not climb out of it. */
  private resolveInside(file: string): string | undefined {
    const full = resolve(this.dir, file)
    return full.startsWith(this.dir + sep) ? full : undefined
  }
}

/**
 * Gives each chat model without a catalog `mmproj` a projector from its own directory: one named
 * after it (`mmproj-<model>.gguf`, or containing the model's name) first; else the directory's only
 * projector, unless that one is named after another model. Widths must agree, so a projector never
 * pairs with a model it cannot feed.
 */
function pairProjectors(models: ModelRecord[], projectors: Map<string, ModelFileHeader | undefined>, projectorSizes: Map<string, number>): void {
  const candidates = models.filter((m) => m.kind === 'chat' && !m.projectorPath && !m.catalogEntry?.mmproj)
  const stemOf = (path: string) => basename(path, extname(path)).toLowerCase()
  // A projector is named for the model whose name it holds most fully: `mmproj-tiny-vision`
  // is tiny-vision's, not tiny's, though it holds both names.
  const namedFor = (projector: string): ModelRecord | undefined => {
    const name = stemOf(projector)
    const holders = models.filter((m) => m.kind === 'chat' && dirname(m.path) === dirname(projector) && name.includes(stemOf(m.path)))
    return holders.find((m) => name === `mmproj-${stemOf(m.path)}`) ?? holders.sort((a, b) => stemOf(b.path).length - stemOf(a.path).length)[0]
  }
  const claimedByName = new Set<string>()
  const chosen = new Map<ModelRecord, string>()
  for (const [projector, header] of projectors) {
    const model = namedFor(projector)
    if (!model) continue
    claimedByName.add(projector)
    if (candidates.includes(model) && !chosen.has(model) && projectorFits(header, model)) chosen.set(model, projector)
  }
  for (const model of candidates) {
    if (chosen.has(model)) continue
    const sameDir = [...projectors].filter(([p]) => dirname(p) === dirname(model.path))
    const only = sameDir.length === 1 ? sameDir[0] : undefined
    if (only && !claimedByName.has(only[0]) && projectorFits(only[1], model)) chosen.set(model, only[0])
  }
  for (const [model, projector] of chosen) {
    model.projectorPath = projector
    model.projectorSizeBytes = projectorSizes.get(projector) ?? 0
    model.capabilities = capabilitiesOf(model.kind, true, model.capabilities.includes('tools'))
  }
}

/** What the GGUF says of itself, for the Ollama API's details; only the facts the file has. */
function ggufFacts(header: Extract<ModelFileHeader, { format: 'gguf' }>, kind: ModelKind): Partial<ModelRecord> {
  const facts: Partial<ModelRecord> = {}
  if (kind === 'chat' && header.chatTemplate === undefined) facts.templateGuessed = header.fallbackTemplate ?? 'chatml'
  if (kind === 'chat' && templateThinks(header.chatTemplate)) facts.thinks = true
  if (header.fileType !== undefined) facts.fileType = header.fileType
  if (header.parameterCount !== undefined) facts.parameterCount = header.parameterCount
  if (header.sizeLabel !== undefined) facts.sizeLabel = header.sizeLabel
  if (header.baseName !== undefined) facts.baseName = header.baseName
  if (header.name !== undefined) facts.modelName = header.name
  if (header.vocabularyHash !== undefined) facts.vocabularyHash = header.vocabularyHash
  if (kind === 'chat' && header.mtpLayers) facts.mtpLayers = header.mtpLayers
  return facts
}

/**
 * A draft model drafts at most this share of the target's bytes: on a CPU it reads its weights for
 * every token the target decodes and for every token it drafts, so one much smaller than the target
 * is what pays (SmolLM2-135M against a 1B model is an eighth).
 */
const DRAFT_SHARE = 0.25

/**
 * Gives each chat model without a catalog `draft` the largest model of the same vocabulary (the
 * same tokens, tokenizer, BOS and EOS: vocabularyHash) in its folder that is at most a quarter of
 * its size, for speculative decoding. Not for a model with a projector (the draft would not see the
 * image), a remote one, or one whose catalog entry says `"speculative": false` or `"ngram"`.
 */
export function pairDraftModels(models: ModelRecord[]): void {
  const local = models.filter((m) => m.kind === 'chat' && !m.remote && m.vocabularyHash && m.sizeBytes > 0)
  for (const model of local) {
    const setting = model.catalogEntry?.speculative
    if (model.draftPath || model.catalogEntry?.draft || model.projectorPath || setting === false || setting === 'ngram') continue
    const drafts = local.filter(
      (d) =>
        d !== model &&
        d.vocabularyHash === model.vocabularyHash &&
        dirname(d.path) === dirname(model.path) &&
        d.sizeBytes <= model.sizeBytes * DRAFT_SHARE &&
        !d.projectorPath,
    )
    const best = drafts.sort((a, b) => b.sizeBytes - a.sizeBytes || a.path.localeCompare(b.path))[0]
    if (best) model.draftPath = best.path
  }
}

function shapeOf(header: ModelFileHeader): ModelShape | undefined {
  if (header.format !== 'gguf') return undefined
  const { layers, embeddingLength, headCount, headCountKv, vocabularySize } = header
  if (!layers || !embeddingLength || !headCount || !headCountKv || !vocabularySize) return undefined
  return { layers, embeddingLength, headCount, headCountKv, vocabularySize }
}

function projectorFits(projector: ModelFileHeader | undefined, model: ModelRecord): boolean {
  if (!projector || projector.format !== 'gguf') return false
  const width = projector.projectorOutputWidth
  return width === undefined || model.embeddingLength === undefined || width === model.embeddingLength
}

function fileStemId(dir: string, path: string): string {
  const rel = relative(dir, path).split(sep).join('/')
  return rel.replace(/\.(gguf|bin)$/i, '').replace(/-0*1-of-\d+$/, '')
}

function idOf(raw: unknown): string | undefined {
  const id = (raw as { id?: unknown })?.id
  return typeof id === 'string' && id.length > 0 ? id : undefined
}

function describeZodError(error: import('zod').ZodError): string {
  return error.issues.map((i) => `${i.path.join('.') || 'entry'}: ${i.message}`).join('; ')
}
