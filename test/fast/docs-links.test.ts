/**
 * The README is the front door and the rest lives in docs/: every relative link and `#anchor` in
 * README.md and docs/*.md must lead to a file that exists and a heading it has (GitHub's slugs), and
 * the README stays short.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'

const ROOT = resolve(import.meta.dirname, '../..')
const README_MAX_LINES = 200

const FILES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
]

interface Link {
  line: number
  text: string
  target: string
}

/** The lines outside fenced code blocks, as written, numbered from 1. */
function outsideFences(file: string): { line: number; text: string }[] {
  const lines = readFileSync(join(ROOT, file), 'utf8').split('\n')
  const kept: { line: number; text: string }[] = []
  let fence: string | null = null
  lines.forEach((text, i) => {
    const marker = /^\s*(`{3,}|~{3,})/.exec(text)?.[1]
    if (fence !== null) {
      if (marker && marker[0] === fence[0] && marker.length >= fence.length) fence = null
      return
    }
    if (marker) {
      fence = marker
      return
    }
    kept.push({ line: i + 1, text })
  })
  return kept
}

/** The lines outside fenced code blocks, with inline code blanked, numbered from 1. */
function proseLines(file: string): { line: number; text: string }[] {
  return outsideFences(file).map(({ line, text }) => ({ line, text: text.replace(/(`+)[^`]*?\1/g, (m) => ' '.repeat(m.length)) }))
}

/** GitHub's heading ids: the rendered text, lowercased, punctuation but `-` and `_` dropped, each space a `-`. */
function slug(heading: string): string {
  const rendered = heading
    .replace(/`([^`]*)`/g, '$1')
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/(\*\*|__|\*)(.+?)\1/g, '$2')
    .replace(/<[^>]+>/g, '')
  return rendered
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-')
}

const anchorCache = new Map<string, string[]>()

/** Every heading id of a Markdown file, repeated headings numbered as GitHub does (`-1`, `-2`). */
function anchorsOf(file: string): string[] {
  const cached = anchorCache.get(file)
  if (cached) return cached
  const seen = new Map<string, number>()
  const anchors: string[] = []
  for (const { text } of outsideFences(file)) {
    const heading = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(text)?.[1]
    if (heading === undefined) continue
    const base = slug(heading)
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    anchors.push(n === 0 ? base : `${base}-${n}`)
  }
  anchorCache.set(file, anchors)
  return anchors
}

function linksOf(file: string): Link[] {
  const links: Link[] = []
  for (const { line, text } of proseLines(file)) {
    for (const m of text.matchAll(/!?\[((?:[^[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g)) {
      links.push({ line, text: m[1]!, target: m[2]! })
    }
  }
  return links
}

/** What is wrong with a link, or null when it leads somewhere real. */
function problemWith(file: string, link: Link): string | null {
  const { target } = link
  if (target === '') return 'the link has no target'
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return null // http(s), mailto: not ours to check
  const hash = target.indexOf('#')
  const pathPart = decodeURIComponent(hash === -1 ? target : target.slice(0, hash))
  const anchor = hash === -1 ? null : decodeURIComponent(target.slice(hash + 1))
  const resolved = pathPart === '' ? join(ROOT, file) : pathPart.startsWith('/') ? join(ROOT, pathPart) : resolve(ROOT, dirname(file), pathPart)
  const shown = relative(ROOT, resolved)
  if (shown.startsWith('..')) return `${pathPart} is outside the repository (GitHub cannot show it)`
  if (!existsSync(resolved)) return `${shown} does not exist`
  if (anchor === null || anchor === '') return null
  if (!statSync(resolved).isFile() || !shown.endsWith('.md')) return `#${anchor} points into ${shown}, which is not a Markdown file`
  const anchors = anchorsOf(shown)
  if (anchors.includes(anchor)) return null
  return `${shown} has no heading #${anchor}; its headings are ${anchors.map((a) => `#${a}`).join(', ')}`
}

describe('documentation links', () => {
  it(`README.md is the front door: at most ${README_MAX_LINES} lines`, () => {
    const lines = readFileSync(join(ROOT, 'README.md'), 'utf8').replace(/\n$/, '').split('\n').length
    expect(lines, `README.md has ${lines} lines; move detail into a page under docs/`).toBeLessThanOrEqual(README_MAX_LINES)
  })

  it('the headings are slugged as GitHub does', () => {
    expect(slug("Anthropic's Messages API")).toBe('anthropics-messages-api')
    expect(slug('Completions (autocomplete and fill-in-the-middle)')).toBe('completions-autocomplete-and-fill-in-the-middle')
    expect(slug('Claude Code 2.1.328 → `POST /v1/messages`')).toBe('claude-code-21328--post-v1messages')
    expect(slug('Loading, memory and GPUs')).toBe('loading-memory-and-gpus')
  })

  it('finds the links to check', () => {
    expect(linksOf('README.md').length).toBeGreaterThan(10)
  })

  it('docs/README.md and README.md link every page under docs/', () => {
    const pages = FILES.filter((f) => f.startsWith('docs/') && f !== 'docs/README.md')
    const fromIndex = new Set(linksOf('docs/README.md').map((l) => `docs/${l.target.split('#')[0]}`))
    const fromReadme = new Set(linksOf('README.md').map((l) => l.target.split('#')[0]))
    expect(
      pages.filter((p) => !fromIndex.has(p)),
      'pages missing from the index in docs/README.md',
    ).toEqual([])
    expect(
      pages.filter((p) => !fromReadme.has(p)),
      "pages missing from README.md's Documentation section",
    ).toEqual([])
  })

  it.each(FILES)('%s: every relative link leads to a file, and every #anchor to a heading there', (file) => {
    const broken = linksOf(file).flatMap((link) => {
      const problem = problemWith(file, link)
      return problem === null ? [] : [`${file}:${link.line}: [${link.text}](${link.target}): ${problem}`]
    })
    expect(broken, `broken links in ${file}:\n${broken.join('\n')}\n`).toEqual([])
  })
})
