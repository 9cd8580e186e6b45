/**
 * The server's documents: what `/v1/files` keeps and what chats read from file parts. A document
 * is read (PDF, Word, text) once, when it arrives; the same bytes sent again by the same owner
 * (`file_data` in every turn of a conversation) are the same document, read and embedded once.
 * Opened on first use: a server that is never sent a document never makes the folder.
 */
import { basename } from 'node:path'
import type { ModelScheduler } from '../../../../engines/scheduler/model-scheduler.ts'
import { DocumentEmbeddings } from './document-embeddings.ts'
import { extractDocument } from './document-extract.ts'
import { DocumentStore, type StoredDocument } from './document-store.ts'

export interface OpenDocuments {
  store: DocumentStore
  embeddings: DocumentEmbeddings
}

export class DocumentLibrary {
  private opening: Promise<OpenDocuments> | undefined

  constructor(
    private readonly dir: string,
    private readonly scheduler: ModelScheduler,
  ) {}

  open(): Promise<OpenDocuments> {
    this.opening ??= DocumentStore.open(this.dir).then(
      (store) => ({ store, embeddings: new DocumentEmbeddings(store, this.scheduler) }),
      (e: unknown) => {
        this.opening = undefined
        throw e
      },
    )
    return this.opening
  }

  /** Reads and keeps a document; refusals (type, size, no text) are 4xx naming `file`. */
  async add(bytes: Buffer, filename: string, owner: string, purpose: string): Promise<StoredDocument> {
    const { store } = await this.open()
    const known = store.same(bytes, owner)
    if (known && known.name === filename) return known
    const extracted = await extractDocument(bytes, filename)
    return store.add(
      { name: filename, format: extracted.format, bytes: bytes.length, characters: extracted.text.length, owner, purpose, ...(extracted.pages === undefined ? {} : { pages: extracted.pages }) },
      extracted.text,
      bytes,
    )
  }

  /** The document, where `owner` may read it. */
  async find(id: string, owner: string): Promise<StoredDocument | undefined> {
    const found = (await this.open()).store.get(id)
    return found && mayRead(found, owner) ? found : undefined
  }

  async list(owner: string): Promise<StoredDocument[]> {
    return (await this.open()).store.list().filter((d) => mayRead(d, owner))
  }
}

/** Documents kept before they had owners were reached by their random id alone, and still are. */
function mayRead(document: StoredDocument, owner: string): boolean {
  return document.owner === undefined || document.owner === owner
}

/** The name as the client gave it, without folders or control characters, never empty. */
export function fileName(filename: string | undefined): string {
  const name = basename((filename ?? '').replace(/\\/g, '/'))
    .replace(/[\u0000-\u001f\u007f]/g, '')
    .trim()
    .slice(0, 255)
  return name || 'document'
}
