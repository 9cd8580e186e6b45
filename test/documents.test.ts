/**
 * Documents attached to a chat: what each format reads as, how text is cut into overlapping
 * chunks, the store's bounds, and /api/documents in-process, with a scripted embedding model that
 * hashes words into a vector (bag of words), so the chunk that shares the question's words ranks first.
 */
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs'
import { mkdir, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chunkText, estimateTokens } from '../main/server/documents/document-chunks.ts'
import { extractDocument } from '../main/server/documents/document-extract.ts'
import { selectParts } from '../main/server/documents/document-retrieval.ts'
import { DocumentStore } from '../main/server/documents/document-store.ts'
import { ApiError } from '../main/server/http-errors.ts'
import type { EmbedJob } from '../engines/engine-jobs.ts'
import { ModelError } from '../engines/errors.ts'
import { minimalDocx, minimalPdf, storedZip } from './support/document-files.ts'
import { plainScript, startInProcessServer, type InProcessServer, type Script } from './support/in-process-server.ts'
import { postJson } from './support/server-process.ts'
import { writeTinyBert, writeTinyLlama } from './support/tiny-models.ts'

async function refusal(promise: Promise<unknown>): Promise<ApiError> {
  const e = await promise.then(
    () => undefined,
    (error: unknown) => error,
  )
  expect(e).toBeInstanceOf(ApiError)
  return e as ApiError
}

describe('reading documents', () => {
  it('reads UTF-8 text, with or without a byte order mark, with Windows line ends', async () => {
    expect(await extractDocument(Buffer.from('Hello\r\nworld é\r\n'), 'notes.txt')).toEqual({ format: 'text', text: 'Hello\nworld é' })
    expect((await extractDocument(Buffer.from('\ufeff# Title\n\nBody'), 'README.md')).format).toBe('markdown')
    expect((await extractDocument(Buffer.from('\ufeff# Title\n\nBody'), 'README.md')).text).toBe('# Title\n\nBody')
    expect((await extractDocument(Buffer.from('plain'), 'notes.markdown')).format).toBe('markdown')
    expect((await extractDocument(Buffer.from('no extension'), 'LICENSE')).format).toBe('text')
  })

  it('reads UTF-16 by its byte order mark, and Windows-1252 where the bytes are not UTF-8', async () => {
    const utf16 = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('Grüße aus 東京', 'utf16le')])
    expect((await extractDocument(utf16, 'a.txt')).text).toBe('Grüße aus 東京')
    expect((await extractDocument(Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x20, 0x80]), 'a.txt')).text).toBe('café €')
  })

  it('reads the text layer of a PDF, page by page, and counts its pages', async () => {
    const pdf = minimalPdf([['The first page (one).', 'Its second line.'], ['The second page.']])
    const read = await extractDocument(pdf, 'report.pdf')
    expect(read.format).toBe('pdf')
    expect(read.pages).toBe(2)
    expect(read.text).toBe('The first page (one).\nIts second line.\n\nThe second page.')
    // By its bytes, whatever its name says.
    expect((await extractDocument(pdf, 'report.bin')).format).toBe('pdf')
    expect((await extractDocument(Buffer.from('How to read %PDF-1.4 headers'), 'notes.md')).format).toBe('markdown')
  })

  it('reads the paragraphs of a Word document', async () => {
    const read = await extractDocument(minimalDocx(['First paragraph.', 'Second & <last>.']), 'letter.docx')
    expect(read).toEqual({ format: 'docx', text: 'First paragraph.\n\nSecond & <last>.' })
  })

  it('refuses a PDF without text (scanned pages), a broken PDF, and files named for a format they are not', async () => {
    const scanned = await refusal(extractDocument(minimalPdf([[]]), 'scan.pdf'))
    expect(scanned).toMatchObject({ status: 400, code: 'document_unreadable', param: 'file' })
    expect(scanned.message).toMatch(/no text layer.*scanned/)
    const broken = await refusal(extractDocument(Buffer.from('%PDF-1.4\nnothing else'), 'broken.pdf'))
    expect(broken).toMatchObject({ status: 400, code: 'document_unreadable' })
    expect(broken.message).toMatch(/PDF cannot be read/)
    expect((await refusal(extractDocument(Buffer.from('just text'), 'fake.pdf'))).message).toMatch(/named \.pdf but is not a PDF/)
    expect((await refusal(extractDocument(Buffer.from('just text'), 'fake.docx'))).message).toMatch(/named \.docx but is not a Word document/)
    expect((await refusal(extractDocument(Buffer.from('  \n\n '), 'blank.txt'))).code).toBe('document_unreadable')
    expect((await refusal(extractDocument(Buffer.alloc(0), 'empty.txt'))).message).toBe('The file is empty')
  })

  it('refuses other types, naming the accepted ones', async () => {
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d])
    const image = await refusal(extractDocument(png, 'photo.png'))
    expect(image).toMatchObject({ status: 400, code: 'unsupported_document_type', param: 'file' })
    expect(image.message).toMatch(/binary data \(\.png\).*\.txt, \.md or \.markdown.*\.pdf.*\.docx/)
    expect((await refusal(extractDocument(storedZip({ 'a.txt': 'x' }), 'archive.zip'))).message).toMatch(/a zip archive \(\.zip\)/)
    const doc = Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1, 1, 2, 3])
    expect((await refusal(extractDocument(doc, 'old.doc'))).message).toMatch(/Office 97-2003.*save it as \.docx/)
    expect((await refusal(extractDocument(Buffer.from('{\\rtf1 hello}'), 'a.rtf'))).code).toBe('unsupported_document_type')
  })

  it('refuses more than a million characters of text with 413', async () => {
    const e = await refusal(extractDocument(Buffer.alloc(1_000_001, 'a'), 'long.txt'))
    expect(e).toMatchObject({ status: 413, code: 'document_too_large', param: 'file' })
    expect(e.message).toMatch(/1,000,001 characters.*at most 1,000,000/)
  })
})

describe('chunking', () => {
  const paragraph = (n: number) => `Paragraph ${n} says a few things. ${'Some words follow here. '.repeat(8)}It ends now.`
  const text = Array.from({ length: 30 }, (_, i) => paragraph(i)).join('\n\n')

  it('keeps chunks within the size, covers the whole text, and overlaps neighbours', () => {
    const chunks = chunkText(text, { maxTokens: 200, overlapTokens: 80 })
    expect(chunks.length).toBeGreaterThan(5)
    for (const c of chunks) expect(estimateTokens(text.slice(c.start, c.end))).toBeLessThanOrEqual(200)
    expect(chunks[0]!.start).toBe(0)
    expect(chunks.at(-1)!.end).toBe(text.length)
    for (let i = 1; i < chunks.length; i++) {
      expect(chunks[i]!.start).toBeGreaterThan(chunks[i - 1]!.start)
      // No gap but blank space between paragraphs.
      if (chunks[i]!.start > chunks[i - 1]!.end) expect(text.slice(chunks[i - 1]!.end, chunks[i]!.start).trim()).toBe('')
    }
    // A paragraph (67 tokens) fits in the overlap: each chunk starts with the last paragraph of the one before.
    for (let i = 1; i < chunks.length; i++) expect(chunks[i]!.start).toBeLessThan(chunks[i - 1]!.end)
  })

  it('cuts between paragraphs where they fit, else between sentences, else between words', () => {
    const chunks = chunkText(text, { maxTokens: 200, overlapTokens: 0 })
    for (const c of chunks) {
      expect(text.slice(c.start, c.end)).toMatch(/^Paragraph \d+/)
      expect(text.slice(c.start, c.end)).toMatch(/It ends now\.$/)
    }
    const sentences = chunkText(paragraph(1), { maxTokens: 20, overlapTokens: 0 }).map((c) => paragraph(1).slice(c.start, c.end))
    expect(sentences.length).toBeGreaterThan(3)
    for (const s of sentences) expect(s).toMatch(/^[A-Z].*\.$/)
    const words = 'word '.repeat(100).trim()
    const runs = chunkText(words, { maxTokens: 10, overlapTokens: 0 }).map((c) => words.slice(c.start, c.end))
    expect(runs.every((r) => /^word( word)*$/.test(r))).toBe(true)
    expect(runs.join(' ')).toBe(words)
  })

  it('counts a CJK character as a token, and cuts text without spaces anywhere', () => {
    expect(estimateTokens('東京'.repeat(50))).toBe(100)
    expect(estimateTokens('a'.repeat(35))).toBe(10)
    const cjk = '東京は日本の首都です。'.repeat(20)
    const chunks = chunkText(cjk, { maxTokens: 25, overlapTokens: 0 })
    expect(chunks.every((c) => c.end - c.start <= 25)).toBe(true)
    expect(chunks.map((c) => cjk.slice(c.start, c.end)).join('')).toBe(cjk)
    const blob = 'x'.repeat(1000)
    expect(chunkText(blob, { maxTokens: 50, overlapTokens: 0 }).map((c) => c.end - c.start)).toEqual([175, 175, 175, 175, 175, 125])
  })
})

describe('choosing parts', () => {
  const unit = (...v: number[]) => Float32Array.from(v)
  const candidate = (start: number, text: string, vector: Float32Array) => ({ document: 'doc_a', name: 'a.txt', start, end: start + text.length, text, vector })

  it('takes the chunks most like the query first, as many as fit the budget', () => {
    const candidates = [candidate(0, 'a'.repeat(350), unit(1, 0)), candidate(350, 'b'.repeat(350), unit(0, 1)), candidate(700, 'c'.repeat(350), unit(0.7, 0.7))]
    const parts = selectParts(candidates, unit(0, 1), 250)
    expect(parts.map((p) => [p.citation, p.start, p.score])).toEqual([
      [1, 350, 1],
      [2, 700, 0.7071],
    ])
  })

  it('gives the start of the best chunk when not even that fits, and the beginnings without a query', () => {
    const candidates = [candidate(0, 'a'.repeat(350), unit(1, 0)), candidate(350, 'b'.repeat(350), unit(0, 1))]
    const [cut] = selectParts(candidates, unit(0, 1), 50)
    expect(cut).toMatchObject({ citation: 1, start: 350, end: 350 + 133, text: 'b'.repeat(133) })
    expect(selectParts(candidates, undefined, 150).map((p) => [p.start, p.score])).toEqual([[0, undefined]])
  })
})

describe('the store', () => {
  const doc = { name: 'a.txt', format: 'text' as const, bytes: 10, characters: 10 }

  it('removes the oldest documents past its number of documents, and keeps the rest across restarts', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hearth-docstore-'))
    const store = await DocumentStore.open(dir, { maxDocuments: 3, maxBytes: 1e9 })
    const added = []
    for (let i = 0; i < 4; i++) added.push(await store.add({ ...doc, name: `${i}.txt` }, `text ${i}`))
    expect(store.get(added[0]!.id)).toBeUndefined()
    expect(readdirSync(dir).sort()).toEqual(added.slice(1).map((d) => d.id).sort())
    const reopened = await DocumentStore.open(dir, { maxDocuments: 3, maxBytes: 1e9 })
    expect(reopened.list().map((d) => d.name)).toEqual(['1.txt', '2.txt', '3.txt'])
    expect(await reopened.text(added[3]!.id)).toBe('text 3')
  })

  it('removes the oldest past its bytes, never the one just added, and counts the embedding caches', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hearth-docstore-'))
    const store = await DocumentStore.open(dir, { maxDocuments: 100, maxBytes: 3000 })
    const first = await store.add(doc, 'x'.repeat(1000))
    const second = await store.add(doc, 'y'.repeat(1000))
    expect(store.list()).toHaveLength(2)
    await store.writeCache(second.id, 'model-a', { big: 'z'.repeat(1200) })
    expect(store.get(first.id)).toBeUndefined()
    expect(await store.readCache(second.id, 'model-a')).toEqual({ big: 'z'.repeat(1200) })
    expect(await store.readCache(second.id, 'model-b')).toBeUndefined()
    const huge = await store.add(doc, 'w'.repeat(5000))
    expect(store.list().map((d) => d.id)).toEqual([huge.id])
  })

  it('drops a folder whose meta.json never got written, and files it does not know', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hearth-docstore-'))
    await mkdir(join(dir, 'doc_0123456789abcdef01234567'))
    await writeFile(join(dir, 'doc_0123456789abcdef01234567', 'text.txt'), 'half')
    await writeFile(join(dir, 'notes.txt'), 'kept: not ours')
    const store = await DocumentStore.open(dir)
    expect(store.list()).toEqual([])
    expect(readdirSync(dir)).toEqual(['notes.txt'])
    expect(store.get('../notes.txt')).toBeUndefined()
    expect(await store.text('../notes.txt')).toBeUndefined()
  })
})

/** A word-hashing embedding: texts sharing words point the same way. Deterministic, 64 dimensions. */
const bagOfWords: Script = (job, context) => {
  if (job.type !== 'embed') return plainScript(job, context)
  const dimensions = 64
  const vectors = new Float32Array(job.inputs.length * dimensions)
  job.inputs.forEach((input, i) => {
    for (const word of String(input).toLowerCase().match(/[a-z]+/g) ?? []) {
      if (STOP_WORDS.has(word)) continue
      let h = 0
      for (const c of word) h = (h * 31 + c.charCodeAt(0)) >>> 0
      vectors[i * dimensions + (h % dimensions)]! += 1
    }
    let norm = 0
    for (let d = 0; d < dimensions; d++) norm += vectors[i * dimensions + d]! ** 2
    for (let d = 0; d < dimensions; d++) vectors[i * dimensions + d]! /= Math.sqrt(norm) || 1
  })
  return { type: 'embed', vectors, dimensions, promptTokens: job.inputs.length }
}
const STOP_WORDS = new Set(['the', 'a', 'of', 'is', 'what', 'and', 'to', 'in', 'it', 'was', 'did'])

const FILLER = ['river', 'stone', 'garden', 'window', 'market', 'engine', 'pocket', 'ladder', 'button', 'meadow', 'copper', 'harbor']
/** A long text of filler paragraphs with one fact in the middle. */
function longText(): string {
  const paragraphs = Array.from({ length: 40 }, (_, i) => {
    const words = Array.from({ length: 60 }, (_, j) => FILLER[(i * 7 + j * 5) % FILLER.length])
    return `${words.join(' ')}.`
  })
  paragraphs[23] = 'The lighthouse keeper painted the door of the lighthouse teal, the secret colour of the keeper.'
  return paragraphs.join('\n\n')
}

describe('/api/documents', () => {
  let modelsDir: string
  let bareModelsDir: string
  let server: InProcessServer
  let bare: InProcessServer

  beforeAll(async () => {
    modelsDir = mkdtempSync(join(tmpdir(), 'hearth-documents-'))
    writeTinyLlama(join(modelsDir, 'tiny.gguf'), { contextLength: 2048 })
    writeTinyBert(join(modelsDir, 'bert.gguf'), { contextLength: 512 })
    writeFileSync(join(modelsDir, 'models.json'), JSON.stringify({ models: [{ id: 'tiny', file: 'tiny.gguf' }, { id: 'bert', file: 'bert.gguf' }] }))
    bareModelsDir = mkdtempSync(join(tmpdir(), 'hearth-documents-bare-'))
    writeTinyLlama(join(bareModelsDir, 'tiny.gguf'), { contextLength: 2048 })
    server = await startInProcessServer({ modelsDir, script: bagOfWords })
    bare = await startInProcessServer({ modelsDir: bareModelsDir })
  })

  afterAll(async () => {
    await Promise.all([server?.stop(), bare?.stop()])
  })

  async function upload(on: InProcessServer, name: string, bytes: Buffer | string, field = 'file') {
    const form = new FormData()
    form.append(field, new Blob([typeof bytes === 'string' ? bytes : new Uint8Array(bytes)]), name)
    const res = await fetch(`${on.url}/api/documents`, { method: 'POST', headers: { authorization: `Bearer ${on.apiKey}` }, body: form })
    return { status: res.status, json: (await res.json()) as any }
  }

  const call = (on: InProcessServer, method: string, path: string) => fetch(`${on.url}${path}`, { method, headers: { authorization: `Bearer ${on.apiKey}` } })

  it('takes text, Markdown, PDF and Word documents and answers their meta, text and deletion', async () => {
    const text = await upload(server, 'notes.txt', 'Some notes.\r\nTwo lines.')
    expect(text.status).toBe(201)
    expect(text.json).toEqual({ id: expect.stringMatching(/^doc_[0-9a-f]{24}$/), name: 'notes.txt', format: 'text', bytes: 23, characters: 22, created_at: expect.any(Number) })
    expect((await upload(server, 'a.md', '# Hi')).json.format).toBe('markdown')
    const pdf = await upload(server, 'paper.pdf', minimalPdf([['One.'], ['Two.'], ['Three.']]))
    expect(pdf.json).toMatchObject({ format: 'pdf', pages: 3, characters: 'One.\n\nTwo.\n\nThree.'.length })
    const docx = await upload(server, 'C:\\Users\\me\\letter.docx', minimalDocx(['Dear reader,', 'Goodbye.']))
    expect(docx.json).toMatchObject({ format: 'docx', name: 'letter.docx' })

    const meta = await call(server, 'GET', `/api/documents/${text.json.id}`)
    expect(await meta.json()).toEqual(text.json)
    const body = await call(server, 'GET', `/api/documents/${docx.json.id}/text`)
    expect(body.headers.get('content-type')).toBe('text/plain; charset=utf-8')
    expect(await body.text()).toBe('Dear reader,\n\nGoodbye.')
    expect((await call(server, 'GET', '/api/documents')).status).toBe(404) // no listing: the id is the key to a document
    expect(await (await call(server, 'DELETE', `/api/documents/${text.json.id}`)).json()).toEqual({ id: text.json.id, deleted: true })
    for (const path of [`/api/documents/${text.json.id}`, `/api/documents/${text.json.id}/text`, '/api/documents/nonsense']) {
      const gone = await call(server, 'GET', path)
      expect(gone.status).toBe(404)
      expect((await gone.json()).error).toMatchObject({ code: 'document_not_found', param: 'id', type: 'invalid_request_error' })
    }
    expect((await call(server, 'DELETE', `/api/documents/${text.json.id}`)).status).toBe(404)
  })

  it('refuses uploads it cannot take, naming the field, never with a 500', async () => {
    const large = await upload(server, 'big.txt', Buffer.alloc(20 * 1024 * 1024 + 1, 'a'))
    expect(large.status).toBe(413)
    expect(large.json.error).toMatchObject({ code: 'document_too_large', param: 'file', message: 'The document is larger than the limit of 20 MB' })
    const scanned = await upload(server, 'scan.pdf', minimalPdf([[], []]))
    expect(scanned.status).toBe(400)
    expect(scanned.json.error).toMatchObject({ code: 'document_unreadable', param: 'file' })
    const image = await upload(server, 'photo.png', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0]))
    expect(image.json.error).toMatchObject({ code: 'unsupported_document_type', param: 'file' })
    const noFile = await upload(server, 'a.txt', 'x', 'attachment')
    expect(noFile.json.error).toMatchObject({ code: 'missing_required_parameter', param: 'file' })
    const keyless = await fetch(`${server.url}/api/documents`, { method: 'POST', body: new FormData() })
    expect(keyless.status).toBe(401)
    const json = await postJson(server, '/api/documents', { file: 'text' })
    expect(json.status).toBe(400)
    expect(json.json.error.code).toBe('invalid_content_type')
  })

  it('sends small documents whole, each its own citation', async () => {
    const a = (await upload(server, 'a.txt', 'Alpha facts.')).json
    const b = (await upload(server, 'b.txt', 'Beta facts.')).json
    const res = await postJson(server, '/api/documents/context', { model: 'tiny', documents: [a.id, b.id, a.id], query: 'What?' })
    expect(res.status).toBe(200)
    expect(res.json).toEqual({
      mode: 'whole',
      embedding_model: null,
      parts: [
        { citation: 1, document: a.id, name: 'a.txt', text: 'Alpha facts.', start: 0, end: 12 },
        { citation: 2, document: b.id, name: 'b.txt', text: 'Beta facts.', start: 0, end: 11 },
      ],
    })
  })

  it('retrieves the part of a long document that answers the question, first and cited as 1, and embeds it once', async () => {
    const long = (await upload(server, 'long.txt', longText())).json
    const ask = () => postJson(server, '/api/documents/context', { model: 'tiny', documents: [long.id], query: 'What colour did the keeper paint the lighthouse door?', messages_tokens: 100 })
    const res = await ask()
    expect(res.status).toBe(200)
    expect(res.json.mode).toBe('retrieved')
    expect(res.json.embedding_model).toBe('bert')
    const [best, ...rest] = res.json.parts
    expect(best).toMatchObject({ citation: 1, document: long.id, name: 'long.txt' })
    expect(best.text).toContain('secret colour')
    for (const other of rest) expect(best.score).toBeGreaterThanOrEqual(other.score)
    expect(longText().slice(best.start, best.end)).toBe(best.text)
    const used = res.json.parts.reduce((n: number, p: any) => n + estimateTokens(p.text) + 12, 0)
    expect(used).toBeLessThanOrEqual((2048 - 100) / 2)

    const bert = server.engines.find((e) => e.model.id === 'bert')!
    const embedded = (bert.jobs as EmbedJob[]).flatMap((j) => j.inputs).length
    expect((await ask()).json).toEqual(res.json)
    expect((bert.jobs as EmbedJob[]).flatMap((j) => j.inputs).length).toBe(embedded + 1) // only the query again
  })

  it('embeds the start of a chunk the engine finds longer than the model takes', async () => {
    const strict: Script = (job, context) => {
      if (job.type === 'embed') {
        const i = job.inputs.findIndex((input) => String(input).length > 400)
        if (i >= 0) throw new ModelError('context_length_exceeded', `'input[${i}]' is too long`, `input[${i}]`)
      }
      return bagOfWords(job, context)
    }
    const picky = await startInProcessServer({ modelsDir, script: strict })
    try {
      const long = (await upload(picky, 'long.txt', longText())).json
      const res = await postJson(picky, '/api/documents/context', { model: 'tiny', documents: [long.id], query: 'What colour did the keeper paint the lighthouse door?' })
      expect(res.status).toBe(200)
      expect(res.json.parts[0].text).toContain('secret colour')
      const inputs = (picky.engines[0]!.jobs as EmbedJob[]).flatMap((j) => j.inputs.map(String))
      expect(inputs.some((input) => input.length > 400)).toBe(true) // tried whole first
      expect(inputs.some((input) => input.length <= 400 && input.length > 200)).toBe(true) // then halved
    } finally {
      await picky.stop()
    }
  })

  it('says which embedding model to download when the folder has none', async () => {
    const long = (await upload(bare, 'long.txt', longText())).json
    const res = await postJson(bare, '/api/documents/context', { model: 'tiny', documents: [long.id], query: 'colour?' })
    expect(res.status).toBe(409)
    expect(res.json.error.code).toBe('no_embedding_model')
    expect(res.json.error.message).toMatch(/Models page.*npm run models -- pull hf:\/\/\S+ --id nomic-embed-text-v1\.5/)
  })

  it('refuses unknown documents, models and fields by name', async () => {
    const a = (await upload(server, 'a.txt', 'Alpha.')).json
    const cases: Array<[unknown, number, string, string | null]> = [
      [{ model: 'tiny', documents: [a.id, 'doc_000000000000000000000000'], query: '' }, 404, 'document_not_found', 'documents[1]'],
      [{ model: 'nope', documents: [a.id], query: '' }, 404, 'model_not_found', 'model'],
      [{ model: 'bert', documents: [a.id], query: '' }, 400, 'model_not_compatible', 'model'],
      [{ model: 'tiny', documents: [], query: '' }, 400, 'invalid_value', 'documents'],
      [{ model: 'tiny', documents: [a.id] }, 400, 'missing_required_parameter', 'query'],
      [{ model: 'tiny', documents: [a.id], query: 'x', messages_tokens: 2000 }, 400, 'context_length_exceeded', 'messages_tokens'],
      [{ model: 'tiny', documents: [a.id], query: 'x', messages_tokens: -1 }, 400, 'invalid_value', 'messages_tokens'],
    ]
    for (const [body, status, code, param] of cases) {
      const res = await postJson(server, '/api/documents/context', body)
      expect([res.status, res.json.error.code, res.json.error.param], JSON.stringify(body)).toEqual([status, code, param])
    }
  })
})
