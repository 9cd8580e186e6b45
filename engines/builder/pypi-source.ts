/**
 * llama.cpp as llama-cpp-python's source distribution on PyPI carries it: the upstream tree under
 * `vendor/llama.cpp` with its git metadata (one commit deep), so the commit is upstream's own and
 * the archive is checked by the sha256 PyPI publishes for it. node-llama-cpp's bundle (our pin
 * today, pinned-source.ts) holds a squashed commit whose hash exists nowhere upstream.
 */
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { EngineBuildError, requireTool } from './pinned-source.ts'

export interface PypiSdist {
  project: string
  version: string
  sha256: string
  url: string
}

const SIMPLE_INDEX = 'https://pypi.org/simple'

/** The project's source archive for `version`, as PyPI's simple index lists it (with its sha256). */
export async function findSdist(project: string, version: string): Promise<PypiSdist> {
  const res = await fetch(`${SIMPLE_INDEX}/${project}/`, { headers: { accept: 'text/html' } })
  if (!res.ok) throw new EngineBuildError(`PyPI's index answered ${res.status} for ${project}`)
  const html = await res.text()
  const file = `${project.replace(/-/g, '_')}-${version}.tar.gz`
  const link = [...html.matchAll(/href="([^"]+)"/g)].map((m) => m[1]!.replace(/&amp;/g, '&')).find((href) => href.split('#')[0]!.endsWith(`/${file}`))
  const [url, fragment] = link?.split('#') ?? []
  const sha256 = fragment?.match(/^sha256=([0-9a-f]{64})$/)?.[1]
  if (!url || !sha256) throw new EngineBuildError(`PyPI lists no source archive ${file} with a sha256`)
  return { project, version, sha256, url }
}

/**
 * The llama.cpp tree inside the archive, extracted once under `cacheDir/src-<commit>`; checks the
 * archive's sha256 and, where `commit` is given, that the tree is that commit. Returns the tree and
 * its commit.
 */
export async function llamaTreeFromSdist(
  cacheDir: string,
  sdist: PypiSdist,
  commit: string | undefined,
  log: (line: string) => void,
): Promise<{ tree: string; commit: string }> {
  requireTool('tar', ['--version'], 'tar')
  requireTool('git', ['--version'], 'git')
  mkdirSync(cacheDir, { recursive: true })
  const archive = join(cacheDir, `${sdist.project}-${sdist.version}.tar.gz`)
  if (!existsSync(archive) || sha256Of(archive) !== sdist.sha256) {
    log(`fetching ${sdist.project} ${sdist.version} from PyPI`)
    const res = await fetch(sdist.url)
    if (!res.ok) throw new EngineBuildError(`PyPI answered ${res.status} for ${sdist.url}`)
    writeFileSync(archive, Buffer.from(await res.arrayBuffer()))
  }
  if (sha256Of(archive) !== sdist.sha256) {
    rmSync(archive, { force: true })
    throw new EngineBuildError(`${archive} does not match PyPI's sha256 ${sdist.sha256}`)
  }
  const scratch = join(cacheDir, `${sdist.project}-${sdist.version}.partial`)
  rmSync(scratch, { recursive: true, force: true })
  mkdirSync(scratch, { recursive: true })
  const top = `${sdist.project.replace(/-/g, '_')}-${sdist.version}`
  execFileSync('tar', ['-xzf', archive, '-C', scratch, `${top}/vendor/llama.cpp`, `${top}/.git`])
  const vendored = join(scratch, top, 'vendor/llama.cpp')
  const head = execFileSync('git', ['-C', vendored, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).trim()
  if (commit && !head.startsWith(commit)) throw new EngineBuildError(`${sdist.project} ${sdist.version} holds llama.cpp ${head}, not ${commit}`)
  const tree = join(cacheDir, `src-${head.slice(0, 12)}`)
  if (!existsSync(join(tree, '.hearth-complete'))) {
    rmSync(tree, { recursive: true, force: true })
    // The tree alone: its .git is a pointer into the archive's own metadata.
    rmSync(join(vendored, '.git'), { force: true })
    renameSync(vendored, tree)
    writeFileSync(join(tree, '.hearth-complete'), '')
  }
  rmSync(scratch, { recursive: true, force: true })
  return { tree, commit: head }
}

function sha256Of(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex')
}
