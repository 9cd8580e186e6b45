/**
 * POST /v1/audio/transcriptions and /v1/audio/translations, the request side: the form fields as
 * the official clients send them (every value a string, lists as `name[]`, objects as JSON text or
 * `name[key]`), checked into a job for the model's engine. Both routes take the same fields.
 */
import { z } from 'zod'
import type { ModelRecord } from '../../../../models/catalog/model-record.ts'
import { whisperLanguageCode } from '../../../../engines/speech/whisper-languages.ts'
import type { SpeechJob, VadOptions } from '../../../../engines/engine-jobs.ts'
import { invalidRequest, modelNotCompatible, unsupportedParameter } from '../../services/api-error.ts'
import { parseOrThrow } from '../../services/chat/validation.ts'

/** The largest audio file taken (OpenAI's limit); larger uploads get 413 `file_too_large`. */
export const MAX_AUDIO_FILE_BYTES = 25 * 1024 * 1024

export const SPEECH_RESPONSE_FORMATS = ['json', 'text', 'srt', 'verbose_json', 'vtt'] as const
export type SpeechResponseFormat = (typeof SPEECH_RESPONSE_FORMATS)[number]
export type SpeechTask = SpeechJob['task']

/** OpenAI's fields for features whisper does not have: refused by name rather than ignored. */
const UNSUPPORTED_FIELDS: Record<string, string> = {
  known_speaker_names: 'speaker names are for diarization, which whisper models do not do',
  known_speaker_references: 'speaker references are for diarization, which whisper models do not do',
  languages: "give one language in 'language', or leave it out to detect the language",
  keywords: "put words the model should spell right in 'prompt'",
}

/** A form value that must be a number: `"0.2"`; an empty value is not 0. */
const formNumber = z.string().transform((raw, ctx) => {
  const n = raw.trim() === '' ? Number.NaN : Number(raw)
  if (Number.isFinite(n)) return n
  ctx.addIssue({ code: 'custom', message: `expected a number, got "${raw}"` })
  return z.NEVER
})

/** A form value that must be a boolean: `true`/`false` (any case) or `1`/`0`. */
const formBoolean = z.string().transform((raw, ctx) => {
  const v = raw.trim().toLowerCase()
  if (v === 'true' || v === '1') return true
  if (v === 'false' || v === '0') return false
  ctx.addIssue({ code: 'custom', message: `expected true or false, got "${raw}"` })
  return z.NEVER
})

/** A form value holding a JSON object: `{"include_usage": true}`. */
function formJson<T extends z.ZodType>(schema: T, example: string) {
  return z
    .string()
    .transform((raw, ctx) => {
      try {
        return JSON.parse(raw) as unknown
      } catch {
        ctx.addIssue({ code: 'custom', message: `expected a JSON object such as ${example}` })
        return z.NEVER
      }
    })
    .pipe(schema)
}

/** OpenAI's `server_vad` chunking: what whisper.cpp's detector can honour of it. */
const vadThreshold = z.number().min(0).max(1)
const vadMilliseconds = z.int().min(0).max(10_000)
const serverVad = z.strictObject({
  type: z.literal('server_vad'),
  threshold: vadThreshold.optional(),
  prefix_padding_ms: vadMilliseconds.optional(),
  silence_duration_ms: vadMilliseconds.optional(),
})

/** Unknown fields are accepted and ignored, as the contract says. */
const speechFormSchema = z.looseObject({
  model: z.string().min(1),
  prompt: z.string().optional(),
  response_format: z.enum(SPEECH_RESPONSE_FORMATS).optional(),
  language: z.string().optional(),
  temperature: formNumber.pipe(z.number().min(0).max(1)).optional(),
  stream: formBoolean.optional(),
  'stream_options[include_usage]': formBoolean.optional(),
  stream_options: formJson(z.looseObject({ include_usage: z.boolean().optional() }), '{"include_usage": true}').optional(),
  // 'none' is ours: OpenAI has no way to say "do not skip", and a server started with --vad needs one.
  chunking_strategy: z.union([z.literal('auto'), z.literal('none'), formJson(serverVad, '{"type": "server_vad"}')]).optional(),
  'chunking_strategy[type]': z.literal('server_vad').optional(),
  'chunking_strategy[threshold]': formNumber.pipe(vadThreshold).optional(),
  'chunking_strategy[prefix_padding_ms]': formNumber.pipe(vadMilliseconds).optional(),
  'chunking_strategy[silence_duration_ms]': formNumber.pipe(vadMilliseconds).optional(),
})

const listsSchema = z.looseObject({
  timestamp_granularities: z.array(z.enum(['segment', 'word'])).optional(),
  include: z.array(z.literal('logprobs')).optional(),
})

export interface SpeechRequest {
  model: string
  prompt: string | undefined
  responseFormat: SpeechResponseFormat
  /** whisper's code for the hint; undefined = detect. */
  language: string | undefined
  temperature: number | undefined
  stream: boolean
  includeUsage: boolean
  /** verbose_json's `segments` (OpenAI's default granularity). */
  segmentTimestamps: boolean
  /** verbose_json's `words`. */
  wordTimestamps: boolean
  /** Each token's log probability, in json and streamed answers. */
  logprobs: boolean
  /** Asked for in the request; false = asked not to skip; undefined = not said (the server's setting decides). */
  vad: VadOptions | false | undefined
}

/** The form's text fields and lists, as read from the upload; the file is checked apart. */
export function parseSpeechForm(fields: Record<string, string>, lists: Record<string, string[]> = {}): SpeechRequest {
  for (const name of Object.keys(lists)) {
    const why = UNSUPPORTED_FIELDS[name]
    if (why) throw unsupportedParameter(`${name}[]`, why)
  }
  for (const [name, why] of Object.entries(UNSUPPORTED_FIELDS)) if (name in fields) throw unsupportedParameter(name, why)
  const form = parseOrThrow(speechFormSchema, fields)
  // A plain `timestamp_granularities=word` (curl users) counts like the list form.
  const listed = parseOrThrow(listsSchema, {
    ...lists,
    ...(fields.timestamp_granularities ? { timestamp_granularities: [...(lists.timestamp_granularities ?? []), fields.timestamp_granularities] } : {}),
    ...(fields.include ? { include: [...(lists.include ?? []), fields.include] } : {}),
  })

  const includeUsage = form['stream_options[include_usage]'] ?? form.stream_options?.include_usage
  const streamOptionsGiven = form['stream_options[include_usage]'] !== undefined || form.stream_options !== undefined
  if (streamOptionsGiven && form.stream !== true) {
    throw invalidRequest('stream_options can only be given when stream is true', 'stream_options')
  }
  const responseFormat = form.response_format ?? 'json'
  const granularities = listed.timestamp_granularities
  if (granularities && responseFormat !== 'verbose_json' && !form.stream) {
    throw invalidRequest(`timestamp_granularities needs response_format 'verbose_json', not '${responseFormat}'`, 'timestamp_granularities')
  }
  const logprobs = listed.include?.includes('logprobs') ?? false
  if (logprobs && responseFormat !== 'json' && !form.stream) {
    throw invalidRequest(`include[]=logprobs needs response_format 'json', not '${responseFormat}'`, 'include')
  }
  return {
    model: form.model,
    prompt: form.prompt || undefined,
    responseFormat,
    language: parseLanguage(form.language),
    temperature: form.temperature,
    stream: form.stream ?? false,
    includeUsage: includeUsage ?? false,
    segmentTimestamps: granularities === undefined || granularities.includes('segment'),
    wordTimestamps: granularities?.includes('word') ?? false,
    logprobs,
    vad: vadOf(form),
  }
}

function vadOf(form: z.infer<typeof speechFormSchema>): VadOptions | false | undefined {
  const bracketed = {
    type: form['chunking_strategy[type]'],
    threshold: form['chunking_strategy[threshold]'],
    prefix_padding_ms: form['chunking_strategy[prefix_padding_ms]'],
    silence_duration_ms: form['chunking_strategy[silence_duration_ms]'],
  }
  const hasBracketed = Object.values(bracketed).some((v) => v !== undefined)
  if (hasBracketed && form.chunking_strategy !== undefined) {
    throw invalidRequest('Give chunking_strategy once: as "auto", as a JSON object, or as chunking_strategy[type] fields', 'chunking_strategy')
  }
  if (hasBracketed && bracketed.type === undefined)
    throw invalidRequest("Missing required parameter: 'chunking_strategy[type]'", 'chunking_strategy[type]', 'missing_required_parameter')
  const strategy = hasBracketed ? bracketed : form.chunking_strategy
  if (strategy === undefined) return undefined
  if (strategy === 'auto') return {}
  if (strategy === 'none') return false
  return {
    ...(strategy.threshold !== undefined ? { threshold: strategy.threshold } : {}),
    ...(strategy.silence_duration_ms !== undefined ? { minSilenceMs: strategy.silence_duration_ms } : {}),
    ...(strategy.prefix_padding_ms !== undefined ? { speechPadMs: strategy.prefix_padding_ms } : {}),
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

/**
 * The engine job, minus the audio the route writes out after decoding. Silence is skipped when the
 * request asks, or by the server's setting when the model has a detector to do it with.
 */
export function planSpeech(task: SpeechTask, request: SpeechRequest, model: ModelRecord, vadByDefault: boolean): Omit<SpeechJob, 'audioPath'> {
  const capability = task === 'transcribe' ? 'transcription' : 'translation'
  if (!model.capabilities.includes(capability)) throw modelNotCompatible(model.id, `audio ${capability}`)
  const vad = request.vad === false ? undefined : (request.vad ?? (vadByDefault && model.vadModelPath ? {} : undefined))
  return {
    type: 'speech',
    task,
    language: request.language,
    prompt: request.prompt,
    temperature: request.temperature,
    // Subtitles too: whisper.cpp cuts its segments by its token times where it has them, so srt and
    // vtt then tell the same cues as verbose_json (measured: no cost on jfk.wav).
    detailed: TIMED_FORMATS.has(request.responseFormat) || request.wordTimestamps || request.logprobs,
    logprobs: request.logprobs,
    ...(vad ? { vad } : {}),
  }
}

/** The answer formats that carry segment times. */
const TIMED_FORMATS = new Set(['verbose_json', 'srt', 'vtt'])
