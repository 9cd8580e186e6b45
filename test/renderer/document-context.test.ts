/** Documents in the chat: the question with its excerpts, the sources, and which files count. */
import { describe, expect, it } from 'vitest'
import type { ChatTurn } from '../../renderer/src/lib/services/chat-messages.ts'
import {
  citationsOf,
  conversationDocuments,
  documentsPrompt,
  estimateTokens,
  isDocumentFile,
  type ContextPart,
} from '../../renderer/src/lib/services/document-context.ts'

const part = (citation: number, document: string, name: string, text: string, start = 0): ContextPart => ({ citation, document, name, text, start, end: start + text.length })

describe('documentsPrompt', () => {
  it('puts whole documents before the question, numbered to cite', () => {
    const text = documentsPrompt([part(1, 'd1', 'notes.txt', 'The door code is 4711.'), part(2, 'd2', 'plan.md', '# Plan\nShip it.')], 'What is the code?')
    expect(text).toBe(
      'Use these excerpts from the attached documents. Cite them as [1], [2]…\n\n' +
        '[1] notes.txt\nThe door code is 4711.\n\n' +
        '[2] plan.md\n# Plan\nShip it.\n\n' +
        'Question: What is the code?',
    )
  })

  it("names the part of a document when several of its excerpts are given, in the document's order", () => {
    const parts = [part(1, 'd1', 'book.pdf', 'later', 900), part(2, 'd1', 'book.pdf', 'earlier', 10), part(3, 'd2', 'a.txt', 'other')]
    expect(documentsPrompt(parts, 'Q')).toContain('[1] book.pdf (part 2)\nlater\n\n[2] book.pdf (part 1)\nearlier\n\n[3] a.txt\nother')
    expect(citationsOf(parts)).toEqual([
      { n: 1, name: 'book.pdf (part 2)', text: 'later' },
      { n: 2, name: 'book.pdf (part 1)', text: 'earlier' },
      { n: 3, name: 'a.txt', text: 'other' },
    ])
  })

  it('leaves the question alone when there are no parts', () => {
    expect(documentsPrompt([], 'Hi')).toBe('Hi')
  })
})

describe('documents of a conversation', () => {
  it('lists each attached document once, oldest first', () => {
    const turns: ChatTurn[] = [
      { id: '1', role: 'user', text: 'a', documents: [{ id: 'x', name: 'x.txt' }] },
      { id: '2', role: 'assistant', text: 'b' },
      { id: '3', role: 'user', text: 'c', documents: [{ id: 'y', name: 'y.md' }, { id: 'x', name: 'x.txt' }] },
    ]
    expect(conversationDocuments(turns).map((d) => d.id)).toEqual(['x', 'y'])
  })

  it('takes .txt .md .pdf .docx (and text/plain), not pictures or spreadsheets', () => {
    expect(isDocumentFile({ name: 'Report.PDF', type: '' })).toBe(true)
    expect(isDocumentFile({ name: 'a.docx', type: '' })).toBe(true)
    expect(isDocumentFile({ name: 'README.md', type: '' })).toBe(true)
    expect(isDocumentFile({ name: 'log', type: 'text/plain' })).toBe(true)
    expect(isDocumentFile({ name: 'a.png', type: 'image/png' })).toBe(false)
    expect(isDocumentFile({ name: 'a.xlsx', type: '' })).toBe(false)
  })

  it('estimates tokens from the words of the messages', () => {
    expect(estimateTokens([{ role: 'user', content: 'x'.repeat(35) }, { role: 'user', content: [{ type: 'text', text: 'y'.repeat(7) }] }])).toBe(12)
  })
})
