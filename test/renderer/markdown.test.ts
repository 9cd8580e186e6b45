/** Answers rendered as Markdown: code blocks (also while streaming), and nothing that runs. */
import { describe, expect, it } from 'vitest'
import { parseInline, parseMarkdown, safeHref } from '../../renderer/src/lib/services/markdown.ts'
import { clientSnippets, maskKey } from '../../renderer/src/lib/services/snippets.ts'

describe('parseMarkdown', () => {
  it('finds code blocks with their language', () => {
    expect(parseMarkdown('Try this:\n\n```js\nconsole.log(1)\n```\nDone.')).toEqual([
      { type: 'paragraph', inline: [{ type: 'text', text: 'Try this:' }] },
      { type: 'code', lang: 'js', text: 'console.log(1)', open: false },
      { type: 'paragraph', inline: [{ type: 'text', text: 'Done.' }] },
    ])
  })

  it('shows an unfinished fence as code while the answer streams', () => {
    expect(parseMarkdown('```py\nprint(')).toEqual([{ type: 'code', lang: 'py', text: 'print(', open: true }])
  })

  it('reads headings, lists, quotes and rules', () => {
    const blocks = parseMarkdown('# Title\n- one\n- two\n\n3. three\n4. four\n\n> quoted\n\n---')
    expect(blocks.map((b) => b.type)).toEqual(['heading', 'list', 'list', 'quote', 'rule'])
    expect(blocks[2]).toMatchObject({ ordered: true, start: 3 })
  })

  it('keeps HTML as text: the renderer never interprets it', () => {
    const blocks = parseMarkdown('<img src=x onerror=alert(1)> <script>alert(1)</script>')
    expect(blocks).toEqual([{ type: 'paragraph', inline: [{ type: 'text', text: '<img src=x onerror=alert(1)> <script>alert(1)</script>' }] }])
  })
})

describe('parsing speed', () => {
  it('stays linear on long, punctuation-heavy answers (they are re-parsed while streaming)', () => {
    let seed = 7
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31
    const pieces = ['`', '*', '_', '**', '[', ']', '(', ')', ' ', 'word', 'x', '\n', '#', '-', '>']
    let text = ''
    while (text.length < 200_000) text += pieces[Math.floor(random() * pieces.length)]
    const started = performance.now()
    const blocks = parseMarkdown(text)
    expect(blocks.length).toBeGreaterThan(0)
    expect(performance.now() - started).toBeLessThan(1000)
    const line = text.replace(/\n/g, ' ')
    const t2 = performance.now()
    parseMarkdown(line)
    expect(performance.now() - t2).toBeLessThan(1000)
  })
})

describe('parseInline', () => {
  it('reads code, bold, italics and links', () => {
    expect(parseInline('a `b` **c** *d* _e_ [f](https://example.com/)')).toEqual([
      { type: 'text', text: 'a ' },
      { type: 'code', text: 'b' },
      { type: 'text', text: ' ' },
      { type: 'strong', text: 'c' },
      { type: 'text', text: ' ' },
      { type: 'em', text: 'd' },
      { type: 'text', text: ' ' },
      { type: 'em', text: 'e' },
      { type: 'text', text: ' ' },
      { type: 'link', text: 'f', href: 'https://example.com/' },
    ])
  })

  it('leaves snake_case words alone', () => {
    expect(parseInline('max_tokens and top_k')).toEqual([{ type: 'text', text: 'max_tokens and top_k' }])
  })

  it('refuses links that are not web links', () => {
    expect(safeHref('javascript:alert(1)')).toBeUndefined()
    expect(safeHref('file:///etc/passwd')).toBeUndefined()
    expect(safeHref('app://hearth/index.html')).toBeUndefined()
    expect(parseInline('[x](javascript:alert(1))')).toEqual([{ type: 'text', text: '[x](javascript:alert(1))' }])
  })
})

describe('client snippets', () => {
  it('fills in the address, key and model, quoting the key for the shell', () => {
    const [curl, node, python] = clientSnippets({ address: 'http://127.0.0.1:8181', apiKey: "k'ey", model: 'org/m:q4' })
    expect(curl!.code).toContain('curl http://127.0.0.1:8181/v1/chat/completions')
    expect(curl!.code).toContain(`-H 'Authorization: Bearer k'\\''ey'`)
    expect(node!.code).toContain(`baseURL: "http://127.0.0.1:8181/v1", apiKey: "k'ey"`)
    expect(python!.code).toContain(`base_url="http://127.0.0.1:8181/v1", api_key="k'ey"`)
    expect(python!.code).toContain('model="org/m:q4"')
  })

  it('masks a key for display', () => {
    expect(maskKey('hearth-abcdefghijklmnopqrstuvwx')).toBe('hearth-••••••••uvwx')
    expect(maskKey('short')).toBe('••••••••')
  })
})
