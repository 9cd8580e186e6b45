import { open } from 'node:fs/promises'
import { fallbackTemplateFor, TEMPLATE_MARKER_TOKENS, type FallbackTemplateName } from './fallback-templates.ts'
import { ggufFileTypeName } from './gguf-file-types.ts'
import { readGgufHeader } from './gguf-metadata.ts'

/** What the server needs to know about a model file, read from its header without loading it. */
export type ModelFileHeader =
  | {
      format: 'gguf'
      architecture: string | undefined
      name: string | undefined
      trainedContext: number | undefined
      chatTemplate: string | undefined
      /** Where the file has no chat template: the format chosen for it (fallback-templates.ts). */
      fallbackTemplate: FallbackTemplateName | undefined
      embeddingLength: number | undefined
      /** Shape facts the memory plan needs for the KV cache. */
      layers: number | undefined
      headCount: number | undefined
      headCountKv: number | undefined
      vocabularySize: number | undefined
      /** How an encoder pools its tokens (llama.cpp's enum: 1 mean, 2 cls, 4 rank, …). */
      poolingType: number | undefined
      /** For a CLIP projector: the width of the embeddings it feeds to the language model. */
      projectorOutputWidth: number | undefined
      /** The quantization as Ollama names it (`Q4_K_M`), from `general.file_type`. */
      fileType: string | undefined
      /** Every tensor's elements added up; undefined where the tensor infos cannot be read. */
      parameterCount: number | undefined
      /** `general.size_label` as the converter wrote it (`3B`, `8x7B`). */
      sizeLabel: string | undefined
      /** `general.basename`: the model's name without size or fine-tune (`Llama-3.2`). */
      baseName: string | undefined
      /** Tensors by the first part of their name: `v` and `mm` are a vision tower, `a` an audio one. */
      tensorsByPrefix: Record<string, number> | undefined
      /** The vocabulary's fingerprint (gguf-metadata.ts): equal for models that can draft for each other. */
      vocabularyHash: string | undefined
      /** Multi-token-prediction layers (`nextn_predict_layers`), which llama.cpp drafts with. */
      mtpLayers: number | undefined
    }
  | { format: 'whisper-ggml'; vocabularySize: number; textContext: number }
  /** Silero voice activity detection for whisper.cpp: used by the speech models, not served on its own. */
  | { format: 'vad-ggml' }
  /** Any other ggml file: not a model Hearth serves. */
  | { format: 'other-ggml' }

const GGUF_MAGIC = 0x46554747 // "GGUF" read as little-endian uint32
const GGML_MAGIC = 0x67676d6c // legacy whisper.cpp files

export class CorruptModelFileError extends Error {
  override name = 'CorruptModelFileError'
}

export async function readModelFileHeader(path: string): Promise<ModelFileHeader> {
  const magic = await readMagic(path)
  if (magic === GGUF_MAGIC) return describeGguf(path)
  if (magic === GGML_MAGIC) return readWhisperHeader(path)
  throw new CorruptModelFileError('not a GGUF file or a whisper.cpp ggml file (unknown magic number)')
}

async function readMagic(path: string): Promise<number | undefined> {
  const handle = await open(path, 'r')
  try {
    const buf = Buffer.alloc(4)
    const { bytesRead } = await handle.read(buf, 0, 4, 0)
    return bytesRead === 4 ? buf.readUInt32LE(0) : undefined
  } finally {
    await handle.close()
  }
}

async function describeGguf(path: string): Promise<ModelFileHeader> {
  let header: Awaited<ReturnType<typeof readGgufHeader>>
  try {
    header = await readGgufHeader(path, TEMPLATE_MARKER_TOKENS)
  } catch (e) {
    throw new CorruptModelFileError(`unreadable GGUF header: ${(e as Error).message}`)
  }
  const { metadata, tensors, tokensFound, vocabularyHash } = header
  const architecture = stringField(metadata['general.architecture'])
  const archKey = (key: string) => (architecture ? metadata[`${architecture}.${key}`] : undefined)
  const chatTemplate = stringField(metadata['tokenizer.chat_template'])
  return {
    format: 'gguf',
    architecture,
    name: stringField(metadata['general.name']),
    trainedContext: numberField(archKey('context_length')),
    chatTemplate,
    fallbackTemplate: chatTemplate === undefined ? fallbackTemplateFor(architecture, tokensFound) : undefined,
    embeddingLength: numberField(archKey('embedding_length')),
    layers: numberField(archKey('block_count')),
    headCount: numberField(archKey('attention.head_count')),
    headCountKv: numberField(archKey('attention.head_count_kv')) ?? numberField(archKey('attention.head_count')),
    vocabularySize: arrayLength(metadata['tokenizer.ggml.tokens']),
    poolingType: numberField(archKey('pooling_type')),
    projectorOutputWidth: architecture === 'clip' ? numberField(metadata['clip.vision.projection_dim']) : undefined,
    fileType: ggufFileTypeName(numberField(metadata['general.file_type'])),
    parameterCount: tensors?.elements,
    sizeLabel: stringField(metadata['general.size_label']),
    baseName: stringField(metadata['general.basename']),
    tensorsByPrefix: tensors?.byPrefix,
    vocabularyHash,
    mtpLayers: numberField(archKey('nextn_predict_layers')),
  }
}

/** whisper.cpp's legacy layout: magic, then int32 hparams, n_vocab first and n_text_ctx fifth. */
async function readWhisperHeader(path: string): Promise<ModelFileHeader> {
  const handle = await open(path, 'r')
  try {
    const buf = Buffer.alloc(4 + 11 * 4)
    const { bytesRead } = await handle.read(buf, 0, buf.length, 0)
    if (bytesRead < buf.length) throw new CorruptModelFileError('whisper ggml file is truncated')
    // whisper.cpp's VAD files name their model first: a length, then "silero-…".
    const nameLength = buf.readInt32LE(4)
    if (nameLength > 6 && nameLength <= 32 && buf.toString('latin1', 8, 14) === 'silero') return { format: 'vad-ggml' }
    const vocabularySize = buf.readInt32LE(4)
    const textContext = buf.readInt32LE(4 + 5 * 4)
    const melBands = buf.readInt32LE(4 + 9 * 4)
    // Every whisper vocabulary has at least 51864 tokens, and whisper uses 80 or 128 mel bands.
    if (vocabularySize < 51864 || (melBands !== 80 && melBands !== 128)) return { format: 'other-ggml' }
    if (textContext <= 0) throw new CorruptModelFileError('whisper ggml header is invalid')
    return { format: 'whisper-ggml', vocabularySize, textContext }
  } finally {
    await handle.close()
  }
}

function stringField(v: unknown): string | undefined {
  return typeof v === 'string' && v.length > 0 ? v : undefined
}

function arrayLength(v: unknown): number | undefined {
  return typeof v === 'object' && v !== null && 'arrayLength' in v ? (v as { arrayLength: number }).arrayLength : undefined
}

function numberField(v: unknown): number | undefined {
  if (typeof v === 'number' && Number.isFinite(v)) return v
  if (typeof v === 'bigint') return Number(v)
  return undefined
}
