/**
 * Anthropic's citations of the documents an answer read (`citations: {enabled: true}` on a
 * `document` block): a whole answer's text split into blocks at each cited sentence, each with the
 * `char_location` of the part of its document the model was given. Pure: text in, blocks out.
 */
import { citedSources } from '../../services/documents/document-citations.ts'
import type { DocumentSource } from '../../services/documents/document-inputs.ts'
import type { DocumentBlocks } from './messages-conversion.ts'

export type CharLocation = {
  type: 'char_location'
  cited_text: string
  document_index: number
  document_title: string | null
  start_char_index: number
  end_char_index: number
}

export type TextBlock = {
  type: 'text'
  text: string
  citations?: CharLocation[]
}

/** What the answer may cite: the sources read for it, and which request document each came from. */
export interface CitableDocuments {
  sources: readonly DocumentSource[]
  /** The stored file each chat file part became, in order (DocumentInputs' `fileIds`). */
  fileIds: readonly string[]
  blocks: DocumentBlocks
}

/** The answer's text as Anthropic's text blocks: cut after each cited sentence, the citations on the block they end. */
export function citedTextBlocks(text: string, documents: CitableDocuments | undefined): TextBlock[] {
  const cited = documents ? citationsOf(text, documents) : []
  if (cited.length === 0) return [{ type: 'text', text }]
  const blocks: TextBlock[] = []
  let from = 0
  for (const { index, citation } of cited) {
    // Citations at the same place share a block.
    if (index > from || blocks.length === 0) {
      blocks.push({ type: 'text', text: text.slice(from, index), citations: [] })
      from = index
    }
    blocks.at(-1)!.citations!.push(citation)
  }
  if (from < text.length) blocks.push({ type: 'text', text: text.slice(from) })
  return blocks
}

/** Each citation of the answer's text in Anthropic's shape, with the place in the text it follows. */
export function citationsOf(text: string, documents: CitableDocuments): Array<{ index: number; citation: CharLocation }> {
  const found: Array<{ index: number; citation: CharLocation }> = []
  for (const { source, index } of citedSources(text, documents.sources)) {
    const block = documents.blocks.blocks[documents.fileIds.indexOf(source.fileId)]
    if (!block?.citations) continue
    found.push({
      index,
      citation: {
        type: 'char_location',
        cited_text: source.text,
        document_index: block.documentIndex,
        document_title: block.title,
        start_char_index: source.start,
        end_char_index: source.end,
      },
    })
  }
  return found.sort((a, b) => a.index - b.index)
}
