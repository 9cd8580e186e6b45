/**
 * Seeded generators of bad input for the fuzz suite: odd JSON values, mutations of a valid request
 * body (raw text corruptions included), odd ids for paths, and mutated bytes. The same seed gives
 * the same requests, so a failure can be replayed.
 */
import { createRng } from './tiny-models.ts'

export const WEIRD_STRINGS: readonly string[] = [
  '',
  ' ',
  '\u0000',
  '\u0000'.repeat(64),
  '\ud800', // a lone surrogate
  '\udfff\ud800',
  '\ufeff',
  '\u202e\u202d',
  '😀'.repeat(50),
  'ǅ\u0301\u0308'.repeat(20),
  '\r\n\r\n',
  '../../../../etc/passwd',
  '..\\..\\..\\windows\\win.ini',
  '/etc/passwd',
  '%2e%2e%2f%2e%2e%2fetc%2fpasswd',
  'file:///etc/passwd',
  '\\\\server\\share\\x.gguf',
  'models.json',
  '.partial/x.gguf',
  '__proto__',
  'constructor',
  '{{ 7 * 7 }}{% for x in range(100000000) %}{% endfor %}',
  '<script>alert(1)</script>',
  "'; DROP TABLE models; --",
  'null',
  'NaN',
  'true',
  '-1',
  'data:image/png;base64,',
  'data:image/png;base64,!!!!',
  'http://127.0.0.1:1/x.png',
  'hf://../../x.gguf',
  'hf://org/repo/../../x.gguf',
  'a'.repeat(10_000),
  'word '.repeat(20_000),
]

export const WEIRD_NUMBERS: readonly number[] = [0, -0, -1, 1, 0.5, 1.5, -1e308, 1e308, 5e-324, 2 ** 31, 2 ** 32 + 1, 2 ** 53 + 2, -(2 ** 63), 123456789]

/** Number tokens JSON.stringify cannot produce, spliced in as raw text. */
export const RAW_NUMBER_TOKENS: readonly string[] = [
  '1e400',
  '-1e400',
  '1e-400',
  '-0.0',
  'NaN',
  'Infinity',
  '-Infinity',
  '0x10',
  '01',
  '1.',
  '.5',
  '+1',
  '123456789012345678901234567890',
]

export type JsonPath = Array<string | number>

export class Fuzz {
  private readonly next: () => number

  constructor(readonly seed: number) {
    this.next = createRng(seed)
  }

  float(): number {
    return this.next()
  }

  int(below: number): number {
    return Math.floor(this.next() * below)
  }

  chance(p: number): boolean {
    return this.next() < p
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!
  }

  string(): string {
    if (this.chance(0.6)) return this.pick(WEIRD_STRINGS)
    const length = this.pick([1, 3, 17, 255, 4096])
    let out = ''
    for (let i = 0; i < length; i++) out += String.fromCharCode(this.chance(0.8) ? 32 + this.int(95) : this.int(0x10000))
    return out
  }

  number(): number {
    return this.chance(0.7) ? this.pick(WEIRD_NUMBERS) : (this.float() - 0.5) * 10 ** this.int(20)
  }

  /** Any JSON value, nested a little. */
  value(depth = 0): unknown {
    const kind = this.int(depth > 2 ? 5 : 8)
    switch (kind) {
      case 0:
        return null
      case 1:
        return this.chance(0.5)
      case 2:
        return this.number()
      case 3:
      case 4:
        return this.string()
      case 5: {
        // Long arrays hold small things, so a value stays a few megabytes at most.
        const length = this.pick([0, 1, 2, 5, 3000])
        return Array.from({ length }, () => (depth > 1 || length > 5 ? this.pick([0, 'x', null, -1, {}]) : this.value(depth + 1)))
      }
      case 6:
        return Object.fromEntries(
          Array.from({ length: this.int(4) }, () => [this.pick(['type', 'text', 'role', 'url', '__proto__', 'x', '']), this.value(depth + 1)]),
        )
      default:
        return this.nested(this.pick([5, 50, 500]))
    }
  }

  /** Arrays or objects nested `depth` deep (deeper nesting goes in as raw text: see deepText). */
  nested(depth: number): unknown {
    let v: unknown = this.pick(['x', 1, null])
    for (let i = 0; i < depth; i++) v = this.chance(0.5) ? [v] : { a: v }
    return v
  }

  /** JSON text nested `depth` deep, deeper than JSON.stringify could write. */
  deepText(depth: number): string {
    return this.chance(0.5) ? `${'['.repeat(depth)}1${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`
  }

  /** Every path into a JSON value, the root included. */
  static paths(value: unknown, prefix: JsonPath = []): JsonPath[] {
    const out: JsonPath[] = [prefix]
    if (Array.isArray(value)) value.forEach((v, i) => out.push(...Fuzz.paths(v, [...prefix, i])))
    else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) out.push(...Fuzz.paths(v, [...prefix, k]))
    return out
  }

  /** A mutation of a valid body, as the text to send and a note saying what was done. */
  mutateJson(base: unknown): { text: string; note: string } {
    const copy = structuredClone(base)
    const paths = Fuzz.paths(copy)
    const path = this.pick(paths)
    const kind = this.int(10)
    switch (kind) {
      case 0:
      case 1:
      case 2: {
        const v = this.value()
        return { text: stringify(setAt(copy, path, v)), note: `set ${fmtPath(path)} to ${preview(v)}` }
      }
      case 3:
        return { text: stringify(deleteAt(copy, path)), note: `delete ${fmtPath(path)}` }
      case 4: {
        const depth = this.pick([3, 100, 5_000, 100_000])
        const text = stringify(setAt(copy, path, '__DEEP__')).replace('"__DEEP__"', this.deepText(depth))
        return { text, note: `nested ${depth} deep at ${fmtPath(path)}` }
      }
      case 5: {
        const token = this.pick(RAW_NUMBER_TOKENS)
        const text = stringify(setAt(copy, path, '__RAW__')).replace('"__RAW__"', token)
        return { text, note: `raw ${token} at ${fmtPath(path)}` }
      }
      case 6: {
        const text = stringify(copy)
        const cut = this.int(text.length)
        return { text: text.slice(0, cut), note: `truncated at ${cut}` }
      }
      case 7: {
        const text = stringify(copy)
        const junk = this.pick(['}', ']', ',', '//x', '/*', '\u0000', "'", '"', 'garbage', '\ufeff', ',,,'])
        const at = this.int(text.length + 1)
        return { text: text.slice(0, at) + junk + text.slice(at), note: `inserted ${stringify(junk)} at ${at}` }
      }
      case 8: {
        const v = this.value()
        return { text: stringify(v), note: `whole body ${preview(v)}` }
      }
      default: {
        // An array at the path grows huge, or a value is wrapped.
        const target = getAt(copy, path)
        const v = Array.isArray(target) ? Array.from({ length: this.pick([100, 2049, 5000]) }, () => target[0] ?? 'x') : [target]
        return { text: stringify(setAt(copy, path, v)), note: `grow/wrap ${fmtPath(path)}` }
      }
    }
  }

  /** Flips, cuts or splices random bytes. */
  mutateBytes(bytes: Buffer): { bytes: Buffer; note: string } {
    const out = Buffer.from(bytes)
    switch (this.int(6)) {
      case 0: {
        const n = 1 + this.int(8)
        for (let i = 0; i < n; i++) out[this.int(Math.min(out.length, 128))] = this.int(256)
        return { bytes: out, note: `${n} header bytes changed` }
      }
      case 1: {
        const n = 1 + this.int(64)
        for (let i = 0; i < n; i++) out[this.int(out.length)] = this.int(256)
        return { bytes: out, note: `${n} bytes changed` }
      }
      case 2: {
        const cut = this.int(out.length)
        return { bytes: out.subarray(0, cut), note: `truncated to ${cut}` }
      }
      case 3: {
        const junk = Buffer.from(Array.from({ length: 1 + this.int(64) }, () => this.int(256)))
        return { bytes: Buffer.concat([junk, out]), note: `${junk.length} junk bytes before` }
      }
      case 4:
        return { bytes: Buffer.alloc(this.pick([0, 1, 12, 44, 4096]), this.int(256)), note: 'constant bytes' }
      default: {
        const from = this.int(out.length)
        const length = this.int(Math.min(4096, out.length - from))
        return { bytes: Buffer.concat([out.subarray(0, from), out.subarray(from + length)]), note: `cut ${length} bytes at ${from}` }
      }
    }
  }
}

function stringify(v: unknown): string {
  return JSON.stringify(v) ?? ''
}

function fmtPath(path: JsonPath): string {
  return path.length === 0 ? '(root)' : path.join('.')
}

function preview(v: unknown): string {
  const text = JSON.stringify(v) ?? String(v)
  return text.length > 60 ? `${text.slice(0, 60)}… (${text.length} chars)` : text
}

function getAt(root: unknown, path: JsonPath): unknown {
  let v = root
  for (const p of path) v = (v as Record<string | number, unknown>)[p]
  return v
}

function setAt(root: unknown, path: JsonPath, value: unknown): unknown {
  if (path.length === 0) return value
  const parent = getAt(root, path.slice(0, -1)) as Record<string | number, unknown>
  const key = path.at(-1)!
  if (key === '__proto__') Object.defineProperty(parent, key, { value, enumerable: true, configurable: true, writable: true })
  else parent[key] = value
  return root
}

function deleteAt(root: unknown, path: JsonPath): unknown {
  if (path.length === 0) return undefined
  const parent = getAt(root, path.slice(0, -1))
  const key = path.at(-1)!
  if (Array.isArray(parent)) parent.splice(key as number, 1)
  else delete (parent as Record<string, unknown>)[key as string]
  return root
}
