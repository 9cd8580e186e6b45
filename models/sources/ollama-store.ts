/**
 * Ollama's store (`~/.ollama/models`, or `$OLLAMA_MODELS`), read in place: each manifest at
 * `manifests/<host>/<namespace>/<model>/<tag>` names its layers by digest, each layer a file
 * `blobs/sha256-<hex>` (Ollama's manifest/ and server/images.go). The model layer is a GGUF that
 * llama.cpp loads as it is; the projector layer is its vision projector; the template, system,
 * params, messages and license layers are small files kept on the record. A manifest is read again
 * only when its time or size changes, and blobs are never hashed: they are named by their digest.
 */
import { createHash } from 'node:crypto'
import { readdir, readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { LLAMA_ARCHITECTURES } from '../catalog/llama-architectures.ts'
import type { BrokenModel, ModelSource, OllamaModelInfo } from '../catalog/model-record.ts'
import type { ExternalModel, SourceListing } from './external-model.ts'
import { displayOllamaName, ollamaNameFromManifestPath } from './ollama-names.ts'

const MEDIA = 'application/vnd.ollama.image.'
/** Text layers are a few kilobytes; more is not a layer Ollama wrote. */
const MAX_TEXT_LAYER_BYTES = 4 * 1024 * 1024
const MAX_MANIFEST_BYTES = 1024 * 1024
const DIGEST = /^sha256[:-]([0-9a-fA-F]{64})$/

interface ManifestLayer {
  mediaType: string
  digest: string
  size: number
}

interface CachedManifest {
  mtimeMs: number
  size: number
  result: ExternalModel | BrokenModel
}

export class OllamaStore {
  private readonly manifests = new Map<string, CachedManifest>()
  /** Layer texts by digest: a blob's content never changes under its name. */
  private readonly texts = new Map<string, string>()
  /** Problems of blobs that may yet arrive without the manifest changing: read again next scan. */
  private readonly retryLater = new WeakSet<BrokenModel>()
  private readonly source: ModelSource

  /** `pulled`: Hearth's own store of the models it pulled by name (pulled-store.ts). */
  constructor(
    readonly dir: string,
    options: { pulled?: boolean } = {},
  ) {
    this.source = { kind: 'ollama', dir, ...(options.pulled ? { pulled: true as const } : {}) }
  }

  async list(): Promise<SourceListing> {
    const listing: SourceListing = { models: [], projectors: [], problems: [] }
    const seen = new Set<string>()
    for (const parts of await this.manifestPaths()) {
      const path = join(this.dir, 'manifests', ...parts)
      seen.add(path)
      const result = await this.manifest(path, parts)
      if (!result) continue
      if ('problem' in result) listing.problems.push(result)
      else {
        // A blob removed since the manifest was read (`ollama rm` of a model sharing it) is a problem now.
        const missing = await this.missingBlob(result)
        if (missing) listing.problems.push(missing)
        else listing.models.push(result)
      }
    }
    for (const path of this.manifests.keys()) if (!seen.has(path)) this.manifests.delete(path)
    return listing
  }

  /** `[host, namespace, model, tag]` of every manifest file, as Ollama's Manifests() globs them. */
  private async manifestPaths(): Promise<string[][]> {
    const found: string[][] = []
    const walk = async (parts: string[]): Promise<void> => {
      const entries = await readdir(join(this.dir, 'manifests', ...parts), { withFileTypes: true }).catch(() => [])
      for (const entry of entries) {
        if (entry.name.startsWith('.')) continue
        const next = [...parts, entry.name]
        if (next.length === 4) {
          if (entry.isFile() || entry.isSymbolicLink()) found.push(next)
        } else if (entry.isDirectory() || entry.isSymbolicLink()) await walk(next)
      }
    }
    await walk([])
    return found.sort((a, b) => a.join('/').localeCompare(b.join('/')))
  }

  /** The manifest as a model or a problem, read again only when it changed; undefined once it is gone. */
  private async manifest(path: string, parts: string[]): Promise<ExternalModel | BrokenModel | undefined> {
    const info = await stat(path).catch(() => undefined)
    if (!info?.isFile()) return undefined
    const cached = this.manifests.get(path)
    if (cached && cached.mtimeMs === info.mtimeMs && cached.size === info.size) return cached.result
    const result = await this.readManifest(path, parts, info.mtime)
    if ('problem' in result && this.retryLater.has(result)) this.manifests.delete(path)
    else this.manifests.set(path, { mtimeMs: info.mtimeMs, size: info.size, result })
    return result
  }

  private async readManifest(path: string, parts: string[], modified: Date): Promise<ExternalModel | BrokenModel> {
    const name = ollamaNameFromManifestPath(parts)
    const id = name ? displayOllamaName(name) : parts.join('/')
    const broken = (problem: string): BrokenModel => ({ id, file: path, problem, source: this.source })
    if (!name) return broken(`"${parts.join('/')}" is not a valid Ollama model name`)

    let bytes: Buffer
    try {
      bytes = await readFile(path)
    } catch (e) {
      return broken(`its manifest cannot be read: ${(e as Error).message}`)
    }
    if (bytes.length > MAX_MANIFEST_BYTES) return broken(`its manifest is ${bytes.length} bytes, not a manifest Ollama writes`)
    const manifest = parseManifest(bytes)
    if (typeof manifest === 'string') return broken(`its manifest is unreadable: ${manifest}`)
    const { layers } = manifest
    const config = manifest.config && (await this.configOf(manifest.config))

    const ofType = (type: string) => layers.filter((l) => l.mediaType === MEDIA + type)
    const problem = ollamaManifestProblem(layers, config)
    if (problem) return broken(problem)
    const models = ofType('model')
    const projectors = ofType('projector')

    const modelPath = this.blobPath(models[0]!.digest)
    const projectorPath = projectors[0] ? this.blobPath(projectors[0].digest) : undefined
    if (!modelPath || (projectors[0] && !projectorPath)) return broken('its manifest names a layer by an invalid digest')

    const info: OllamaModelInfo = {
      name: id,
      digest: createHash('sha256').update(bytes).digest('hex'),
      modifiedAt: modified.toISOString(),
    }
    try {
      const template = ofType('template')[0] ?? ofType('prompt')[0]
      if (template) info.template = await this.text(template)
      const system = ofType('system')[0]
      if (system) info.system = await this.text(system)
      const params = ofType('params')[0]
      if (params) info.parameters = jsonLayer(await this.text(params), 'params', isPlainObject)
      const messages = ofType('messages')[0]
      if (messages) info.messages = jsonLayer(await this.text(messages), 'messages', isMessageList)
      const licenses = ofType('license')
      if (licenses.length > 0) info.license = await Promise.all(licenses.map((l) => this.text(l)))
    } catch (e) {
      const problem = broken((e as Error).message)
      this.retryLater.add(problem)
      return problem
    }
    return {
      id,
      path: modelPath,
      ...(projectorPath ? { projectorPath } : {}),
      source: this.source,
      ownedBy: name.namespace,
      ollama: info,
    }
  }

  /** The config blob (model_format, remote_host, …); only a hint, so an unreadable one is no problem. */
  private async configOf(layer: ManifestLayer): Promise<Record<string, unknown> | undefined> {
    try {
      const config = JSON.parse(await this.text(layer)) as unknown
      return isPlainObject(config) ? config : undefined
    } catch {
      return undefined
    }
  }

  private async missingBlob(model: ExternalModel): Promise<BrokenModel | undefined> {
    for (const [what, path] of [
      ['model', model.path],
      ['projector', model.projectorPath],
    ] as const) {
      if (path && !(await stat(path).catch(() => undefined))?.isFile()) {
        return { id: model.id, file: path, problem: `the blob of its ${what} layer is missing from Ollama's store (${path})`, source: this.source }
      }
    }
    return undefined
  }

  private async text(layer: ManifestLayer): Promise<string> {
    const kind = layer.mediaType.startsWith(MEDIA) ? layer.mediaType.slice(MEDIA.length) : 'config'
    const cached = this.texts.get(layer.digest)
    if (cached !== undefined) return cached
    const path = this.blobPath(layer.digest)
    if (!path) throw new Error(`its ${kind} layer has an invalid digest`)
    if (layer.size > MAX_TEXT_LAYER_BYTES) throw new Error(`its ${kind} layer is ${layer.size} bytes, too large for a ${kind}`)
    let text: string
    try {
      text = await readFile(path, 'utf8')
    } catch {
      throw new Error(`the blob of its ${kind} layer is missing from Ollama's store (${path})`)
    }
    this.texts.set(layer.digest, text)
    return text
  }

  /** `sha256:<hex>` → `<dir>/blobs/sha256-<hex>`, only for a well-formed digest. */
  private blobPath(digest: string): string | undefined {
    const hex = DIGEST.exec(digest)?.[1]
    return hex ? join(this.dir, 'blobs', `sha256-${hex}`) : undefined
  }
}

/**
 * Why Hearth cannot serve a model, from its manifest's layers and its config blob alone (before a
 * byte of its weights is read, so a pull can refuse it before downloading): a cloud model, tensors
 * for Ollama's own engine, a format or an architecture (`model_family`, `model_families`: the
 * GGUF's `general.architecture` of each layer, as `ollama create` writes them) that llama.cpp cannot
 * load, a split model, a LoRA adapter, several projectors. Undefined when nothing there says so; the
 * GGUF's own header (llama-loadability.ts) has the last word.
 */
export function ollamaManifestProblem(layers: ReadonlyArray<{ mediaType: string }>, config: Record<string, unknown> | undefined): string | undefined {
  const count = (type: string) => layers.filter((l) => l.mediaType === MEDIA + type).length
  const models = count('model')
  if (models === 0) {
    if (config?.remote_host) return `is an Ollama cloud model (it runs on ${String(config.remote_host)}): there is no file to load here`
    if (count('tensor') > 0 || (config?.model_format && config.model_format !== 'gguf')) {
      return `is stored as ${String(config?.model_format ?? 'safetensors')} tensors for Ollama's own engine, which llama.cpp cannot load`
    }
    return 'its manifest has no model layer'
  }
  if (config?.model_format && config.model_format !== 'gguf') return `is a ${String(config.model_format)} model, which llama.cpp cannot load`
  if (models > 1) {
    return `is split into ${models} files, which llama.cpp finds only by their file names (Ollama links them under such names when it loads; Hearth writes nothing in Ollama's store)`
  }
  if (count('adapter') > 0) return `has a LoRA adapter (ADAPTER in its Modelfile), which Hearth does not apply: the base model alone would answer differently`
  const projectors = count('projector')
  if (projectors > 1) return `has ${projectors} projectors; llama.cpp takes one`
  const families = [config?.model_family, ...(Array.isArray(config?.model_families) ? config.model_families : [])]
  const unknown = [...new Set(families.filter((f): f is string => typeof f === 'string' && f !== '' && f !== 'clip' && !LLAMA_ARCHITECTURES.has(f)))]
  if (unknown.length > 0) {
    return `has the architecture "${unknown.join('", "')}", which the llama.cpp Hearth builds cannot load (it runs on Ollama's own engine)`
  }
  return undefined
}

function parseManifest(bytes: Buffer): { layers: ManifestLayer[]; config: ManifestLayer | undefined } | string {
  let json: unknown
  try {
    json = JSON.parse(bytes.toString('utf8'))
  } catch (e) {
    return `not JSON (${(e as Error).message})`
  }
  if (!isPlainObject(json)) return 'not a JSON object'
  if (json.schemaVersion !== 2) return `schemaVersion ${JSON.stringify(json.schemaVersion)}, where Ollama writes 2`
  if (!Array.isArray(json.layers)) return 'no layers'
  const layers: ManifestLayer[] = []
  for (const layer of json.layers as unknown[]) {
    if (!isPlainObject(layer) || typeof layer.mediaType !== 'string' || typeof layer.digest !== 'string') return 'a layer without mediaType or digest'
    layers.push(layerOf(layer))
  }
  const config = isPlainObject(json.config) && typeof json.config.digest === 'string' && json.config.digest !== '' ? layerOf(json.config) : undefined
  return { layers, config }
}

function layerOf(layer: Record<string, unknown>): ManifestLayer {
  return { mediaType: String(layer.mediaType ?? ''), digest: String(layer.digest), size: typeof layer.size === 'number' ? layer.size : 0 }
}

function jsonLayer<T>(text: string, kind: string, check: (value: unknown) => value is T): T {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw new Error(`its ${kind} layer is not valid JSON`)
  }
  if (!check(value)) throw new Error(`its ${kind} layer is not what Ollama writes`)
  return value
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function isMessageList(value: unknown): value is Array<{ role: string; content: string }> {
  return Array.isArray(value) && value.every((m) => isPlainObject(m) && typeof m.role === 'string' && typeof m.content === 'string')
}
