/**
 * Documents in chats: what each format reads as, how text is cut into overlapping chunks, the
 * store's bounds, /v1/files through the official openai client, and file parts in Responses and
 * chat completions in-process, with a scripted embedding model that hashes words into a vector (bag
 * of words), so the chunk that shares the question's words ranks first.
 */
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs'
import { mkdir, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chunkText, estimateTokens } from '../../main/server/services/documents/document-chunks.ts'
import { extractDocument } from '../../main/server/services/documents/document-extract.ts'
import { rankCandidates, selectParts, type Candidate, type RetrievalMethod } from '../../main/server/services/documents/document-retrieval.ts'
import { KeywordIndex, searchTerms } from '../../main/server/services/documents/keyword-index.ts'
import { DocumentStore } from '../../main/server/services/documents/document-store.ts'
import { ApiError } from '../../main/server/services/api-error.ts'
import OpenAI, { toFile } from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import type { ChatJob, EmbedJob, RerankJob } from '../../engines/engine-jobs.ts'
import { minimalDocx, minimalPdf, storedZip } from '../support/document-files.ts'
import { plainScript, startInProcessServer, type InProcessServer, type Script } from '../support/in-process-server.ts'
import { postJson } from '../support/server-process.ts'
import { writeTinyBert, writeTinyLlama } from '../support/tiny-models.ts'

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

  const textOf = (candidates: Array<{ start: number; text: string }>) => new Map([['doc_a', candidates.map((c) => c.text).join('')]])
  const byMeaning = (candidates: Candidate[], query: Float32Array) => rankCandidates(candidates, '', query, 'embeddings')

  it('takes the parts most like the query first, as many as fit the budget', () => {
    // Words between the parts, so that they are not joined.
    const candidates = [candidate(0, 'a'.repeat(350), unit(1, 0)), candidate(360, 'b'.repeat(350), unit(0, 1)), candidate(720, 'c'.repeat(350), unit(0.7, 0.7))]
    const texts = new Map([['doc_a', `${'a'.repeat(350)} between ${'b'.repeat(350)} between ${'c'.repeat(350)}`]])
    const parts = selectParts(candidates, byMeaning(candidates, unit(0, 1)), 250, texts)
    expect(parts.map((p) => [p.start, p.score])).toEqual([
      [360, 1],
      [720, 0.7071],
    ])
  })

  it('joins parts of a document that meet into one passage, and pays for their overlap once', () => {
    const text = 'One two three. Four five six.\n\nSeven eight nine. Ten.'
    const at = (s: string) => text.indexOf(s)
    const candidates = [
      candidate(0, text.slice(0, at(' Four')), unit(0, 1)),
      candidate(at('Four'), text.slice(at('Four'), at('\n\n')), unit(0.1, 1)),
      candidate(at('Ten'), 'Ten.', unit(1, 0)),
    ]
    const parts = selectParts(candidates, byMeaning(candidates, unit(0, 1)), 1000, new Map([['doc_a', text]]))
    expect(parts.map((p) => p.text)).toEqual(['One two three. Four five six.', 'Ten.'])
    expect(parts[0]!.score).toBe(1)
  })

  it('gives the start of the best part when not even that fits, and the beginnings without a query', () => {
    const candidates = [candidate(0, 'a'.repeat(350), unit(1, 0)), candidate(350, 'b'.repeat(350), unit(0, 1))]
    const [cut] = selectParts(candidates, byMeaning(candidates, unit(0, 1)), 50, textOf(candidates))
    expect(cut).toMatchObject({ start: 350, end: 350 + 133, text: 'b'.repeat(133) })
    expect(selectParts(candidates, undefined, 150, textOf(candidates)).map((p) => [p.start, p.score])).toEqual([[0, undefined]])
  })

  it('finds a rare word by keywords where the embedding ranks the look-alike parts first, and fuses both rankings', () => {
    const records = Array.from({ length: 30 }, (_, i) => `Vessel ${i} berthed at quay three with timber; dues paid on arrival.`)
    records[17] = 'Error E47 means the coolant pump draws air through a loose inlet seal.'
    const candidates = records.map((text, i) => candidate(i * 100, text, i === 17 ? unit(0.2, 1) : unit(1, 0.1 * (i % 3))))
    const query = unit(1, 0)
    const question = 'What does error E47 mean?'
    const first = (method: RetrievalMethod) => rankCandidates(candidates, question, query, method).order[0]
    expect(first('embeddings')).not.toBe(17)
    expect(first('keywords')).toBe(17)
    // Ranked high by words and lower by meaning, it still leads the fused ranking.
    expect(rankCandidates(candidates, question, query, 'hybrid').order.indexOf(17)).toBeLessThan(3)
    expect(searchTerms('The piers, batteries and E47s')).toEqual(['pier', 'battery', 'e47s'])
    expect(new KeywordIndex(['no match here', 'pier']).scores('pier')[0]).toBe(0)
  })
})

describe('the store', () => {
  // Copies of files sent inline: the cache, which the store bounds (uploads it never removes: test/fast/nothing-lost.test.ts).
  const doc = { name: 'a.txt', format: 'text' as const, bytes: 10, characters: 10, cache: true }

  it('removes the oldest documents past its number of documents, and keeps the rest across restarts', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hearth-docstore-'))
    const store = await DocumentStore.open(dir, { maxDocuments: 3, maxBytes: 1e9 })
    const added = []
    for (let i = 0; i < 4; i++) added.push(await store.add({ ...doc, name: `${i}.txt` }, `text ${i}`, Buffer.from(`${i}`)))
    expect(store.get(added[0]!.id)).toBeUndefined()
    expect(readdirSync(dir).sort()).toEqual(
      added
        .slice(1)
        .map((d) => d.id)
        .sort(),
    )
    const reopened = await DocumentStore.open(dir, { maxDocuments: 3, maxBytes: 1e9 })
    expect(reopened.list().map((d) => d.name)).toEqual(['1.txt', '2.txt', '3.txt'])
    expect(await reopened.text(added[3]!.id)).toBe('text 3')
  })

  it('removes the oldest past its bytes, never the one just added, and counts the embedding caches', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hearth-docstore-'))
    const store = await DocumentStore.open(dir, { maxDocuments: 100, maxBytes: 3000 })
    const first = await store.add(doc, 'x'.repeat(1000), Buffer.from('x'))
    const second = await store.add(doc, 'y'.repeat(1000), Buffer.from('y'))
    expect(store.list()).toHaveLength(2)
    await store.writeCache(second.id, 'model-a', { big: 'z'.repeat(1200) })
    expect(store.get(first.id)).toBeUndefined()
    expect(await store.readCache(second.id, 'model-a')).toEqual({ big: 'z'.repeat(1200) })
    expect(await store.readCache(second.id, 'model-b')).toBeUndefined()
    const huge = await store.add(doc, 'w'.repeat(5000), Buffer.from('w'))
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
    for (const word of String(input)
      .toLowerCase()
      .match(/[a-z]+/g) ?? []) {
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

/** Answers citing the documents it was given, as a model told to cite them would. */
const citing: Script = (job, context) => {
  if (job.type !== 'chat') return bagOfWords(job, context)
  const text = 'Alpha is [1], beta is [2]; [9] names nothing.'
  context.emit({ type: 'text', text })
  return {
    type: 'chat',
    text,
    reasoning: '',
    toolCalls: [],
    logprobs: undefined,
    finishReason: 'stop',
    reasoningTokens: 0,
    promptTokens: 7,
    completionTokens: 12,
    timings: { promptMs: 1, promptPerSecond: 7000, predictedMs: 5, predictedPerSecond: 1000 },
  }
}

/** The user message the engine was given last. */
function lastQuestion(on: InProcessServer, model = 'tiny'): string {
  const job = on.engines.find((e) => e.model.id === model)!.jobs.findLast((j) => j.type === 'chat') as ChatJob
  const user = job.messages.findLast((m) => m.role === 'user')!
  return typeof user.content === 'string' ? user.content : (user.content ?? []).map((p) => (p.type === 'text' ? p.text : '')).join('\n')
}

describe('/v1/files and documents in chats', () => {
  let modelsDir: string
  let server: InProcessServer
  let bare: InProcessServer
  let client: OpenAI

  beforeAll(async () => {
    modelsDir = mkdtempSync(join(tmpdir(), 'hearth-documents-'))
    writeTinyLlama(join(modelsDir, 'tiny.gguf'), { contextLength: 2048 })
    writeTinyBert(join(modelsDir, 'bert.gguf'), { contextLength: 512 })
    writeFileSync(
      join(modelsDir, 'models.json'),
      JSON.stringify({
        models: [
          { id: 'tiny', file: 'tiny.gguf' },
          { id: 'bert', file: 'bert.gguf' },
        ],
      }),
    )
    const bareModelsDir = mkdtempSync(join(tmpdir(), 'hearth-documents-bare-'))
    writeTinyLlama(join(bareModelsDir, 'tiny.gguf'), { contextLength: 2048 })
    server = await startInProcessServer({ modelsDir, script: citing })
    bare = await startInProcessServer({ modelsDir: bareModelsDir })
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: server.apiKey, maxRetries: 0 })
  })

  afterAll(async () => {
    await Promise.all([server?.stop(), bare?.stop()])
  })

  async function upload(on: InProcessServer, name: string, bytes: Buffer | string, fields: Record<string, string> = { purpose: 'user_data' }, field = 'file') {
    const form = new FormData()
    for (const [key, value] of Object.entries(fields)) form.append(key, value)
    form.append(field, new Blob([typeof bytes === 'string' ? bytes : new Uint8Array(bytes)]), name)
    const res = await fetch(`${on.url}/v1/files`, { method: 'POST', headers: { authorization: `Bearer ${on.apiKey}` }, body: form })
    return { status: res.status, json: (await res.json()) as any }
  }

  it('keeps PDF, Word, text and Markdown files through the official client: upload, list, get, content, delete', async () => {
    const pdfBytes = minimalPdf([['One.'], ['Two.'], ['Three.']])
    const pdf = await client.files.create({ file: await toFile(pdfBytes, 'paper.pdf'), purpose: 'user_data' })
    expect(pdf).toEqual({
      id: expect.stringMatching(/^file-[0-9a-f]{24}$/),
      object: 'file',
      bytes: pdfBytes.length,
      created_at: expect.any(Number),
      expires_at: null,
      filename: 'paper.pdf',
      purpose: 'user_data',
      status: 'processed',
      status_details: null,
    })
    const docx = await client.files.create({
      file: await toFile(minimalDocx(['Dear reader,', 'Goodbye.']), 'C:\\Users\\me\\letter.docx'),
      purpose: 'assistants',
    })
    expect(docx).toMatchObject({ filename: 'letter.docx', purpose: 'assistants' })
    const note = await client.files.create({ file: await toFile(Buffer.from('# Hi'), 'a.md'), purpose: 'user_data' })

    const listed = []
    for await (const file of client.files.list()) listed.push(file.id)
    expect(listed.slice(0, 3)).toEqual([note.id, docx.id, pdf.id]) // newest first
    expect((await client.files.list({ purpose: 'assistants' })).data.map((f) => f.id)).toEqual([docx.id])
    expect(await client.files.retrieve(pdf.id)).toEqual(pdf)
    const content = await client.files.content(pdf.id)
    expect(content.headers.get('content-type')).toBe('application/pdf')
    expect(Buffer.from(await content.arrayBuffer()).equals(pdfBytes)).toBe(true)

    expect(await client.files.delete(note.id)).toEqual({ id: note.id, object: 'file', deleted: true })
    const gone = await client.files.retrieve(note.id).catch((e: unknown) => e)
    expect(gone).toBeInstanceOf(OpenAI.NotFoundError)
    expect((gone as InstanceType<typeof OpenAI.NotFoundError>).error).toMatchObject({ code: 'file_not_found', param: 'id', type: 'invalid_request_error' })
    expect((await client.files.delete(note.id).catch((e: unknown) => e)) instanceof OpenAI.NotFoundError).toBe(true)
  })

  it('lets each key see only the files it uploaded, in lists, reads and chats', async () => {
    const made = await postJson(server, '/api/keys', { label: 'robot' })
    expect(made.status).toBe(201)
    const robot = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: made.json.key, maxRetries: 0 })
    const mine = await robot.files.create({ file: await toFile(Buffer.from('Robot notes.'), 'robot.txt'), purpose: 'user_data' })
    expect((await robot.files.list()).data.map((f) => f.id)).toEqual([mine.id])
    expect((await client.files.list()).data.map((f) => f.id)).not.toContain(mine.id)
    expect(await client.files.retrieve(mine.id).catch((e: unknown) => e)).toBeInstanceOf(OpenAI.NotFoundError)
    expect(await client.files.delete(mine.id).catch((e: unknown) => e)).toBeInstanceOf(OpenAI.NotFoundError)
    const borrowed = await postJson(server, '/v1/chat/completions', {
      model: 'tiny',
      messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: mine.id } }] }],
    })
    expect([borrowed.status, borrowed.json.error.code]).toEqual([404, 'file_not_found'])
    expect((await robot.files.retrieve(mine.id)).filename).toBe('robot.txt')
  })

  it('refuses uploads it cannot take, naming the field, never with a 500', async () => {
    const large = await upload(server, 'big.txt', Buffer.alloc(20 * 1024 * 1024 + 1, 'a'))
    expect(large.status).toBe(413)
    expect(large.json.error).toMatchObject({ code: 'document_too_large', param: 'file', message: 'The document is larger than the limit of 20 MB' })
    const cases: Array<[Awaited<ReturnType<typeof upload>>, number, string, string | null]> = [
      [await upload(server, 'scan.pdf', minimalPdf([[], []])), 400, 'document_unreadable', 'file'],
      [await upload(server, 'photo.png', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0])), 400, 'unsupported_document_type', 'file'],
      [await upload(server, 'a.txt', 'x', { purpose: 'user_data' }, 'attachment'), 400, 'missing_required_parameter', 'file'],
      [await upload(server, 'a.txt', 'x', {}), 400, 'missing_required_parameter', 'purpose'],
      [await upload(server, 'a.txt', 'x', { purpose: 'batch' }), 400, 'invalid_value', 'purpose'],
    ]
    for (const [res, status, code, param] of cases) expect([res.status, res.json.error.code, res.json.error.param]).toEqual([status, code, param])
    expect((await fetch(`${server.url}/v1/files`, { method: 'POST', body: new FormData() })).status).toBe(401)
    const json = await postJson(server, '/v1/files', { file: 'text' })
    expect([json.status, json.json.error.code]).toEqual([400, 'invalid_content_type'])
    for (const query of ['order=up', 'limit=0', 'after=file-nope']) {
      const res = await fetch(`${server.url}/v1/files?${query}`, { headers: { authorization: `Bearer ${server.apiKey}` } })
      expect(res.status, query).toBe(400)
    }
  })

  it('gives small documents whole, numbered, and cites them in the answer as file citations', async () => {
    const a = await client.files.create({ file: await toFile(Buffer.from('Alpha facts.'), 'a.txt'), purpose: 'user_data' })
    const b = await client.files.create({ file: await toFile(Buffer.from('Beta facts.'), 'b.txt'), purpose: 'user_data' })
    const response = await client.responses.create({
      model: 'tiny',
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_file', file_id: a.id },
            { type: 'input_file', file_id: b.id },
            { type: 'input_text', text: 'What are the facts?' },
          ],
        },
      ],
    })
    const question = lastQuestion(server)
    expect(question).toContain('[1] a.txt\nAlpha facts.')
    expect(question).toContain('[2] b.txt\nBeta facts.')
    expect(question.endsWith('What are the facts?')).toBe(true)
    const text = response.output_text
    const message = response.output[0] as OpenAI.Responses.ResponseOutputMessage
    const annotations = (message.content[0] as OpenAI.Responses.ResponseOutputText).annotations
    expect(annotations).toEqual([
      { type: 'file_citation', file_id: a.id, filename: 'a.txt', index: text.indexOf('[1]') + 3, quote: 'Alpha facts.' },
      { type: 'file_citation', file_id: b.id, filename: 'b.txt', index: text.indexOf('[2]') + 3, quote: 'Beta facts.' },
    ])

    // Asked for, the texts the model was given come first, as a file search's results.
    const shown = await client.responses.create({
      model: 'tiny',
      include: ['file_search_call.results'],
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_file', file_id: a.id },
            { type: 'input_text', text: 'And?' },
          ],
        },
      ],
    })
    expect(shown.output[0]).toEqual({
      type: 'file_search_call',
      id: expect.stringMatching(/^fs_/),
      status: 'completed',
      queries: [],
      results: [{ file_id: a.id, filename: 'a.txt', text: 'Alpha facts.', score: null, attributes: { citation: 1 } }],
    })
    expect(response.output.some((i) => i.type === 'file_search_call')).toBe(false)

    // Streamed, the same citations come as their own events before the text is done.
    const stream = await client.responses.create({
      model: 'tiny',
      stream: true,
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_file', file_id: a.id },
            { type: 'input_text', text: 'And now?' },
          ],
        },
      ],
    })
    const events = []
    for await (const event of stream) events.push(event)
    const added = events.filter((e) => e.type === 'response.output_text.annotation.added')
    expect(added.map((e) => (e as { annotation: { file_id: string } }).annotation.file_id)).toEqual([a.id]) // [2] names nothing with one document
    const types = events.map((e) => e.type)
    expect(types.indexOf('response.output_text.annotation.added')).toBeLessThan(types.indexOf('response.output_text.done'))
  })

  it("reads Anthropic's document blocks (a PDF, a text, a file id) and cites them in Anthropic's shape, whole and streamed", async () => {
    const anthropic = new Anthropic({ baseURL: server.url, apiKey: server.apiKey, maxRetries: 0 })
    const pdf = minimalPdf([['Alpha facts, in a PDF.']])
    const b = await client.files.create({ file: await toFile(Buffer.from('Beta facts.'), 'b.txt'), purpose: 'user_data' })
    const documents = [
      {
        type: 'document' as const,
        source: { type: 'base64' as const, media_type: 'application/pdf' as const, data: pdf.toString('base64') },
        title: 'Alpha report',
        citations: { enabled: true },
      },
      { type: 'document' as const, source: { type: 'file' as const, file_id: b.id }, title: 'Beta notes', citations: { enabled: true } },
    ]
    const message = (await anthropic.beta.messages.create({
      model: 'tiny',
      max_tokens: 50,
      betas: ['files-api-2025-04-14'],
      messages: [{ role: 'user', content: [...documents, { type: 'text', text: 'What are the facts?' }] }],
    } as never)) as unknown as Anthropic.Beta.BetaMessage
    const question = lastQuestion(server)
    expect(question).toContain('Alpha facts, in a PDF.')
    // A file by id keeps the name it was uploaded under; its title names it in the citations.
    expect(question).toContain('[2] b.txt\nBeta facts.')
    // 'Alpha is [1], beta is [2]; [9] names nothing.' cut after each citation.
    const blocks = message.content as Anthropic.Beta.BetaTextBlock[]
    expect(blocks.map((b) => b.text)).toEqual(['Alpha is [1]', ', beta is [2]', '; [9] names nothing.'])
    expect(blocks[0]!.citations).toEqual([
      {
        type: 'char_location',
        cited_text: 'Alpha facts, in a PDF.',
        document_index: 0,
        document_title: 'Alpha report',
        start_char_index: 0,
        end_char_index: 22,
      },
    ])
    expect(blocks[1]!.citations).toEqual([
      expect.objectContaining({ type: 'char_location', cited_text: 'Beta facts.', document_index: 1, document_title: 'Beta notes' }),
    ])
    expect(blocks[2]!.citations ?? []).toEqual([])

    // Streamed: the text as it comes, its citations closing the block.
    const stream = anthropic.beta.messages.stream({
      model: 'tiny',
      max_tokens: 50,
      betas: ['files-api-2025-04-14'],
      messages: [{ role: 'user', content: [...documents, { type: 'text', text: 'Again?' }] }],
    } as never)
    const final = await stream.finalMessage()
    const text = final.content[0] as Anthropic.Beta.BetaTextBlock
    expect(text.text).toBe('Alpha is [1], beta is [2]; [9] names nothing.')
    expect(text.citations?.map((c) => (c as { document_index: number }).document_index)).toEqual([0, 1])

    // Without citations asked for, a text document is read as it is, and nothing is cited.
    const plain = await anthropic.messages.create({
      model: 'tiny',
      max_tokens: 50,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'Gamma facts.' } },
            { type: 'text', text: 'Gamma?' },
          ],
        },
      ],
    })
    expect(lastQuestion(server)).toContain('Gamma facts.')
    expect((plain.content[0] as Anthropic.TextBlock).citations ?? null).toBeNull()
    // count_tokens reads the documents too.
    const counted = await anthropic.messages.countTokens({
      model: 'tiny',
      messages: [{ role: 'user', content: [documents[0]!, { type: 'text', text: 'Count?' }] }],
    })
    expect(counted.input_tokens).toBeGreaterThan(0)
  })

  it("refuses the document blocks it cannot read, naming Anthropic's field", async () => {
    const anthropic = new Anthropic({ baseURL: server.url, apiKey: server.apiKey, maxRetries: 0 })
    const refused = async (block: object) =>
      (await anthropic.messages
        .create({ model: 'tiny', max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }, block as never] }] })
        .catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>
    const url = await refused({ type: 'document', source: { type: 'url', url: 'https://example.com/a.pdf' } })
    expect([url.status, url.error]).toEqual([
      400,
      { type: 'error', error: { type: 'invalid_request_error', message: expect.stringContaining('fetches nothing from the network') } },
    ])
    const image = await refused({ type: 'document', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } })
    expect(image.status).toBe(400)
    expect(image.message).toContain('messages[0].content[1].source.media_type')
    const missing = await refused({ type: 'document', source: { type: 'file', file_id: 'file-nope' } })
    expect(missing.status).toBe(404)
    expect(missing.message).toContain('file-nope')
  })

  it('reads a file sent as data once, in chat completions and Responses, and keeps its id in a stored response', async () => {
    const data = `data:text/plain;base64,${Buffer.from('Gamma facts, sent inline.').toString('base64')}`
    const before = (await client.files.list()).data.length
    for (let turn = 0; turn < 2; turn++) {
      const chat = await client.chat.completions.create({
        model: 'tiny',
        messages: [
          {
            role: 'user',
            content: [
              { type: 'file', file: { file_data: data, filename: 'gamma.txt' } },
              { type: 'text', text: 'Gamma?' },
            ],
          },
        ],
      })
      expect(chat.choices[0]!.message.content).toContain('[1]')
      expect(lastQuestion(server)).toContain('[1] gamma.txt\nGamma facts, sent inline.')
    }
    const response = await client.responses.create({
      model: 'tiny',
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_file', file_data: data, filename: 'gamma.txt' },
            { type: 'input_text', text: 'Gamma?' },
          ],
        },
      ],
    })
    const files = (await client.files.list()).data
    expect(files.length).toBe(before + 1)
    const items = await client.responses.inputItems.list(response.id)
    expect(JSON.stringify(items.data)).not.toContain('base64')
    expect(JSON.stringify(items.data)).toContain(files[0]!.id)
    // The stored conversation goes on from its file's id.
    await client.responses.create({ model: 'tiny', previous_response_id: response.id, input: 'And again?' })
    expect(JSON.stringify(server.engines[0]!.jobs.at(-1))).toContain('Gamma facts, sent inline.')
  })

  it('retrieves the part of a long document that answers the question, within the counted budget, and embeds it once', async () => {
    const long = await client.files.create({ file: await toFile(Buffer.from(longText()), 'long.txt'), purpose: 'user_data' })
    const ask = () =>
      client.responses.create({
        model: 'tiny',
        input: [
          {
            role: 'user',
            content: [
              { type: 'input_file', file_id: long.id },
              { type: 'input_text', text: 'What colour did the keeper paint the lighthouse door?' },
            ],
          },
        ],
      })
    const response = await ask()
    const question = lastQuestion(server)
    expect(question).toMatch(/^Use these excerpts from the attached documents[^\n]*\n\n\[1\] long\.txt \(part \d+\)\n/)
    expect(question.endsWith('Question:\nWhat colour did the keeper paint the lighthouse door?')).toBe(true)
    expect(question.indexOf('secret colour')).toBeLessThan(question.indexOf('[2] long.txt'))
    // Counted in the model's tokens (here the scripted tokenizer's: a token a word), half the context at most.
    const counted = question.match(/\w+|[^\s\w]/g)!.length
    expect(counted).toBeLessThanOrEqual(2048 / 2)
    expect(counted).toBeGreaterThan(2048 / 4)
    const cited = (response.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText
    expect(cited.annotations[0]).toMatchObject({ file_id: long.id, filename: 'long.txt', quote: expect.stringContaining('secret colour') })

    const bert = server.engines.find((e) => e.model.id === 'bert')!
    const embedded = (bert.jobs as EmbedJob[]).flatMap((j) => j.inputs).length
    await ask()
    expect((bert.jobs as EmbedJob[]).flatMap((j) => j.inputs).length).toBe(embedded + 1) // only the question again
  })

  it('orders the best parts again with the reranker of the folder, where it has one', async () => {
    const rerankDir = mkdtempSync(join(tmpdir(), 'hearth-documents-rerank-'))
    writeTinyLlama(join(rerankDir, 'tiny.gguf'), { contextLength: 2048 })
    writeTinyBert(join(rerankDir, 'bert.gguf'), { contextLength: 512 })
    writeTinyBert(join(rerankDir, 'judge.gguf'), { contextLength: 512, reranker: true })
    const withReranker = await startInProcessServer({ modelsDir: rerankDir })
    try {
      const question = 'What colour did the keeper paint the lighthouse door?'
      const body = {
        model: 'tiny',
        messages: [
          {
            role: 'user',
            content: [
              { type: 'file', file: { file_data: Buffer.from(longText()).toString('base64'), filename: 'long.txt' } },
              { type: 'text', text: question },
            ],
          },
        ],
      }
      expect((await postJson(withReranker, '/v1/chat/completions', body)).status).toBe(200)
      const judge = withReranker.engines.find((e) => e.model.id === 'judge')!
      const [job] = judge.jobs as RerankJob[]
      expect(job).toMatchObject({ type: 'rerank', query: question })
      expect(job!.documents.length).toBeGreaterThan(1)
      expect(job!.documents.length).toBeLessThanOrEqual(24)
      // The scripted reranker favours the part sharing most words with the question: it opens the excerpts.
      const excerpts = lastQuestion(withReranker)
      expect(excerpts.slice(excerpts.indexOf('[1] long.txt'), excerpts.indexOf('[2] long.txt'))).toContain('secret colour')
    } finally {
      await withReranker.stop()
    }
  })

  it('finds the parts by their words when the folder has no embedding model, and says which one to download', async () => {
    const body = {
      model: 'tiny',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'file', file: { file_data: Buffer.from(longText()).toString('base64'), filename: 'long.txt' } },
            { type: 'text', text: 'What is the secret colour?' },
          ],
        },
      ],
    }
    const res = await postJson(bare, '/v1/chat/completions', body)
    expect(res.status).toBe(200)
    expect(res.headers.get('warning')).toMatch(
      /^299 hearth "No embedding model in the models folder: the documents' parts were found by their words alone \(with nomic-embed-text-v1\.5/,
    )
    const question = lastQuestion(bare)
    expect(question.indexOf('the secret colour of the keeper')).toBeGreaterThan(0)
    expect(question.length).toBeLessThan(longText().length / 2)
    // Asked for ranking by meaning alone, it cannot: a 409 that says what to get.
    const strict = await startInProcessServer({ modelsDir: bare.settings.modelsDir, env: { HEARTH_RETRIEVAL: 'embeddings' } })
    try {
      const refused = await postJson(strict, '/v1/chat/completions', body)
      expect(refused.status).toBe(409)
      expect(refused.json.error).toMatchObject({ code: 'no_embedding_model', param: 'messages[0].content[0].file' })
      expect(refused.json.error.message).toMatch(/Models page.*npm run models -- pull hf:\/\/\S+ --id nomic-embed-text-v1\.5/)
    } finally {
      await strict.stop()
    }
  })

  /** Mistakes in a Responses request's file parts, as its own field names. */
  const responsesCases = (fileId: string): Array<[string, unknown, number, string | undefined, string | null]> => {
    const part = (file: object, earlier: object[] = []) => ({
      model: 'tiny',
      instructions: 'Answer from the file.',
      input: [
        ...earlier,
        {
          role: 'user',
          content: [
            { type: 'input_text', text: 'x' },
            { type: 'input_file', ...file },
          ],
        },
      ],
    })
    const turn = [
      { role: 'user', content: 'Hello' },
      { role: 'assistant', content: 'Hi' },
    ]
    return [
      ['/v1/responses', part({ file_id: 'file-000000000000000000000000' }), 404, 'file_not_found', 'input[0].content[1].file_id'],
      ['/v1/responses', part({}, turn), 400, 'missing_required_parameter', 'input[2].content[1]'],
      ['/v1/responses', part({ file_id: fileId, file_data: 'QQ==' }), 400, 'invalid_value', 'input[0].content[1]'],
      ['/v1/responses', part({ file_data: 'not base64!' }, turn), 400, 'invalid_value', 'input[2].content[1].file_data'],
      [
        '/v1/responses',
        {
          model: 'tiny',
          input: [
            { role: 'system', content: [{ type: 'input_file', file_id: fileId }] },
            { role: 'user', content: 'x' },
          ],
        },
        400,
        'invalid_value',
        'input[0].content[0]',
      ],
    ]
  }

  it('refuses files it cannot read in a chat by name, never with a 500', async () => {
    const a = await client.files.create({ file: await toFile(Buffer.from('Alpha.'), 'a.txt'), purpose: 'user_data' })
    const part = (file: unknown) => ({
      model: 'tiny',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'file', file },
            { type: 'text', text: 'x' },
          ],
        },
      ],
    })
    const cases: Array<[string, unknown, number, string | undefined, string | null]> = [
      ['/v1/chat/completions', part({ file_id: 'file-000000000000000000000000' }), 404, 'file_not_found', 'messages[0].content[0].file.file_id'],
      ['/v1/chat/completions', part({}), 400, 'missing_required_parameter', 'messages[0].content[0].file'],
      ['/v1/chat/completions', part({ file_id: a.id, file_data: 'QQ==' }), 400, 'invalid_value', 'messages[0].content[0].file'],
      ['/v1/chat/completions', part({ file_data: 'not base64!' }), 400, 'invalid_value', 'messages[0].content[0].file.file_data'],
      [
        '/v1/chat/completions',
        part({ file_data: Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0]).toString('base64'), filename: 'p.png' }),
        400,
        'unsupported_document_type',
        'messages[0].content[0].file.file_data',
      ],
      [
        '/v1/chat/completions',
        {
          model: 'tiny',
          messages: [
            { role: 'system', content: [{ type: 'file', file: { file_id: a.id } }] },
            { role: 'user', content: 'x' },
          ],
        },
        400,
        'invalid_value',
        'messages[0].content[0].file',
      ],
      [
        '/v1/responses',
        { model: 'tiny', input: [{ role: 'user', content: [{ type: 'input_file', file_url: 'https://example.com/a.pdf' }] }] },
        400,
        'unsupported_parameter',
        'input[0].content[0].file_url',
      ],
      // the same mistakes through /v1/responses name its own fields, whatever comes before them
      ...responsesCases(a.id),
    ]
    for (const [path, body, status, code, param] of cases) {
      const res = await postJson(server, path, body)
      expect([res.status, res.json.error?.code, res.json.error?.param], JSON.stringify(body)).toEqual([status, code, param])
    }
  })
})
