/**
 * A document's text from its bytes: the format from its magic bytes first and its name second,
 * then PDF (unpdf, pdf.js's text layer), Word .docx (mammoth) or text in whatever encoding it came
 * in. Every refusal names the file as the field at fault: the bytes are the client's.
 */
import { extname } from 'node:path'
import mammoth from 'mammoth'
import { getDocumentProxy } from 'unpdf'
import { ApiError } from '../api-error.ts'
import type { DocumentFormat } from '../../wire-types.ts'
import { documentUnreadable, MAX_DOCUMENT_CHARACTERS, tooMuchText, unsupportedDocumentType } from './document-errors.ts'

export interface ExtractedDocument {
  format: DocumentFormat
  /** Line ends as `\n`; the offsets of retrieved parts count in this text. */
  text: string
  pages?: number
}

const MARKDOWN_EXTENSIONS = new Set(['.md', '.markdown'])

export async function extractDocument(bytes: Buffer, filename: string): Promise<ExtractedDocument> {
  if (bytes.length === 0) throw documentUnreadable('The file is empty')
  const extension = extname(filename).toLowerCase()
  const extracted = await extractByFormat(bytes, extension)
  if (extracted.text.length > MAX_DOCUMENT_CHARACTERS) throw tooMuchText(extracted.text.length)
  if (extracted.text.trim() === '') {
    throw documentUnreadable(
      extracted.format === 'pdf'
        ? 'The PDF has no text layer: it is probably scanned pages (pictures of text), and Hearth does not read text from pictures. Run it through OCR first, or paste the text.'
        : 'The document has no text in it',
    )
  }
  return extracted
}

async function extractByFormat(bytes: Buffer, extension: string): Promise<ExtractedDocument> {
  // pdf.js takes a header anywhere in the first kilobyte (some writers put junk before it); a text
  // that merely mentions one is not a PDF, so past the start only a .pdf name counts.
  const pdfHeader = bytes.subarray(0, 1024).indexOf('%PDF-')
  if (pdfHeader === 0 || (pdfHeader > 0 && extension === '.pdf')) return readPdf(bytes)
  if (extension === '.pdf') throw documentUnreadable('The file is named .pdf but is not a PDF (it has no PDF header)')
  if (bytes.subarray(0, 4).equals(ZIP_MAGIC)) {
    // A zip's central directory holds the names uncompressed: a Word document names its body part.
    if (bytes.includes('word/document.xml')) return readDocx(bytes)
    throw unsupportedDocumentType(extension === '.docx' ? 'a .docx without a Word document body' : `a zip archive${extension ? ` (${extension})` : ''}`)
  }
  if (extension === '.docx') throw documentUnreadable('The file is named .docx but is not a Word document (it is not a zip archive)')
  if (bytes.subarray(0, 8).equals(OLE_MAGIC)) {
    throw unsupportedDocumentType('an Office 97-2003 file (.doc, .xls or .ppt); save it as .docx from Word first')
  }
  const text = decodeText(bytes)
  if (text === undefined) throw unsupportedDocumentType(`binary data${extension ? ` (${extension})` : ''}, not text`)
  if (MARKDOWN_EXTENSIONS.has(extension)) return { format: 'markdown', text }
  // Any other name (.txt, .csv, .log, none) whose bytes are text is read as text.
  if (!KNOWN_BINARY_EXTENSIONS.has(extension)) return { format: 'text', text }
  throw unsupportedDocumentType(extension)
}

const ZIP_MAGIC = Buffer.from([0x50, 0x4b, 0x03, 0x04])
const OLE_MAGIC = Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1])
/** Formats that happen to decode as text at times (RTF, SVG are text but not prose to quote). */
const KNOWN_BINARY_EXTENSIONS = new Set(['.rtf', '.svg', '.doc', '.xls', '.xlsx', '.ppt', '.pptx', '.odt', '.epub', '.zip'])

/**
 * pdf.js runs on this thread (unpdf's build has no worker): the text is read a page at a time,
 * giving the event loop a turn between pages, so other requests' streams keep flowing while a
 * long PDF is read, and reading stops at a deadline.
 */
async function readPdf(bytes: Buffer): Promise<ExtractedDocument> {
  const pages: string[] = []
  let characters = 0
  const deadline = performance.now() + PDF_DEADLINE_MS
  try {
    // pdf.js takes the buffer over (detaches it): it gets a copy. Verbosity 0 keeps its warnings off the log.
    const pdf = await getDocumentProxy(new Uint8Array(bytes), { verbosity: 0 })
    try {
      for (let n = 1; n <= pdf.numPages; n++) {
        if (performance.now() > deadline) throw new PdfTooSlow()
        const page = await pdf.getPage(n)
        const content = await page.getTextContent()
        pages.push(content.items.map((item) => ('str' in item ? item.str + (item.hasEOL ? '\n' : '') : '')).join(''))
        page.cleanup()
        characters += pages.at(-1)!.length
        if (characters > MAX_DOCUMENT_CHARACTERS) throw tooMuchText(undefined)
        await new Promise((resolve) => setImmediate(resolve))
      }
    } finally {
      void pdf.loadingTask.destroy()
    }
  } catch (e) {
    if (e instanceof ApiError) throw e
    if (e instanceof PdfTooSlow)
      throw documentUnreadable(`The PDF took longer than ${PDF_DEADLINE_MS / 1000} s to read (${pages.length} pages were read); split it into smaller files`)
    const name = (e as Error)?.name
    if (name === 'PasswordException') throw documentUnreadable('The PDF is protected by a password; save a copy without the password and attach that')
    throw documentUnreadable(`The PDF cannot be read: ${(e as Error)?.message ?? 'it is damaged'}`)
  }
  return { format: 'pdf', text: pages.map(cleanText).join('\n\n'), pages: pages.length }
}

const PDF_DEADLINE_MS = 60_000

class PdfTooSlow extends Error {}

async function readDocx(bytes: Buffer): Promise<ExtractedDocument> {
  try {
    const { value } = await mammoth.extractRawText({ buffer: bytes })
    return { format: 'docx', text: cleanText(value) }
  } catch (e) {
    throw documentUnreadable(`The Word document cannot be read: ${(e as Error)?.message ?? 'it is damaged'}`)
  }
}

/**
 * Text in UTF-8 or UTF-16 (by its byte order mark), else Windows-1252, the usual encoding of old
 * text files; undefined when the bytes hold NULs and no UTF-16 mark, so are not text at all.
 */
function decodeText(bytes: Buffer): string | undefined {
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return cleanText(new TextDecoder('utf-16le').decode(bytes.subarray(2)))
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return cleanText(new TextDecoder('utf-16be').decode(bytes.subarray(2)))
  if (bytes.subarray(0, 8192).includes(0)) return undefined
  try {
    return cleanText(new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes))
  } catch {
    return cleanText(decodeWindows1252(bytes))
  }
}

/** Node's 'windows-1252' decoder is Latin-1 and reads 0x80-0x9f as control characters; Windows has € “ ” … there. */
const WINDOWS_1252_HIGH = '€\u0081‚ƒ„…†‡ˆ‰Š‹Œ\u008dŽ\u008f\u0090‘’“”•–—˜™š›œ\u009džŸ'

function decodeWindows1252(bytes: Buffer): string {
  const latin1 = bytes.toString('latin1')
  return latin1.replace(/[\u0080-\u009f]/g, (c) => WINDOWS_1252_HIGH[c.charCodeAt(0) - 0x80]!)
}

/** `\n` line ends, no control characters but tab and newline, no trailing blank space. */
function cleanText(text: string): string {
  return text
    .replace(/\r\n?/g, '\n')
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f\ufeff]/g, '')
    .trimEnd()
}
