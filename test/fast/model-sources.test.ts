/**
 * The models other programs downloaded, served where they lie and never written: Ollama's store
 * (hand-made manifests and blobs, as Ollama lays them out), LM Studio's models folder, the Hugging
 * Face hub cache (snapshot files linked to blobs) and llama.cpp's download cache; what llama.cpp
 * cannot load listed with the reason; and the GGUF facts the Ollama API shows, read from real files.
 */
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { gguf } from '@huggingface/gguf'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LLAMA_SOURCE } from '../../engines/builder/pinned-source.ts'
import { engineCacheDir } from '../../engines/builder/cmake-build.ts'
import { LLAMA_ARCHITECTURES, LLAMA_CPP_COMMIT } from '../../models/catalog/llama-architectures.ts'
import { readModelFileHeader } from '../../models/catalog/model-file-header.ts'
import { ModelFolder } from '../../models/catalog/model-folder.ts'
import type { FolderSnapshot, ModelRecord } from '../../models/catalog/model-record.ts'
import { removeModel } from '../../models/downloads/model-removal.ts'
import { defaultModelSources } from '../../models/sources/default-source-dirs.ts'
import type { ModelSourceDirs } from '../../models/sources/external-model.ts'
import { displayOllamaName, ollamaNameCandidates, parseOllamaName } from '../../models/sources/ollama-names.ts'
import { kv, writeGguf } from '../../models/writers/gguf-writer.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { writeTinyLlama, writeTinyMmproj } from '../support/tiny-models.ts'

const MEDIA = 'application/vnd.ollama.image.'
const REV_MAIN = 'a'.repeat(40)
const REV_OLD = 'b'.repeat(40)

let root: string
let own: string
let dirs: Required<ModelSourceDirs>
/** GGUFs to copy into the stores. */
let files: { chat: string; plain: string; projector: string; visionInside: string; unknownArch: string }

interface Layer {
  mediaType: string
  digest: string
  size: number
}

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex')
}

/** A blob in Ollama's store, as `ollama create` leaves it. */
function blob(content: string | Buffer, type: string): Layer {
  const bytes = Buffer.from(content)
  const hex = sha256(bytes)
  writeFileSync(join(dirs.ollama[0]!, 'blobs', `sha256-${hex}`), bytes)
  return { mediaType: MEDIA + type, digest: `sha256:${hex}`, size: bytes.length }
}

function manifest(name: string, layers: Layer[], config?: Record<string, unknown>): string {
  const path = join(dirs.ollama[0]!, 'manifests', ...name.split('/'))
  mkdirSync(dirname(path), { recursive: true })
  const configLayer = config ? blob(JSON.stringify(config), 'config') : { mediaType: 'application/vnd.docker.container.image.v1+json', digest: '', size: 0 }
  writeFileSync(path, JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.docker.distribution.manifest.v2+json', config: configLayer, layers }))
  return path
}

/** A GGUF whose header is all that matters here: an architecture and tensors by name. */
function headerOnlyGguf(path: string, architecture: string, tensorNames: string[]): void {
  writeGguf(path, {
    metadata: [kv.str('general.architecture', architecture), kv.u32(`${architecture}.context_length`, 256), kv.u32(`${architecture}.embedding_length`, 4)],
    tensors: tensorNames.map((name) => ({ name, shape: [4, 4], type: 'F32' as const, data: new Float32Array(16) })),
  })
}

/** Every file under a folder with its size and time: what "Hearth wrote nothing" is checked against. */
function tree(dir: string): Record<string, string> {
  const found: Record<string, string> = {}
  for (const name of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
    const path = join(dir, name)
    const info = statSync(path, { throwIfNoEntry: false })
    found[relative(dir, path)] = info ? `${info.size}:${info.mtimeMs}` : 'dangling link'
  }
  return found
}

const byId = (snapshot: FolderSnapshot) => Object.fromEntries(snapshot.models.map((m) => [m.id, m])) as Record<string, ModelRecord>
const problemOf = (snapshot: FolderSnapshot, id: string) => snapshot.broken.find((b) => b.id === id)?.problem

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'hearth-sources-'))
  own = join(root, 'hearth-models')
  dirs = {
    ollama: [join(root, 'ollama', 'models')],
    lmstudio: [join(root, 'lmstudio', 'models')],
    huggingface: [join(root, 'hf', 'hub')],
    'llama.cpp': [join(root, 'llama.cpp')],
  }
  const made = join(root, 'made')
  for (const dir of [own, made, join(dirs.ollama[0]!, 'blobs'), ...dirs.lmstudio, ...dirs.huggingface, ...dirs['llama.cpp']])
    mkdirSync(dir, { recursive: true })
  files = {
    chat: join(made, 'chat.gguf'),
    plain: join(made, 'plain.gguf'),
    projector: join(made, 'mmproj.gguf'),
    visionInside: join(made, 'vision-inside.gguf'),
    unknownArch: join(made, 'unknown-arch.gguf'),
  }
  writeTinyLlama(files.chat)
  writeTinyLlama(files.plain, { chatTemplate: false })
  writeTinyMmproj(files.projector, { textEmbd: 64 })
  // Ollama's own engine writes the vision tower into the model file; llama.cpp cannot load that.
  headerOnlyGguf(files.visionInside, 'gemma3', [
    'token_embd.weight',
    'blk.0.attn_q.weight',
    'v.patch_embd.weight',
    'v.blk.0.attn_q.weight',
    'mm.input_projection.weight',
  ])
  headerOnlyGguf(files.unknownArch, 'gptoss', ['token_embd.weight', 'blk.0.attn_q.weight'])

  // Hearth's own folder: one model, and a catalog id an Ollama model also has.
  writeTinyLlama(join(own, 'mine.gguf'))
  writeFileSync(join(own, 'models.json'), JSON.stringify({ models: [{ id: 'shadowed:latest', file: 'mine.gguf' }] }))

  // Ollama's store.
  const model = blob(readFileSync(files.chat), 'model')
  const described = [
    model,
    blob('{{ .System }}\n{{ .Prompt }}', 'template'),
    blob('You are a tiny model.', 'system'),
    blob(JSON.stringify({ stop: ['<|im_end|>'], temperature: 0.6, num_ctx: 8192 }), 'params'),
    blob(
      JSON.stringify([
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'hello' },
      ]),
      'messages',
    ),
    blob('MIT License', 'license'),
  ]
  manifest('registry.ollama.ai/library/llama3.2/3b', described, { model_format: 'gguf', model_family: 'llama', file_type: 'F32' })
  manifest('registry.ollama.ai/library/llama3.2/latest', described, { model_format: 'gguf' })
  manifest('registry.ollama.ai/someone/vision-tiny/q8', [model, blob(readFileSync(files.projector), 'projector')])
  manifest('example.com:5000/team/plain/v1', [blob(readFileSync(files.plain), 'model')])
  manifest('registry.ollama.ai/library/ghost/latest', [{ mediaType: MEDIA + 'model', digest: `sha256:${'0'.repeat(64)}`, size: 1 }])
  manifest('registry.ollama.ai/library/lora/latest', [model, blob('not really an adapter', 'adapter')])
  manifest('registry.ollama.ai/library/gemma3/latest', [blob(readFileSync(files.visionInside), 'model')])
  manifest('registry.ollama.ai/library/gpt-oss/20b', [blob(readFileSync(files.unknownArch), 'model')])
  manifest('registry.ollama.ai/library/shadowed/latest', [model])
  manifest('registry.ollama.ai/library/cloudy/latest', [], { remote_host: 'https://ollama.com:443', remote_model: 'cloudy' })
  const corrupt = join(dirs.ollama[0]!, 'manifests', 'registry.ollama.ai', 'library', 'corrupt', 'latest')
  mkdirSync(dirname(corrupt), { recursive: true })
  writeFileSync(corrupt, '{"schemaVersion": 2, "layers": [')

  // LM Studio: <publisher>/<repo>/<file>, the projector beside, an importance matrix passed over.
  const lmRepo = join(dirs.lmstudio[0]!, 'lmstudio-community', 'Tiny-GGUF')
  mkdirSync(lmRepo, { recursive: true })
  writeFileSync(join(lmRepo, 'Tiny-Q4_K_M.gguf'), readFileSync(files.chat))
  writeFileSync(join(lmRepo, 'mmproj-Tiny-F16.gguf'), readFileSync(files.projector))
  writeFileSync(join(lmRepo, 'Tiny-imatrix.gguf'), 'not a model')

  // The hub cache: snapshot files are links into blobs/; refs/main names the revision served.
  const repo = join(dirs.huggingface[0]!, 'models--ggml-org--tiny-GGUF')
  mkdirSync(join(repo, 'blobs'), { recursive: true })
  mkdirSync(join(repo, 'refs'), { recursive: true })
  writeFileSync(join(repo, 'refs', 'main'), REV_MAIN)
  const hubFile = (revision: string, path: string, content: Buffer) => {
    const hash = sha256(content)
    writeFileSync(join(repo, 'blobs', hash), content)
    const link = join(repo, 'snapshots', revision, path)
    mkdirSync(dirname(link), { recursive: true })
    symlinkSync(relative(dirname(link), join(repo, 'blobs', hash)), link)
  }
  hubFile(REV_MAIN, 'tiny-Q8_0.gguf', readFileSync(files.chat))
  hubFile(REV_MAIN, 'mmproj-tiny-Q8_0.gguf', readFileSync(files.projector))
  hubFile(REV_MAIN, 'F16/tiny-F16-00001-of-00002.gguf', readFileSync(files.plain))
  hubFile(REV_MAIN, 'F16/tiny-F16-00002-of-00002.gguf', Buffer.from('the second part'))
  hubFile(REV_OLD, 'stale-Q8_0.gguf', readFileSync(files.plain))
  const interrupted = join(dirs.huggingface[0]!, 'models--someone--interrupted', 'snapshots', REV_MAIN)
  mkdirSync(interrupted, { recursive: true })
  symlinkSync('../../blobs/never-finished', join(interrupted, 'big-Q4_K_M.gguf'))

  // llama.cpp's cache: what older `-hf` left side by side, with its metadata file.
  writeFileSync(join(dirs['llama.cpp'][0]!, 'ggml-org_tiny-GGUF_tiny-q8_0.gguf'), readFileSync(files.plain))
  writeFileSync(join(dirs['llama.cpp'][0]!, 'ggml-org_tiny-GGUF_tiny-q8_0.gguf.json'), '{}')
})

afterAll(() => {
  rmSync(root, { recursive: true, force: true })
})

describe("Ollama's names", () => {
  it('shows names as `ollama list` does: the default host and namespace left out, the tag always in', () => {
    expect(displayOllamaName(parseOllamaName('llama3.2')!)).toBe('llama3.2:latest')
    expect(displayOllamaName(parseOllamaName('registry.ollama.ai/library/llama3.2:3b')!)).toBe('llama3.2:3b')
    expect(displayOllamaName(parseOllamaName('someone/model:q8')!)).toBe('someone/model:q8')
    expect(displayOllamaName(parseOllamaName('example.com:5000/team/plain:v1')!)).toBe('example.com:5000/team/plain:v1')
    expect(displayOllamaName(parseOllamaName('https://example.com/team/plain')!)).toBe('example.com/team/plain:latest')
    expect(parseOllamaName('a/b/c/d')).toBeUndefined()
    expect(parseOllamaName('bad name')).toBeUndefined()
    expect(parseOllamaName('ns.with.dots/model')).toBeUndefined()
  })

  it('gives the ids a requested name may be served under: as written, then with the defaults filled in', () => {
    expect(ollamaNameCandidates('llama3.2')).toEqual(['llama3.2', 'llama3.2:latest'])
    expect(ollamaNameCandidates('llama3.2:3b')).toEqual(['llama3.2:3b'])
    expect(ollamaNameCandidates('registry.ollama.ai/library/llama3.2')).toEqual(['registry.ollama.ai/library/llama3.2', 'llama3.2:latest'])
    expect(ollamaNameCandidates('org/nested')).toEqual(['org/nested', 'org/nested:latest'])
    expect(ollamaNameCandidates('hf/ggml-org/tiny-GGUF/tiny-Q8_0')).toEqual(['hf/ggml-org/tiny-GGUF/tiny-Q8_0'])
  })
})

describe("Ollama's store", () => {
  let snapshot: FolderSnapshot
  beforeAll(async () => {
    snapshot = await new ModelFolder(own, { sources: { ollama: dirs.ollama } }).scan()
  })

  it('serves each manifest under its short name, from its blob, with what the other layers add', () => {
    const model = byId(snapshot)['llama3.2:3b']!
    const manifestPath = join(dirs.ollama[0]!, 'manifests', 'registry.ollama.ai', 'library', 'llama3.2', '3b')
    expect(model).toMatchObject({
      kind: 'chat',
      ownedBy: 'library',
      source: { kind: 'ollama', dir: dirs.ollama[0] },
      hasChatTemplate: true,
      fileType: 'F32',
      modelName: 'tiny-llama-chat',
      ollama: {
        name: 'llama3.2:3b',
        template: '{{ .System }}\n{{ .Prompt }}',
        system: 'You are a tiny model.',
        parameters: { stop: ['<|im_end|>'], temperature: 0.6, num_ctx: 8192 },
        messages: [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: 'hello' },
        ],
        license: ['MIT License'],
        digest: sha256(readFileSync(manifestPath)),
        modifiedAt: statSync(manifestPath).mtime.toISOString(),
      },
    })
    expect(model.path).toMatch(new RegExp(`/blobs/sha256-${sha256(readFileSync(files.chat))}$`))
    expect(model.templateGuessed).toBeUndefined()
    expect(model.parameterCount).toBeGreaterThan(0)
    // Tags sharing a blob are each listed, as Ollama lists them.
    expect(byId(snapshot)['llama3.2:latest']!.path).toBe(model.path)
  })

  it('names other namespaces and hosts in full, and pairs the projector layer with its model', () => {
    const models = byId(snapshot)
    expect(models['someone/vision-tiny:q8']).toMatchObject({ ownedBy: 'someone', capabilities: expect.arrayContaining(['vision']) })
    expect(models['someone/vision-tiny:q8']!.projectorPath).toMatch(new RegExp(`sha256-${sha256(readFileSync(files.projector))}$`))
    expect(models['someone/vision-tiny:q8']!.projectorSizeBytes).toBe(statSync(files.projector).size)
    expect(models['example.com:5000/team/plain:v1']).toMatchObject({ ownedBy: 'team', hasChatTemplate: false, templateGuessed: 'chatml' })
  })

  it('lists what llama.cpp cannot load, with the reason, and never serves it', () => {
    const ids = snapshot.models.map((m) => m.id)
    for (const id of ['ghost:latest', 'lora:latest', 'corrupt:latest', 'gemma3:latest', 'gpt-oss:20b', 'cloudy:latest']) expect(ids).not.toContain(id)
    expect(problemOf(snapshot, 'ghost:latest')).toMatch(/blob of its model layer is missing from Ollama's store/)
    expect(problemOf(snapshot, 'lora:latest')).toMatch(/LoRA adapter/)
    expect(problemOf(snapshot, 'corrupt:latest')).toMatch(/manifest is unreadable: not JSON/)
    expect(problemOf(snapshot, 'gemma3:latest')).toMatch(/holds its vision encoder inside the model file \(3 tensors\)/)
    expect(problemOf(snapshot, 'gpt-oss:20b')).toMatch(/architecture "gptoss", which the llama.cpp Hearth builds cannot load/)
    expect(problemOf(snapshot, 'cloudy:latest')).toMatch(/Ollama cloud model/)
    expect(snapshot.broken.find((b) => b.id === 'lora:latest')!.source).toEqual({ kind: 'ollama', dir: dirs.ollama[0] })
  })

  it("gives an id Hearth's own folder uses to Hearth's model, and says so of the other", () => {
    expect(byId(snapshot)['shadowed:latest']!.path).toBe(join(own, 'mine.gguf'))
    expect(byId(snapshot)['shadowed:latest']!.source).toBeUndefined()
    expect(problemOf(snapshot, 'shadowed:latest')).toMatch(/a model of the models folder has the same id/)
  })

  it('reads a manifest again only when it changes, and sees the change', async () => {
    const folder = new ModelFolder(own, { sources: { ollama: dirs.ollama } })
    await folder.scan()
    const path = manifest('registry.ollama.ai/library/changing/latest', [blob(readFileSync(files.chat), 'model'), blob('first', 'system')])
    expect(byId(await folder.scan())['changing:latest']!.ollama!.system).toBe('first')
    // Unchanged, its layers are not read again: the system blob can go and the record stays.
    const firstSystem = join(dirs.ollama[0]!, 'blobs', `sha256-${sha256(Buffer.from('first'))}`)
    rmSync(firstSystem)
    expect(byId(await folder.scan())['changing:latest']!.ollama!.system).toBe('first')
    manifest('registry.ollama.ai/library/changing/latest', [blob(readFileSync(files.chat), 'model'), blob('second, longer', 'system')])
    expect(byId(await folder.scan())['changing:latest']!.ollama!.system).toBe('second, longer')
    rmSync(path)
    expect(byId(await folder.scan())['changing:latest']).toBeUndefined()
  })

  it('reads a manifest whose layer blob is missing again, and serves it once the blob arrives', async () => {
    const folder = new ModelFolder(own, { sources: { ollama: dirs.ollama } })
    const system = Buffer.from('late system prompt')
    const systemLayer = { mediaType: MEDIA + 'system', digest: `sha256:${sha256(system)}`, size: system.length }
    manifest('registry.ollama.ai/library/late/latest', [blob(readFileSync(files.chat), 'model'), systemLayer])
    expect(problemOf(await folder.scan(), 'late:latest')).toMatch(/blob of its system layer is missing from Ollama's store/)
    blob(system, 'system')
    expect(byId(await folder.scan())['late:latest']!.ollama!.system).toBe('late system prompt')
  })
})

describe('LM Studio, the Hugging Face cache and llama.cpp', () => {
  let snapshot: FolderSnapshot
  beforeAll(async () => {
    snapshot = await new ModelFolder(own, { sources: { lmstudio: dirs.lmstudio, huggingface: dirs.huggingface, 'llama.cpp': dirs['llama.cpp'] } }).scan()
  })

  it("serves LM Studio's models by publisher, repository and file, with the projector beside", () => {
    const model = byId(snapshot)['lmstudio/lmstudio-community/Tiny-GGUF/Tiny-Q4_K_M']!
    expect(model).toMatchObject({
      ownedBy: 'lmstudio-community',
      source: { kind: 'lmstudio', dir: dirs.lmstudio[0] },
      capabilities: expect.arrayContaining(['vision']),
    })
    expect(model.projectorPath).toBe(join(dirs.lmstudio[0]!, 'lmstudio-community', 'Tiny-GGUF', 'mmproj-Tiny-F16.gguf'))
    expect(snapshot.models.map((m) => m.id).filter((id) => /imatrix|mmproj/i.test(id))).toEqual([])
  })

  it("serves the hub cache's revision refs/main names, through its links, a split model by its first part", () => {
    const ids = snapshot.models.map((m) => m.id).filter((id) => id.startsWith('hf/'))
    expect(ids).toEqual(['hf/ggml-org/tiny-GGUF/F16/tiny-F16', 'hf/ggml-org/tiny-GGUF/tiny-Q8_0'])
    const model = byId(snapshot)['hf/ggml-org/tiny-GGUF/tiny-Q8_0']!
    const snapshotDir = join(dirs.huggingface[0]!, 'models--ggml-org--tiny-GGUF', 'snapshots', REV_MAIN)
    expect(model).toMatchObject({ path: join(snapshotDir, 'tiny-Q8_0.gguf'), ownedBy: 'ggml-org', sizeBytes: statSync(files.chat).size })
    expect(model.projectorPath).toBe(join(snapshotDir, 'mmproj-tiny-Q8_0.gguf'))
    expect(problemOf(snapshot, 'hf/someone/interrupted/big-Q4_K_M')).toMatch(/points to a blob that is missing/)
  })

  it("serves llama.cpp's cached files by their names", () => {
    expect(byId(snapshot)['llama.cpp/ggml-org_tiny-GGUF_tiny-q8_0']).toMatchObject({
      source: { kind: 'llama.cpp' },
      ownedBy: 'llama.cpp',
      templateGuessed: 'chatml',
    })
  })

  it('reads only the stores turned on', async () => {
    const onlyLmStudio = await new ModelFolder(own, { sources: { lmstudio: dirs.lmstudio, huggingface: [] } }).scan()
    expect(onlyLmStudio.models.map((m) => m.source?.kind ?? 'hearth').sort()).toEqual(['hearth', 'lmstudio'])
    const none = await new ModelFolder(own).scan()
    expect(none.models.map((m) => m.id)).toEqual(['shadowed:latest'])
    expect(none.broken).toEqual([])
  })
})

describe("Hearth's own folder", () => {
  it('serves a split model by its first part, as the stores do', async () => {
    const dir = mkdtempSync(join(root, 'split-'))
    writeTinyLlama(join(dir, 'big-00001-of-00002.gguf'))
    writeFileSync(join(dir, 'big-00002-of-00002.gguf'), 'the second part')
    expect((await new ModelFolder(dir).scan()).models.map((m) => m.id)).toEqual(['big'])
  })
})

describe('the stores are read only', () => {
  it('refuses to remove their models, naming the command that does, and writes nothing in them', async () => {
    const before = Object.fromEntries(
      Object.values(dirs)
        .flat()
        .map((d) => [d, tree(d)]),
    )
    const folder = new ModelFolder(own, { sources: dirs })
    const { models } = await folder.scan()
    expect(models.length).toBeGreaterThan(6)
    await expect(removeModel(folder, 'llama3.2:3b')).rejects.toMatchObject({
      code: 'invalid_value',
      param: 'id',
      message: expect.stringMatching(/^llama3\.2:3b is in Ollama's store \(.*\), which Hearth only reads: remove it with `ollama rm llama3\.2:3b`$/),
    })
    await expect(removeModel(folder, 'lora:latest')).rejects.toThrow(/only reads.*ollama rm lora:latest/)
    await expect(removeModel(folder, 'lmstudio/lmstudio-community/Tiny-GGUF/Tiny-Q4_K_M')).rejects.toThrow(
      /LM Studio's models folder .* which Hearth only reads/,
    )
    await expect(removeModel(folder, 'hf/ggml-org/tiny-GGUF/tiny-Q8_0')).rejects.toThrow(/the Hugging Face cache .* which Hearth only reads/)
    await expect(removeModel(folder, 'llama.cpp/ggml-org_tiny-GGUF_tiny-q8_0')).rejects.toThrow(/llama.cpp's download cache/)
    expect(
      Object.fromEntries(
        Object.values(dirs)
          .flat()
          .map((d) => [d, tree(d)]),
      ),
    ).toEqual(before)
    // Hearth's own models are removed as before.
    writeTinyLlama(join(own, 'goes.gguf'))
    expect(await removeModel(folder, 'goes')).toEqual({ id: 'goes', files: ['goes.gguf'] })
  })
})

describe('where the stores are', () => {
  it('follows each program’s own variables, and LM Studio’s chosen folder', () => {
    const home = join(root, 'home')
    mkdirSync(join(home, '.lmstudio'), { recursive: true })
    writeFileSync(join(home, '.lmstudio', 'settings.json'), JSON.stringify({ downloadsFolder: '/mnt/models/lmstudio' }))
    expect(defaultModelSources({ HOME: home }, 'linux')).toEqual({
      ollama: [join(home, '.ollama', 'models')],
      lmstudio: ['/mnt/models/lmstudio', join(home, '.lmstudio', 'models'), join(home, '.cache', 'lm-studio', 'models')],
      huggingface: [join(home, '.cache', 'huggingface', 'hub')],
      'llama.cpp': [join(home, '.cache', 'llama.cpp')],
    })
    expect(defaultModelSources({ HOME: home, OLLAMA_MODELS: ' "/srv/ollama" ', HF_HOME: '/srv/hf', LLAMA_CACHE: '/srv/llama' }, 'linux')).toMatchObject({
      ollama: ['/srv/ollama'],
      huggingface: ['/srv/hf/hub'],
      'llama.cpp': ['/srv/llama'],
    })
    expect(defaultModelSources({ HOME: home, HF_HUB_CACHE: '/srv/hub', XDG_CACHE_HOME: '/xdg' }, 'linux')).toMatchObject({
      huggingface: ['/srv/hub'],
      'llama.cpp': ['/xdg/llama.cpp'],
    })
    expect(defaultModelSources({ HOME: home }, 'darwin')['llama.cpp']).toEqual([join(home, 'Library', 'Caches', 'llama.cpp')])
  })
})

describe('what a GGUF says of itself', () => {
  it('counts parameters from the tensor infos and names the quantization, on real files', async () => {
    for (const [file, fileType] of [
      ['models/stories260K.gguf', undefined],
      ['models/llama-2-tiny-random.gguf', 'F16'],
    ] as const) {
      const path = sharedFixture(file)
      if (!path) continue
      const reference = await gguf(path, { allowLocalFile: true })
      const elements = reference.tensorInfos.reduce((sum, t) => sum + t.shape.reduce((n, d) => n * Number(d), 1), 0)
      const header = await readModelFileHeader(path)
      expect(header).toMatchObject({ format: 'gguf', parameterCount: elements, fileType, architecture: 'llama' })
      if (header.format === 'gguf') expect(header.tensorsByPrefix!.blk).toBe(reference.tensorInfos.filter((t) => t.name.startsWith('blk.')).length)
    }
  })

  it('knows the architectures of the llama.cpp Hearth builds', () => {
    expect(LLAMA_CPP_COMMIT).toBe(LLAMA_SOURCE.commit)
    const source = join(engineCacheDir(), `src-${LLAMA_SOURCE.commit.slice(0, 12)}`, 'src', 'llama-arch.cpp')
    if (!existsSync(source)) return
    const table = /LLM_ARCH_NAMES = \{([\s\S]*?)\n\};/.exec(readFileSync(source, 'utf8'))![1]!
    const names = [...table.matchAll(/"([^"]+)"/g)].map((m) => m[1]!).filter((n) => n !== 'clip' && n !== '(unknown)')
    expect([...LLAMA_ARCHITECTURES].sort()).toEqual(names.sort())
  })
})
