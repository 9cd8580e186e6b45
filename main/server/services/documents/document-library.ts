/**
 * The server's documents: what `/v1/files` keeps and what chats read from file parts. A document
 * is read (PDF, Word, text) once, when it arrives; the same bytes sent again inline by the same
 * owner (`file_data` in every turn of a conversation) are the same document, read and embedded once.
 * A file uploaded is kept until deleted; a file sent inline is a copy the store may drop to make
 * room (document-store.ts). Opened on first use: a server never sent a document never makes the folder.
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
    private readonly log?: (line: string) => void,
  ) {}

  open(): Promise<OpenDocuments> {
    this.opening ??= DocumentStore.open(this.dir, undefined, { log: this.log }).then(
      (store) => ({ store, embeddings: new DocumentEmbeddings(store, this.scheduler) }),
      (e: unknown) => {
        this.opening = undefined
        throw e
      },
    )
    return this.opening
  }

  /**
   * Reads and keeps a document; refusals (type, size, no text) are 4xx naming `file`, a full disk
   * 507. An upload is a file of its own, kept until deleted; a file sent inline (`cache`) is the
   * document already kept with the same bytes and name, where there is one.
   */
  async add(bytes: Buffer, filename: string, owner: string, purpose: string, options: { cache?: boolean } = {}): Promise<StoredDocument> {
    const { store } = await this.open()
    const known = options.cache ? store.same(bytes, owner) : undefined
    if (known && known.name === filename) return known
    const extracted = await extractDocument(bytes, filename)
    return store.add(
      {
        name: filename,
        format: extracted.format,
        bytes: bytes.length,
        characters: extracted.text.length,
        owner,
        purpose,
        ...(extracted.pages === undefined ? {} : { pages: extracted.pages }),
        ...(options.cache ? { cache: true } : {}),
      },
      extracted.text,
      bytes,
    )
  }

  /** The document, where `owner` may read it. */
  async find(id: string, owner: string): Promise<StoredDocument | undefined> {
    const found = await (await this.open()).store.find(id)
    return found && mayRead(found, owner) ? found : undefined
  }

  async list(owner: string): Promise<StoredDocument[]> {
    return (await (await this.open()).store.listAll()).filter((d) => mayRead(d, owner))
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
