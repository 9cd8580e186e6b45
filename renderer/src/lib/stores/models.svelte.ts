/**
 * The models the server has, the recommended ones it can fetch, and downloads under way. Actions
 * answer with the server's own words when they fail; endpoints this server does not have yet are
 * shown as unavailable instead of as errors.
 */
import { ApiError } from '../services/api-client.ts'
import { api } from './connection.svelte.ts'
import type {
  Capability,
  DownloadObject,
  DownloadState,
  ManagedModel,
  ModelFolderListing,
  ModelObject,
  ModelProblem,
  RecommendedEntry,
  RemoteHealth,
  ModelSourceKind,
} from '../../../../main/server/wire-types.ts'

export interface ModelInfo {
  id: string
  capabilities: Capability[]
  state: 'loaded' | 'available'
  contextLength: number
  sizeBytes: number | undefined
  file: string | undefined
  kind: string | undefined
  /** A model served by other machines: their hosts and whether any copy answers. */
  remote: { health: RemoteHealth; hosts: string[] } | undefined
  /**
   * A model in a program's store, served where it lies: which program, and its folder. Read only,
   * but for `pulled`: Hearth's own store of the models it pulled by name (`<models>/ollama`).
   */
  source: { kind: ModelSourceKind; dir: string | undefined; pulled: boolean } | undefined
  /** The file has no chat template: the format chosen for it (`gemma`, `chatml`, …). */
  templateGuessed: string | undefined
  /** A pooled model: the machines lending it memory. */
  pool: string[] | undefined
  /** Why a pooled model cannot run now (a lender dropped off or refused); undefined when nothing is known against it. */
  poolProblem: string | undefined
}

/** How the page names the programs whose models it lists. */
export const SOURCE_NAMES: Record<ModelSourceKind, string> = {
  ollama: 'Ollama',
  lmstudio: 'LM Studio',
  huggingface: 'Hugging Face cache',
  'llama.cpp': 'llama.cpp cache',
}

export const FINISHED: readonly DownloadState[] = ['done', 'failed', 'cancelled']

/** `/api/models` lists models in full; another OpenAI-style server answers only `/v1/models`, with less. */
type ListedModel = Pick<ModelObject, 'id'> & Partial<ManagedModel>

function fromWire(m: ListedModel, modelsDir?: string): ModelInfo {
  return {
    id: m.id,
    capabilities: m.capabilities ?? [],
    state: m.state ?? 'available',
    contextLength: m.context_length ?? 0,
    sizeBytes: m.remote ? undefined : m.size_bytes,
    file: m.file ?? undefined,
    kind: m.kind,
    remote: m.remote ? { health: m.remote.health, hosts: (m.replicas ?? []).map((r) => hostOf(r.base_url)) } : undefined,
    source: m.source ? { kind: m.source, dir: m.source_dir, pulled: m.source === 'ollama' && isPulledStore(m.source_dir, modelsDir) } : undefined,
    templateGuessed: typeof m.template_guessed === 'string' ? m.template_guessed : undefined,
    pool: m.pool,
    poolProblem: m.pool_problem ?? undefined,
  }
}

/** The folder Hearth pulls Ollama names into: `ollama` in the models folder. */
function isPulledStore(dir: string | undefined, modelsDir: string | undefined): boolean {
  if (!dir || !modelsDir) return false
  const root = modelsDir.replace(/[\\/]+$/, '')
  return dir === `${root}/ollama` || dir === `${root}\\ollama`
}

function hostOf(url: string): string {
  try {
    return new URL(url).host
  } catch {
    return url
  }
}

/** Ids may hold '/' and ':'; each path segment is escaped on its own. */
export function modelPath(id: string): string {
  return id.split('/').map(encodeURIComponent).join('/')
}

class ModelsStore {
  models = $state<ModelInfo[]>([])
  problems = $state<ModelProblem[]>([])
  modelsDir = $state<string | undefined>(undefined)
  loaded = $state(false)
  error = $state<string | undefined>(undefined)
  /** Per model id: what is being done to it right now. */
  busy = $state<Record<string, string>>({})
  /** Per model id: the last action's failure. */
  actionErrors = $state<Record<string, string>>({})

  recommended = $state<RecommendedEntry[] | undefined>(undefined)
  recommendedError = $state<string | undefined>(undefined)
  downloads = $state<DownloadObject[]>([])
  downloadsAvailable = $state(true)
  pullError = $state<string | undefined>(undefined)
  importError = $state<string | undefined>(undefined)
  remoteError = $state<string | undefined>(undefined)

  chatModels = $derived(this.models.filter((m) => m.capabilities.includes('chat')))
  /** Whisper models: they transcribe, and most also translate. */
  speechModels = $derived(this.models.filter((m) => m.capabilities.includes('transcription') || m.capabilities.includes('translation')))

  private watching = new Set<string>()

  async refresh(): Promise<void> {
    try {
      const body = await api.json<ModelFolderListing>('/api/models')
      this.models = body.models.map((m) => fromWire(m, body.models_dir))
      this.problems = body.problems ?? []
      this.modelsDir = body.models_dir
      this.error = undefined
    } catch (e) {
      if (!(e instanceof ApiError && e.missingEndpoint)) {
        this.error = (e as Error).message
        return
      }
      try {
        const body = await api.json<{ data: ListedModel[] }>('/v1/models')
        this.models = body.data.map((m) => fromWire(m))
        this.error = undefined
      } catch (inner) {
        this.error = (inner as Error).message
      }
    } finally {
      this.loaded = true
    }
  }

  async setLoaded(id: string, load: boolean): Promise<void> {
    await this.act(id, load ? 'Loading…' : 'Unloading…', load ? 'Loading models' : 'Unloading models', () =>
      api.request(`/api/models/${modelPath(id)}/${load ? 'load' : 'unload'}`, { method: 'POST', body: {} }),
    )
  }

  async remove(id: string): Promise<void> {
    await this.act(id, 'Removing…', 'Removing models', () => api.request(`/api/models/${modelPath(id)}`, { method: 'DELETE' }))
  }

  async importFile(path: string, mode: 'copy' | 'link', id?: string): Promise<boolean> {
    this.importError = undefined
    try {
      await api.request('/api/models/import', { body: { path, mode, ...(id ? { id } : {}) } })
      await this.refresh()
      return true
    } catch (e) {
      this.importError = describe(e, 'Importing models')
      return false
    }
  }

  /** A model on another machine: the server's catalog gets the entry, and watches that machine. */
  async addRemote(entry: { id: string; base_url: string; model?: string; api_key_env?: string }): Promise<boolean> {
    this.remoteError = undefined
    try {
      await api.request('/api/models/remote', { body: entry })
      await this.refresh()
      return true
    } catch (e) {
      this.remoteError = describe(e, 'Adding models on other machines')
      return false
    }
  }

  async loadRecommended(): Promise<void> {
    try {
      this.recommended = (await api.json<{ models: RecommendedEntry[] }>('/api/recommended')).models
      this.recommendedError = undefined
    } catch (e) {
      this.recommendedError = describe(e, 'The recommended list')
    }
  }

  /** Downloads already under way (started elsewhere, or before a reload). */
  async loadDownloads(): Promise<void> {
    try {
      const { downloads } = await api.json<{ downloads: DownloadObject[] }>('/api/downloads')
      this.downloads = downloads
      this.downloadsAvailable = true
      for (const d of downloads) if (!FINISHED.includes(d.state)) void this.watch(d.id)
    } catch (e) {
      if (e instanceof ApiError && e.missingEndpoint) this.downloadsAvailable = false
    }
  }

  /** Files from Hugging Face or a URL (with a projector and an id), or a model by its Ollama name (plain http where `insecure`). */
  async pull(source: string, options: { mmproj?: string; id?: string; insecure?: boolean } = {}): Promise<boolean> {
    this.pullError = undefined
    try {
      const body: Record<string, string | boolean> = { source: source.trim() }
      if (options.mmproj?.trim()) body.mmproj = options.mmproj.trim()
      if (options.id?.trim()) body.id = options.id.trim()
      if (options.insecure) body.insecure = true
      const { download } = await api.json<{ download: DownloadObject }>('/api/models/pull', { body })
      this.upsert(download)
      void this.watch(download.id)
      // An earlier pull of the same model that kept what came: this one goes on from it, which the server now says of it.
      for (const d of this.downloads) if (d.id !== download.id && d.model_id === download.model_id && FINISHED.includes(d.state)) void this.reload(d.id)
      return true
    } catch (e) {
      this.pullError = describe(e, 'Downloading models')
      return false
    }
  }

  /** Stops a download; for one already stopped, discards what it kept for a resume. */
  async cancelDownload(id: string): Promise<void> {
    try {
      this.upsert(await api.json<DownloadObject>(`/api/downloads/${encodeURIComponent(id)}`, { method: 'DELETE' }))
    } catch (e) {
      this.pullError = (e as Error).message
    }
  }

  /** A stopped download that kept what came for a resume (a pull by name cancelled, a transfer that broke), and no newer one took it over. */
  keepsPartial(d: DownloadObject): boolean {
    const kept = (d.state === 'cancelled' && d.error_code === 'cancelled') || (d.state === 'failed' && d.error_code === 'network' && d.bytes > 0)
    return kept && !this.downloads.some((o) => o.id !== d.id && o.model_id === d.model_id && o.created >= d.created)
  }

  dismissDownload(id: string): void {
    this.downloads = this.downloads.filter((d) => d.id !== id)
  }

  private async reload(id: string): Promise<void> {
    try {
      this.upsert(await api.json<DownloadObject>(`/api/downloads/${encodeURIComponent(id)}`))
    } catch {
      // Gone from the server's list: what is shown stays.
    }
  }

  /** Follows one download's snapshots until it ends, then shows the new model. */
  private async watch(id: string): Promise<void> {
    if (this.watching.has(id)) return
    this.watching.add(id)
    try {
      for await (const snapshot of api.events<DownloadObject>(`/api/downloads/${encodeURIComponent(id)}/events`)) {
        this.upsert(snapshot)
        if (FINISHED.includes(snapshot.state)) break
      }
    } catch (e) {
      const current = this.downloads.find((d) => d.id === id)
      if (current && !FINISHED.includes(current.state)) this.upsert({ ...current, state: 'failed', error: (e as Error).message })
    } finally {
      this.watching.delete(id)
      await this.refresh()
    }
  }

  private upsert(download: DownloadObject): void {
    const index = this.downloads.findIndex((d) => d.id === download.id)
    if (index < 0) this.downloads = [download, ...this.downloads]
    else this.downloads[index] = download
  }

  private async act(id: string, label: string, what: string, action: () => Promise<unknown>): Promise<void> {
    this.busy[id] = label
    delete this.actionErrors[id]
    try {
      await action()
    } catch (e) {
      this.actionErrors[id] = describe(e, what)
    } finally {
      delete this.busy[id]
      await this.refresh()
    }
  }
}

/** An error in words; a missing endpoint says that this server cannot do it yet. */
export function describe(e: unknown, what: string): string {
  if (e instanceof ApiError && e.missingEndpoint) return `${what} is not available on this server yet`
  return (e as Error).message
}

export const models = new ModelsStore()
