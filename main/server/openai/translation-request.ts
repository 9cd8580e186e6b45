/**
 * POST /v1/audio/translations, the request side: the form fields as the official clients send them
 * (every value a string), checked into a job for the model's engine.
 */
import { z } from 'zod'
import type { ModelRecord } from '../../../native-models/catalog/model-folder.ts'
import { whisperLanguageCode } from '../../../native-models/audio/whisper-languages.ts'
import type { TranslateJob } from '../../../native-models/engine/engine-protocol.ts'
import { invalidRequest, modelNotCompatible } from '../http-errors.ts'
import { parseOrThrow } from './validation.ts'

/** The largest audio file taken (OpenAI's limit); larger uploads get 413 `file_too_large`. */
export const MAX_AUDIO_FILE_BYTES = 25 * 1024 * 1024

export const TRANSLATION_RESPONSE_FORMATS = ['json', 'text', 'srt', 'verbose_json', 'vtt'] as const
export type TranslationResponseFormat = (typeof TRANSLATION_RESPONSE_FORMATS)[number]

/** A form value that must be a number: `"0.2"`; an empty value is not 0. */
const formNumber = z
  .string()
  .transform((raw, ctx) => {
    const n = raw.trim() === '' ? Number.NaN : Number(raw)
    if (Number.isFinite(n)) return n
    ctx.addIssue({ code: 'custom', message: `expected a number, got "${raw}"` })
    return z.NEVER
  })
  .pipe(z.number().min(0).max(1))

/** A form value that must be a boolean: `true`/`false` (any case) or `1`/`0`. */
const formBoolean = z.string().transform((raw, ctx) => {
  const v = raw.trim().toLowerCase()
  if (v === 'true' || v === '1') return true
  if (v === 'false' || v === '0') return false
  ctx.addIssue({ code: 'custom', message: `expected true or false, got "${raw}"` })
  return z.NEVER
})

/** `stream_options` sent whole, as JSON text: `{"include_usage": true}`. */
const formStreamOptions = z
  .string()
  .transform((raw, ctx) => {
    try {
      return JSON.parse(raw) as unknown
    } catch {
      ctx.addIssue({ code: 'custom', message: 'expected a JSON object such as {"include_usage": true}' })
      return z.NEVER
    }
  })
  .pipe(z.looseObject({ include_usage: z.boolean().optional() }))

/** Unknown fields (`timestamp_granularities[]`, `include[]`, …) are accepted and ignored. */
const translationFormSchema = z.looseObject({
  model: z.string().min(1),
  prompt: z.string().optional(),
  response_format: z.enum(TRANSLATION_RESPONSE_FORMATS).optional(),
  language: z.string().optional(),
  temperature: formNumber.optional(),
  stream: formBoolean.optional(),
  'stream_options[include_usage]': formBoolean.optional(),
  stream_options: formStreamOptions.optional(),
})

export interface TranslationRequest {
  model: string
  prompt: string | undefined
  responseFormat: TranslationResponseFormat
  /** whisper's code for the hint; undefined = detect. */
  language: string | undefined
  temperature: number | undefined
  stream: boolean
  includeUsage: boolean
}

/** The form's text fields, as read from the upload; the file is checked apart. */
export function parseTranslationForm(fields: Record<string, string>): TranslationRequest {
  const form = parseOrThrow(translationFormSchema, fields)
  const includeUsage = form['stream_options[include_usage]'] ?? form.stream_options?.include_usage
  const streamOptionsGiven = form['stream_options[include_usage]'] !== undefined || form.stream_options !== undefined
  if (streamOptionsGiven && form.stream !== true) {
    throw invalidRequest('stream_options can only be given when stream is true', 'stream_options')
  }
  return {
    model: form.model,
    prompt: form.prompt || undefined,
    responseFormat: form.response_format ?? 'json',
    language: parseLanguage(form.language),
    temperature: form.temperature,
    stream: form.stream ?? false,
    includeUsage: includeUsage ?? false,
  }
}

function parseLanguage(raw: string | undefined): string | undefined {
  if (raw === undefined || raw.trim() === '') return undefined
  const code = whisperLanguageCode(raw)
  if (code) return code
  throw invalidRequest(
    `Unknown language '${raw}': give an ISO-639-1 code such as 'fr' or 'de', or leave it empty to detect the language`,
    'language',
    'invalid_language',
  )
}

/** The engine job, minus the audio the route writes out after decoding. */
export function planTranslation(request: TranslationRequest, model: ModelRecord): Omit<TranslateJob, 'audioPath'> {
  if (!model.capabilities.includes('translation')) throw modelNotCompatible(model.id, 'audio translation')
  return { type: 'translate', language: request.language, prompt: request.prompt, temperature: request.temperature }
}
