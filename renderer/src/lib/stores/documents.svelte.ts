/**
 * Documents waiting to be sent with the next question: each is uploaded to /v1/files as soon as it
 * is picked (the server reads its text), shown as a chip, and kept by the question once it is
 * sent, which names it as an `input_file`.
 */
import type { DocumentRef } from '../services/chat-messages.ts'
import type { FileObject } from '../../../../main/server/wire-types.ts'
import { api } from './connection.svelte.ts'

export interface PendingDocument {
  /** A local id while uploading; the server's id after. */
  key: string
  name: string
  bytes: number
  id?: string
  uploading: boolean
}

let uploads = 0

class DocumentsStore {
  pending = $state<PendingDocument[]>([])
  error = $state<string | undefined>(undefined)

  uploading = $derived(this.pending.some((d) => d.uploading))

  async upload(file: File): Promise<void> {
    this.error = undefined
    const key = `upload-${++uploads}`
    this.pending.push({ key, name: file.name, bytes: file.size, uploading: true })
    const form = new FormData()
    form.append('purpose', 'user_data')
    form.append('file', file, file.name)
    try {
      const meta = await api.json<FileObject>('/v1/files', { body: form })
      const entry = this.pending.find((d) => d.key === key)
      if (!entry) {
        // Removed while it uploaded.
        void this.deleteAll([meta.id])
        return
      }
      entry.id = meta.id
      entry.uploading = false
    } catch (e) {
      this.pending = this.pending.filter((d) => d.key !== key)
      this.error = `"${file.name}": ${(e as Error).message}`
    }
  }

  remove(key: string): void {
    const entry = this.pending.find((d) => d.key === key)
    this.pending = this.pending.filter((d) => d.key !== key)
    if (entry?.id) void this.deleteAll([entry.id])
  }

  /** The uploaded documents, for the question being sent; the chips go. */
  take(): DocumentRef[] {
    const ready = this.pending.filter((d) => d.id).map((d) => ({ id: d.id!, name: d.name, bytes: d.bytes }))
    this.pending = []
    this.error = undefined
    return ready
  }

  /** Best effort: a document already gone (the store is bounded) is no failure. */
  async deleteAll(ids: readonly string[]): Promise<void> {
    await Promise.all(ids.map((id) => api.request(`/v1/files/${encodeURIComponent(id)}`, { method: 'DELETE' }).catch(() => undefined)))
  }
}

export const documents = new DocumentsStore()
