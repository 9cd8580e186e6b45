/**
 * Imports point one way: renderer → (HTTP) → main/server → engines → models, and media, which needs
 * neither. The renderer reaches past HTTP only for types, from the two modules meant for it; the
 * server never needs Electron.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'

const ROOT = resolve(import.meta.dirname, '../..')

interface Import {
  from: string
  /** Resolved path relative to the project, or the bare package name. */
  target: string
  typeOnly: boolean
}

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => /\.(ts|svelte)$/.test(f) && !f.includes('node_modules') && !f.startsWith('dist'))
    .map((f) => join(dir, f))
}

function importsOf(file: string): Import[] {
  const text = readFileSync(join(ROOT, file), 'utf8')
  const found: Import[] = []
  for (const m of text.matchAll(
    /^\s*(import|export)\s+(type\s+)?[^'"]*?from\s+['"]([^'"]+)['"]|^\s*import\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/gm,
  )) {
    const spec = m[3] ?? m[4] ?? m[5]!
    const typeOnly = m[2] !== undefined
    const target = spec.startsWith('.') ? relative(ROOT, resolve(ROOT, dirname(file), spec)) : spec
    found.push({ from: file, target, typeOnly })
  }
  return found
}

const all = ['main', 'preload', 'engines', 'models', 'media', 'renderer/src'].flatMap(sourceFiles).flatMap(importsOf)
const under = (prefix: string) => all.filter((i) => i.from.startsWith(prefix))
const describeImport = (i: Import) => `${i.from} → ${i.target}${i.typeOnly ? ' (type)' : ''}`

describe('imports point one way', () => {
  it('finds the imports it checks', () => {
    expect(under('renderer/src').length).toBeGreaterThan(50)
    expect(under('main/server').length).toBeGreaterThan(100)
  })

  it('engines, models and media import nothing of main, preload or the renderer', () => {
    const wrong = ['engines', 'models', 'media'].flatMap((room) => under(`${room}/`)).filter((i) => /^(main|preload|renderer)\//.test(i.target))
    expect(['engines', 'models', 'media'].every((room) => under(`${room}/`).length > 0)).toBe(true)
    expect(wrong.map(describeImport)).toEqual([])
  })

  it('what ships imports nothing of the tests or the bench (the real-model fetcher lives in test/support)', () => {
    const wrong = all.filter((i) => /^(test|bench)\//.test(i.target))
    expect(wrong.map(describeImport)).toEqual([])
  })

  it('models import nothing of the engines: the catalog describes models, engines run them', () => {
    const wrong = under('models/').filter((i) => i.target.startsWith('engines/'))
    expect(wrong.map(describeImport)).toEqual([])
  })

  it('media imports nothing of the engines or the models: it readies what clients send', () => {
    const wrong = under('media/').filter((i) => /^(engines|models)\//.test(i.target))
    expect(wrong.map(describeImport)).toEqual([])
  })

  it('the server runs without Electron and never reaches into the shell or the renderer', () => {
    const wrong = under('main/server').filter((i) => i.target === 'electron' || /^(main\/electron|renderer|preload)\//.test(i.target))
    expect(wrong.map(describeImport)).toEqual([])
    const electronUsers = all.filter((i) => i.target === 'electron').map((i) => i.from)
    expect(electronUsers.every((f) => /^(main\/electron|preload)\//.test(f))).toBe(true)
  })

  it('the renderer takes only types from beyond HTTP, from the modules made for it', () => {
    const outside = under('renderer/src').filter((i) => /^(main|preload|engines|models|media)\//.test(i.target))
    expect(outside.length).toBeGreaterThan(0)
    const wrong = outside.filter((i) => !i.typeOnly || !['main/server/wire-types.ts', 'preload/hearth-bridge.ts'].includes(i.target))
    expect(wrong.map(describeImport)).toEqual([])
  })

  it('the server is in wings: protocols → http → services → engines, models and media', () => {
    const wings = ['http', 'protocols', 'services']
    expect(wings.every((wing) => under(`main/server/${wing}/`).length > 10)).toBe(true)
    // Only the composition (app.ts, server.ts) and the declarations every wing shares stay at the top.
    const top = readdirSync(join(ROOT, 'main/server')).filter((f) => f.endsWith('.ts'))
    expect(top.sort()).toEqual(['app.ts', 'server-context.ts', 'server.ts', 'settings.ts', 'wire-types.ts'])
    const composition = /^main\/server\/(app|server)\.ts$/
    const wrong = [
      ...under('main/server/services/').filter((i) => /^main\/server\/(http|protocols)\//.test(i.target) || composition.test(i.target)),
      ...under('main/server/http/').filter((i) => i.target.startsWith('main/server/protocols/') || composition.test(i.target)),
      ...under('main/server/protocols/').filter((i) => composition.test(i.target)),
    ]
    expect(wrong.map(describeImport)).toEqual([])
  })

  it('a protocol imports no other protocol but OpenAI’s, which every other one is converted into', () => {
    const protocolOf = (path: string) => /^main\/server\/protocols\/([^/]+)\//.exec(path)?.[1]
    const wrong = under('main/server/protocols/').filter((i) => {
      const [from, to] = [protocolOf(i.from), protocolOf(i.target)]
      return from !== undefined && to !== undefined && from !== to && to !== 'openai'
    })
    expect(under('main/server/protocols/').length).toBeGreaterThan(100)
    expect(wrong.map(describeImport)).toEqual([])
  })

  it('audio decoding stands alone: it imports nothing else of the project', () => {
    const wrong = under('media/audio').filter((i) => /^(main|preload|renderer|engines|models|media)\//.test(i.target) && !i.target.startsWith('media/audio/'))
    expect(wrong.map(describeImport)).toEqual([])
  })

  it('the wire types are declarations only: they import types and define no values', () => {
    const text = readFileSync(join(ROOT, 'main/server/wire-types.ts'), 'utf8')
    expect(importsOf('main/server/wire-types.ts').every((i) => i.typeOnly)).toBe(true)
    expect(text).not.toMatch(/^export\s+(const|function|class|let|enum)\b/m)
  })

  it('no two modules need each other at run time', () => {
    expect(cyclesAmong(all.filter((i) => !i.typeOnly))).toEqual([])
  })

  it('no two modules need each other, even for types', () => {
    expect(cyclesAmong(all)).toEqual([])
  })
})

/** Each loop of imports among the project's own modules, as `a → b → a`. */
function cyclesAmong(imports: Import[]): string[] {
  const edges = new Map<string, string[]>()
  for (const i of imports) if (/\.(ts|svelte)$/.test(i.target)) edges.set(i.from, [...(edges.get(i.from) ?? []), i.target])
  const cycles: string[] = []
  const state = new Map<string, 'open' | 'done'>()
  const visit = (file: string, path: string[]) => {
    if (state.get(file) === 'done') return
    if (state.get(file) === 'open') return void cycles.push([...path.slice(path.indexOf(file)), file].join(' → '))
    state.set(file, 'open')
    for (const next of edges.get(file) ?? []) visit(next, [...path, file])
    state.set(file, 'done')
  }
  for (const file of edges.keys()) visit(file, [])
  return cycles
}
