/**
 * Models made by a Modelfile (`ollama create`): what their catalog entry's `modelfile` says, as the
 * record's Ollama facts (system prompt, parameters, opening conversation, template, licenses). A
 * model made FROM another by name serves that model's weights under its own name and defaults.
 */
import { createHash } from 'node:crypto'
import type { CatalogEntry } from './catalog-schema.ts'
import type { ModelRecord, OllamaModelInfo } from './model-record.ts'

/** The Ollama facts of a model whose entry has a Modelfile's parts; undefined for one without. */
export function modelfileInfo(id: string, entry: CatalogEntry | undefined): OllamaModelInfo | undefined {
  const modelfile = entry?.modelfile
  if (!modelfile) return undefined
  const name = id.slice(id.lastIndexOf('/') + 1).includes(':') ? id : `${id}:latest`
  return {
    name,
    ...(modelfile.template !== undefined ? { template: modelfile.template } : {}),
    ...(modelfile.system !== undefined ? { system: modelfile.system } : {}),
    ...(modelfile.parameters ? { parameters: modelfile.parameters } : {}),
    ...(modelfile.messages?.length ? { messages: modelfile.messages } : {}),
    ...(modelfile.license?.length ? { license: modelfile.license } : {}),
    ...(modelfile.parent ? { parent: modelfile.parent } : {}),
    ...(modelfile.requires ? { requires: modelfile.requires } : {}),
    // What changes the model changes its digest, as a new manifest does in Ollama.
    digest: createHash('sha256').update(JSON.stringify(entry)).digest('hex'),
    modifiedAt: modelfile.created_at ?? new Date(0).toISOString(),
  }
}

/** The base a `from` entry names, among the models served: by id, or by the name Ollama lists it under. */
export function baseModelOf(entry: CatalogEntry, models: readonly ModelRecord[]): ModelRecord | undefined {
  const from = entry.from!
  const tagged = from.slice(from.lastIndexOf('/') + 1).includes(':') ? from : `${from}:latest`
  return models.find((m) => m.id === from) ?? models.find((m) => m.id === tagged || m.ollama?.name === tagged || m.ollama?.name === from)
}
