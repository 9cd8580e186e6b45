/**
 * POST /v1/audio/translations, the response side: whisper's segments as the five response formats
 * and the streamed events. Pure functions, no HTTP.
 */
import { deflateSync } from 'node:zlib'
import { whisperLanguageName } from '../../../native-models/audio/whisper-languages.ts'
import type { TranslateSegment } from '../../../native-models/engine/engine-protocol.ts'
import type { TranslationResponseFormat } from './translation-request.ts'

export interface TranslationOutput {
  segments: TranslateSegment[]
  /** whisper's code of the spoken language, detected or given. */
  language: string
  durationSeconds: number
  /** What the request asked for (0 when it did not say). */
  temperature: number
}

/**
 * Joins whisper's segments (each starts with a space) into one text, piece by piece: what `push`
 * returns for each segment is exactly what the text grows by, so streamed deltas add up to the
 * final text. Leading and trailing whitespace of the whole is dropped, the spaces between kept.
 */
export class SegmentText {
  private started = false
  private pendingSpace = ''
  private joined = ''

  push(raw: string): string {
    const text = this.started ? raw : raw.trimStart()
    const body = text.trimEnd()
    if (!body) {
      if (this.started) this.pendingSpace += text
      return ''
    }
    const delta = this.pendingSpace + body
    this.pendingSpace = text.slice(body.length)
    this.started = true
    this.joined += delta
    return delta
  }

  get text(): string {
    return this.joined
  }
}

export function translationText(segments: readonly TranslateSegment[]): string {
  const text = new SegmentText()
  for (const s of segments) text.push(s.text)
  return text.text
}

export interface FormattedTranslation {
  contentType: string
  body: string
}

export function formatTranslation(format: TranslationResponseFormat, output: TranslationOutput): FormattedTranslation {
  switch (format) {
    case 'json':
      return json({ text: translationText(output.segments) })
    case 'verbose_json':
      return json(verboseJson(output))
    case 'text':
      return { contentType: 'text/plain; charset=utf-8', body: `${translationText(output.segments)}\n` }
    case 'srt':
      return { contentType: 'application/x-subrip; charset=utf-8', body: srt(output.segments) }
    case 'vtt':
      return { contentType: 'text/vtt; charset=utf-8', body: vtt(output.segments) }
  }
}

function json(value: unknown): FormattedTranslation {
  return { contentType: 'application/json; charset=utf-8', body: JSON.stringify(value) }
}

/**
 * OpenAI's verbose shape. `language` is the spoken language's name ("french"), as OpenAI names
 * languages. whisper.node reports neither token ids nor probabilities, so `tokens`, `avg_logprob`
 * and `no_speech_prob` hold neutral values; `compression_ratio` is computed as whisper does.
 */
export function verboseJson(output: TranslationOutput) {
  return {
    task: 'translate' as const,
    language: whisperLanguageName(output.language),
    duration: seconds(output.durationSeconds * 1000),
    text: translationText(output.segments),
    segments: output.segments.map((s, id) => ({
      id,
      seek: Math.round(s.startMs / 10),
      start: seconds(s.startMs),
      end: seconds(s.endMs),
      text: s.text,
      tokens: [] as number[],
      temperature: output.temperature,
      avg_logprob: 0,
      compression_ratio: compressionRatio(s.text),
      no_speech_prob: 0,
    })),
  }
}

/** SubRip: numbered cues, `HH:MM:SS,mmm --> HH:MM:SS,mmm`, a blank line after each. */
export function srt(segments: readonly TranslateSegment[]): string {
  return cues(segments)
    .map((c, i) => `${i + 1}\n${timestamp(c.startMs, ',')} --> ${timestamp(c.endMs, ',')}\n${c.text}\n\n`)
    .join('')
}

/** WebVTT: the header, then cues with `HH:MM:SS.mmm` times; text escaped as the format asks. */
export function vtt(segments: readonly TranslateSegment[]): string {
  const body = cues(segments)
    .map((c) => `${timestamp(c.startMs, '.')} --> ${timestamp(c.endMs, '.')}\n${escapeVtt(c.text)}\n\n`)
    .join('')
  return `WEBVTT\n\n${body}`
}

/** Subtitle cues: one per segment with words in it, on one line. */
function cues(segments: readonly TranslateSegment[]): TranslateSegment[] {
  return segments
    .map((s) => ({ ...s, text: s.text.replace(/\s*[\r\n]+\s*/g, ' ').trim() }))
    .filter((s) => s.text.length > 0)
}

/** `HH:MM:SS<sep>mmm`; hours grow past two digits rather than wrap. */
export function timestamp(ms: number, separator: ',' | '.'): string {
  const total = Math.max(0, Math.round(ms))
  const pad = (n: number, width: number) => String(n).padStart(width, '0')
  const hours = Math.floor(total / 3_600_000)
  const minutes = Math.floor(total / 60_000) % 60
  const secs = Math.floor(total / 1000) % 60
  return `${pad(hours, 2)}:${pad(minutes, 2)}:${pad(secs, 2)}${separator}${pad(total % 1000, 3)}`
}

function escapeVtt(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
}

/** Milliseconds to seconds, to the millisecond. */
function seconds(ms: number): number {
  return Math.round(ms) / 1000
}

/** Bytes of the text over bytes of its zlib-compressed form: how whisper spots repetition loops. */
export function compressionRatio(text: string): number {
  const bytes = Buffer.from(text, 'utf8')
  if (bytes.length === 0) return 0
  return Math.round((bytes.length / deflateSync(bytes).length) * 1000) / 1000
}

// Streaming (text/event-stream)

export function textDeltaEvent(delta: string) {
  return { type: 'transcript.text.delta' as const, delta }
}

export function textDoneEvent(text: string, usageSeconds: number | undefined) {
  return {
    type: 'transcript.text.done' as const,
    text,
    ...(usageSeconds === undefined ? {} : { usage: { type: 'duration' as const, seconds: seconds(usageSeconds * 1000) } }),
  }
}
