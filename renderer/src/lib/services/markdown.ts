/**
 * Enough Markdown for model answers: fenced code blocks, headings, lists, quotes, rules,
 * paragraphs; inline code, bold, italics and links. It builds a tree the Markdown component renders
 * with ordinary Svelte markup, never as HTML, so whatever a model writes can only ever be text.
 * An unfinished code fence (the answer is still streaming) is shown as code already.
 */

export type Inline =
  | { type: 'text'; text: string }
  | { type: 'code'; text: string }
  | { type: 'strong'; text: string }
  | { type: 'em'; text: string }
  | { type: 'link'; text: string; href: string }

export type Block =
  | { type: 'code'; lang: string; text: string; open: boolean }
  | { type: 'heading'; level: 1 | 2 | 3 | 4 | 5 | 6; inline: Inline[] }
  | { type: 'list'; ordered: boolean; start: number; items: Inline[][] }
  | { type: 'quote'; inline: Inline[] }
  | { type: 'rule' }
  | { type: 'paragraph'; inline: Inline[] }

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/
const BULLET = /^ {0,3}[-*+]\s+(.*)$/
const ORDERED = /^ {0,3}(\d{1,9})[.)]\s+(.*)$/
const QUOTE = /^ {0,3}>\s?(.*)$/
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/

export function parseMarkdown(source: string): Block[] {
  const lines = source.replace(/\r\n?/g, '\n').split('\n')
  const blocks: Block[] = []
  let i = 0
  while (i < lines.length) {
    const line = lines[i]!
    const fence = FENCE.exec(line)
    if (fence) {
      const marker = fence[1]!
      const body: string[] = []
      i++
      while (i < lines.length && !lines[i]!.trimStart().startsWith(marker)) body.push(lines[i++]!)
      const open = i >= lines.length
      i++
      blocks.push({ type: 'code', lang: fence[2] ?? '', text: body.join('\n'), open })
      continue
    }
    if (line.trim() === '') {
      i++
      continue
    }
    const heading = HEADING.exec(line)
    if (heading) {
      blocks.push({ type: 'heading', level: heading[1]!.length as 1 | 2 | 3 | 4 | 5 | 6, inline: parseInline(heading[2]!) })
      i++
      continue
    }
    if (RULE.test(line)) {
      blocks.push({ type: 'rule' })
      i++
      continue
    }
    if (QUOTE.test(line)) {
      const quoted: string[] = []
      while (i < lines.length && QUOTE.test(lines[i]!)) quoted.push(QUOTE.exec(lines[i++]!)![1]!)
      blocks.push({ type: 'quote', inline: parseInline(quoted.join('\n')) })
      continue
    }
    const ordered = ORDERED.exec(line)
    if (ordered || BULLET.test(line)) {
      const pattern = ordered ? ORDERED : BULLET
      const items: string[] = []
      while (i < lines.length) {
        const current = lines[i]!
        const match = pattern.exec(current)
        if (match) items.push(match[ordered ? 2 : 1]!)
        else if (current.trim() !== '' && /^\s+/.test(current) && items.length > 0) items[items.length - 1] += `\n${current.trim()}`
        else break
        i++
      }
      blocks.push({ type: 'list', ordered: !!ordered, start: ordered ? Number(ordered[1]) : 1, items: items.map(parseInline) })
      continue
    }
    const paragraph: string[] = []
    while (i < lines.length) {
      const current = lines[i]!
      if (current.trim() === '' || FENCE.test(current) || HEADING.test(current) || QUOTE.test(current) || BULLET.test(current) || ORDERED.test(current)) break
      paragraph.push(current)
      i++
    }
    blocks.push({ type: 'paragraph', inline: parseInline(paragraph.join('\n')) })
  }
  return blocks
}

/**
 * Every alternative stops at the next delimiter or line end, so matching stays linear however much
 * odd punctuation a model produces (an answer is re-parsed many times while it streams).
 */
const INLINE = /(`{1,2})([^`\n]+)\1(?!`)|\*\*([^*\n]+)\*\*|__([^_\n]+)__|\*([^*\s][^*\n]*)\*|(?<![\w])_([^_\s][^_\n]*)_(?![\w])|\[([^\]\n]+)\]\(([^)\s]+)\)/g

export function parseInline(text: string): Inline[] {
  const out: Inline[] = []
  let last = 0
  const pushText = (t: string) => {
    if (!t) return
    const previous = out[out.length - 1]
    if (previous?.type === 'text') previous.text += t
    else out.push({ type: 'text', text: t })
  }
  for (const m of text.matchAll(INLINE)) {
    pushText(text.slice(last, m.index))
    last = m.index + m[0].length
    if (m[1] !== undefined) out.push({ type: 'code', text: m[2]!.replace(/^ (.*) $/, '$1') })
    else if (m[3] !== undefined || m[4] !== undefined) out.push({ type: 'strong', text: (m[3] ?? m[4])! })
    else if (m[5] !== undefined || m[6] !== undefined) out.push({ type: 'em', text: (m[5] ?? m[6])! })
    else {
      const href = safeHref(m[8]!)
      if (href) out.push({ type: 'link', text: m[7]!, href })
      else pushText(m[0])
    }
  }
  pushText(text.slice(last))
  return out
}

/** Only web links: a model must not be able to offer javascript:, file: or app: URLs. */
export function safeHref(href: string): string | undefined {
  try {
    const url = new URL(href)
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : undefined
  } catch {
    return undefined
  }
}
