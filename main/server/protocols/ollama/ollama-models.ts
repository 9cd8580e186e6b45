/**
 * Models as Ollama's API lists and shows them (`/api/tags`, `/api/show`, `/api/ps`), from Hearth's
 * records and, for `/api/show`, the GGUF's own metadata. Pure but for reading a model's header.
 */
import { createHash } from 'node:crypto'
import { stat } from 'node:fs/promises'
import { fallbackTemplateNote, fallbackTemplateSource } from '../../../../models/catalog/fallback-templates.ts'
import { readGgufMetadata, type GgufMetadataValue } from '../../../../models/catalog/gguf-metadata.ts'
import { templateThinks } from '../../../../models/catalog/model-kinds.ts'
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import type { LoadedModel } from '../../../../engines/scheduler/model-scheduler.ts'
import { ollamaName } from './ollama-names.ts'

/** The Ollama release whose API this follows; clients compare it to decide what they may ask. */
export const OLLAMA_API_VERSION = '0.34.3'

/** Ollama's capability words. */
type OllamaCapability = 'completion' | 'tools' | 'thinking' | 'vision' | 'embedding' | 'insert'

export interface OllamaDetails {
  parent_model: string
  format: string
  family: string
  families: string[] | null
  parameter_size: string
  quantization_level: string
  context_length?: number
  embedding_length?: number
}

/** Ollama's way of writing a count: "3.2B", "137M", "8B". */
export function humanNumber(n: number): string {
  const write = (value: number, unit: string, decimals: number) => (Number.isInteger(value) ? `${value}${unit}` : `${value.toFixed(decimals)}${unit}`)
  if (n >= 1e9) return write(n / 1e9, 'B', 1)
  if (n >= 1e6) return write(n / 1e6, 'M', 2)
  if (n >= 1e3) return `${Math.round(n / 1e3)}K`
  return String(n)
}

export function detailsOf(model: ModelRecord): OllamaDetails {
  const family = model.architecture ?? ''
  return {
    parent_model: model.ollama?.parent ?? '',
    format: model.remote ? '' : 'gguf',
    family,
    families: family ? [family] : null,
    parameter_size: model.parameterCount ? humanNumber(model.parameterCount) : (model.sizeLabel ?? ''),
    quantization_level: model.fileType ?? '',
    context_length: model.contextLength,
    ...(model.embeddingLength ? { embedding_length: model.embeddingLength } : {}),
  }
}

/** A stable digest for a model Ollama did not make: its file's place, size and time. */
function digestOf(model: ModelRecord): string {
  return model.ollama?.digest ?? createHash('sha256').update(`${model.path}|${model.sizeBytes}|${model.created}|${model.id}`).digest('hex')
}

function modifiedAt(model: ModelRecord): string {
  return model.ollama?.modifiedAt ?? new Date(model.created * 1000).toISOString()
}

/** What a model can do, in Ollama's words; `template` is its chat template, where read. */
export function capabilitiesOf(model: ModelRecord, template?: string, fim = false): OllamaCapability[] {
  const caps: OllamaCapability[] = []
  if (model.capabilities.includes('embeddings')) caps.push('embedding')
  if (model.capabilities.includes('chat')) caps.push('completion')
  if (model.capabilities.includes('tools')) caps.push('tools')
  if (template !== undefined && templateThinks(template)) caps.push('thinking')
  if (model.capabilities.includes('vision')) caps.push('vision')
  if (fim) caps.push('insert')
  return caps
}

/** Whether the model thinks apart (its template, read at the scan); a remote model's machine decides. */
export function modelThinks(model: ModelRecord): boolean {
  return model.remote !== undefined || model.thinks === true
}

export function listedModel(model: ModelRecord, thinks = false) {
  const name = ollamaName(model)
  return {
    name,
    model: name,
    modified_at: modifiedAt(model),
    size: model.sizeBytes + model.projectorSizeBytes,
    digest: digestOf(model),
    details: detailsOf(model),
    capabilities: capabilitiesOf(model, thinks ? '<think>' : undefined),
  }
}

export function runningModel(model: ModelRecord, loaded: LoadedModel) {
  const name = ollamaName(model)
  // A model kept until told otherwise (or busy now) shows Ollama's "never": far in the future.
  const expires = loaded.expiresAt ?? Date.UTC(2318, 0, 1)
  return {
    name,
    model: name,
    size: loaded.estimateBytes,
    digest: digestOf(model),
    details: detailsOf(model),
    expires_at: new Date(expires).toISOString(),
    size_vram: loaded.engine.info.devices.some((d) => d !== 'CPU') ? loaded.estimateBytes : 0,
    context_length: model.contextLength,
  }
}

/** `/api/show`: details, the GGUF's metadata (arrays left out unless verbose, as Ollama does), template, parameters. */
export async function showModel(model: ModelRecord, verbose: boolean) {
  const metadata = model.remote ? {} : await readGgufMetadata(model.path).catch(() => ({}) as Record<string, GgufMetadataValue>)
  const template = typeof metadata['tokenizer.chat_template'] === 'string' ? metadata['tokenizer.chat_template'] : undefined
  const fim = ['tokenizer.ggml.fim_pre_token_id', 'tokenizer.ggml.prefix_token_id'].some((key) => metadata[key] !== undefined)
  const modelInfo: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(metadata)) {
    if (key === 'general.name' || key === 'tokenizer.chat_template') continue
    modelInfo[key] = jsonValue(value, verbose)
  }
  // What Hearth gives each request, which may be less than the file says it was trained with.
  if (model.architecture) modelInfo[`${model.architecture}.context_length`] = model.contextLength
  if (model.parameterCount) modelInfo['general.parameter_count'] = model.parameterCount
  const projector = model.projectorPath ? await readGgufMetadata(model.projectorPath).catch(() => undefined) : undefined
  const parameters = model.ollama?.parameters ?? {}
  const info = await stat(model.path).catch(() => undefined)
  return {
    ...(model.ollama?.license?.length ? { license: model.ollama.license.join('\n') } : {}),
    modelfile: modelfileOf(model, template),
    parameters: Object.entries(parameters)
      .flatMap(([key, value]) => (Array.isArray(value) ? value : [value]).map((v) => `${key.padEnd(30)} ${JSON.stringify(v)}`))
      .join('\n'),
    template: model.chatTemplate ?? model.ollama?.template ?? template ?? (model.templateGuessed && fallbackTemplateSource(model.templateGuessed)) ?? '',
    ...(model.ollama?.system ? { system: model.ollama.system } : {}),
    details: detailsOf(model),
    // The Modelfile's MESSAGEs: `ollama run` shows them as the conversation so far.
    ...(model.ollama?.messages?.length ? { messages: model.ollama.messages.map((m) => ({ role: m.role, content: m.content })) } : {}),
    model_info: modelInfo,
    ...(projector ? { projector_info: Object.fromEntries(Object.entries(projector).map(([k, v]) => [k, jsonValue(v, verbose)])) } : {}),
    capabilities: capabilitiesOf(model, template, fim),
    modified_at: info ? new Date(info.mtimeMs).toISOString() : modifiedAt(model),
    ...(model.ollama?.requires ? { requires: model.ollama.requires } : {}),
    // Hearth's own words, for the person reading: where the file is, and a guessed template.
    hearth: {
      id: model.id,
      file: model.remote ? null : model.path,
      source: model.source?.kind ?? 'hearth',
      ...(model.templateGuessed ? { template: fallbackTemplateNote(model.templateGuessed, model.architecture) } : {}),
    },
  }
}

function jsonValue(value: GgufMetadataValue, verbose: boolean): unknown {
  if (typeof value === 'bigint') return Number(value)
  if (typeof value === 'object') return verbose ? { length: value.arrayLength } : null
  return value
}

/**
 * A Modelfile that says what the model is, as `ollama show --modelfile` prints it (Ollama's own
 * order and quoting), so `ollama create` can make the model again from it.
 */
function modelfileOf(model: ModelRecord, template: string | undefined): string {
  const info = model.ollama
  const lines = [
    '# Modelfile generated by "ollama show"',
    '# To build a new Modelfile based on this, replace FROM with:',
    `# FROM ${ollamaName(model)}`,
    '',
    `FROM ${model.path || ollamaName(model)}`,
  ]
  for (const adapter of model.adapterPaths ?? []) lines.push(`ADAPTER ${quoted(adapter)}`)
  if (model.projectorPath) lines.push(`FROM ${model.projectorPath}`)
  const shownTemplate = model.chatTemplate ?? info?.template ?? template
  if (shownTemplate) lines.push(`TEMPLATE ${quoted(shownTemplate)}`)
  if (info?.system) lines.push(`SYSTEM ${quoted(info.system)}`)
  for (const [key, value] of Object.entries(info?.parameters ?? {})) {
    for (const v of Array.isArray(value) ? value : [value]) lines.push(`PARAMETER ${key} ${quoted(String(v))}`)
  }
  if (model.catalogEntry?.context_length !== undefined && info?.parameters?.num_ctx === undefined) lines.push(`PARAMETER num_ctx ${model.contextLength}`)
  for (const license of info?.license ?? []) lines.push(`LICENSE ${quoted(license)}`)
  for (const m of info?.messages ?? []) lines.push(`MESSAGE ${m.role} ${quoted(m.content)}`)
  if (info?.requires) lines.push(`REQUIRES ${info.requires}`)
  return `${lines.join('\n')}\n`
}

/** Ollama's quoting: a value with a line break, or spaces at either end, is quoted (with """ where it holds a quote). */
function quoted(s: string): string {
  if (!s.includes('\n') && !s.startsWith(' ') && !s.endsWith(' ')) return s
  return s.includes('"') ? `"""${s}"""` : `"${s}"`
}
