/**
 * POST /v1/audio/transcriptions and /translations, the response side: whisper's segments as the
 * five response formats and the streamed events. Pure functions, no HTTP.
 */
import { deflateSync } from 'node:zlib'
import { whisperLanguageName } from '../../../../engines/speech/whisper-languages.ts'
import type { JobProgress, SegmentDetail, SpeechResult, SpeechSegment, SpeechToken } from '../../../../engines/engine-jobs.ts'
import type { SpeechRequest, SpeechTask } from './speech-request.ts'

export interface SpeechOutput {
  task: SpeechTask
  segments: SpeechSegment[]
  /** whisper's code of the spoken language, detected or given. */
  language: string
  durationSeconds: number
}

/** What of the request shapes the answer. */
export type AnswerOptions = Pick<SpeechRequest, 'responseFormat' | 'segmentTimestamps' | 'wordTimestamps' | 'logprobs'>

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

export function speechText(segments: readonly SpeechSegment[]): string {
  const text = new SegmentText()
  for (const s of segments) text.push(s.text)
  return text.text
}

export interface FormattedSpeech {
  contentType: string
  body: string
}

export function formatSpeech(options: AnswerOptions, output: SpeechOutput): FormattedSpeech {
  switch (options.responseFormat) {
    case 'json':
      return json({
        text: speechText(output.segments),
        ...(options.logprobs ? { logprobs: output.segments.flatMap(tokenLogprobs) } : {}),
        ...usageOf(output),
      })
    case 'verbose_json':
      return json(verboseJson(output, options))
    case 'text':
      return { contentType: 'text/plain; charset=utf-8', body: `${speechText(output.segments)}\n` }
    case 'srt':
      return { contentType: 'application/x-subrip; charset=utf-8', body: srt(output.segments) }
    case 'vtt':
      return { contentType: 'text/vtt; charset=utf-8', body: vtt(output.segments) }
  }
}

function json(value: unknown): FormattedSpeech {
  return { contentType: 'application/json; charset=utf-8', body: JSON.stringify(value) }
}

/** Transcriptions say what they cost, as OpenAI's do; translations answer in the contract's bare shape. */
function usageOf(output: SpeechOutput) {
  return output.task === 'transcribe' ? { usage: durationUsage(output.durationSeconds) } : {}
}

/** How OpenAI bills whisper: by the audio's length. */
function durationUsage(durationSeconds: number) {
  return { type: 'duration' as const, seconds: seconds(durationSeconds * 1000) }
}

/**
 * OpenAI's verbose shape, every number from the engine: tokens, temperature, average log
 * probability and no-speech probability per segment (`compression_ratio` computed as whisper
 * does). `language` is the spoken language's name ("french"), as OpenAI names languages.
 */
export function verboseJson(output: SpeechOutput, options: Pick<AnswerOptions, 'segmentTimestamps' | 'wordTimestamps'>) {
  return {
    task: output.task,
    language: whisperLanguageName(output.language),
    duration: seconds(output.durationSeconds * 1000),
    text: speechText(output.segments),
    ...(options.segmentTimestamps
      ? {
          segments: output.segments.map((s, id) => {
            const detail = detailOf(s)
            return {
              id,
              seek: Math.round(s.startMs / 10),
              start: seconds(s.startMs),
              end: seconds(s.endMs),
              text: s.text,
              tokens: detail.tokenIds,
              temperature: detail.temperature,
              avg_logprob: round(detail.avgLogprob),
              compression_ratio: compressionRatio(s.text),
              no_speech_prob: round(detail.noSpeechProb),
            }
          }),
        }
      : {}),
    ...(options.wordTimestamps ? { words: output.segments.flatMap((s) => wordsOf(detailOf(s).tokens)) } : {}),
    ...usageOf(output),
  }
}

function detailOf(segment: SpeechSegment): SegmentDetail {
  if (!segment.detail) throw new Error('the engine sent a segment without the details the request asked for')
  return segment.detail
}

export interface TimedWord {
  word: string
  start: number
  end: number
}

/**
 * Whisper's tokens joined into words, as OpenAI lists them: a token starting with a space starts a
 * word, punctuation on either side is left out, and a word spans its first token's start to its
 * last token's end. A token of punctuation alone gives no time: whisper times a comma where the
 * next word begins, which would stretch the word before it over the pause.
 */
export function wordsOf(tokens: readonly SpeechToken[]): TimedWord[] {
  const words: TimedWord[] = []
  let text = ''
  let startMs: number | undefined
  let endMs = 0
  const flush = () => {
    const word = text.trim().replace(/^\p{P}+|\p{P}+$/gu, '')
    if (word && startMs !== undefined) words.push({ word, start: seconds(startMs), end: seconds(endMs) })
    text = ''
    startMs = undefined
  }
  for (const token of tokens) {
    if (/^\s/.test(token.text)) flush()
    text += token.text
    if (/^\s*\p{P}+\s*$/u.test(token.text)) continue
    startMs ??= token.startMs
    endMs = token.endMs
  }
  flush()
  return words
}

/** OpenAI's `logprobs` entries: each token's text, natural-log probability and UTF-8 bytes. */
export function tokenLogprobs(segment: SpeechSegment): Array<{ token: string; logprob: number; bytes: number[] }> {
  return detailOf(segment).tokens.map((t) => ({
    token: t.text,
    logprob: round(Math.log(Math.max(t.probability, Number.MIN_VALUE))),
    bytes: [...Buffer.from(t.text, 'utf8')],
  }))
}

/** SubRip: numbered cues, `HH:MM:SS,mmm --> HH:MM:SS,mmm`, a blank line after each. */
export function srt(segments: readonly SpeechSegment[]): string {
  return cues(segments)
    .map((c, i) => `${i + 1}\n${timestamp(c.startMs, ',')} --> ${timestamp(c.endMs, ',')}\n${c.text}\n\n`)
    .join('')
}

/** WebVTT: the header, then cues with `HH:MM:SS.mmm` times; text escaped as the format asks. */
export function vtt(segments: readonly SpeechSegment[]): string {
  const body = cues(segments)
    .map((c) => `${timestamp(c.startMs, '.')} --> ${timestamp(c.endMs, '.')}\n${escapeVtt(c.text)}\n\n`)
    .join('')
  return `WEBVTT\n\n${body}`
}

/** Subtitle cues: one per segment with words in it, on one line. */
function cues(segments: readonly SpeechSegment[]): SpeechSegment[] {
  return segments.map((s) => ({ ...s, text: s.text.replace(/\s*[\r\n]+\s*/g, ' ').trim() })).filter((s) => s.text.length > 0)
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

/** Probabilities to six places: more digits than that are noise. */
function round(n: number): number {
  return Math.round(n * 1e6) / 1e6
}

/** Bytes of the text over bytes of its zlib-compressed form: how whisper spots repetition loops. */
export function compressionRatio(text: string): number {
  const bytes = Buffer.from(text, 'utf8')
  if (bytes.length === 0) return 0
  return Math.round((bytes.length / deflateSync(bytes).length) * 1000) / 1000
}

// Streaming (text/event-stream)

type Logprobs = ReturnType<typeof tokenLogprobs>

export function textDeltaEvent(delta: string, logprobs?: Logprobs) {
  return { type: 'transcript.text.delta' as const, delta, ...(logprobs ? { logprobs } : {}) }
}

export function textDoneEvent(text: string, usageSeconds: number | undefined, logprobs?: Logprobs) {
  return {
    type: 'transcript.text.done' as const,
    text,
    ...(logprobs ? { logprobs } : {}),
    ...(usageSeconds === undefined ? {} : { usage: durationUsage(usageSeconds) }),
  }
}

export type TranscriptEvent = ReturnType<typeof textDeltaEvent> | ReturnType<typeof textDoneEvent>

/**
 * The order of a streamed transcript: a `transcript.text.delta` per segment that adds text (or
 * log probabilities), segments the engine did not stream sent from the result before the end,
 * then one `transcript.text.done` with the whole text (and usage when asked). The deltas add up
 * to the done event's text exactly. The route ends the stream with `[DONE]`.
 */
export class TranscriptStreamWriter {
  private readonly text = new SegmentText()
  private streamed = 0

  constructor(private readonly options: { logprobs: boolean; usageSeconds: number | undefined }) {}

  progress(progress: JobProgress): TranscriptEvent[] {
    if (progress.type !== 'segment') return []
    this.streamed++
    return this.segment(progress.segment)
  }

  finish(result: SpeechResult): TranscriptEvent[] {
    const rest = result.segments.slice(this.streamed).flatMap((s) => this.segment(s))
    const logprobs = this.options.logprobs ? result.segments.flatMap(tokenLogprobs) : undefined
    return [...rest, textDoneEvent(this.text.text, this.options.usageSeconds, logprobs)]
  }

  private segment(segment: SpeechSegment): TranscriptEvent[] {
    const delta = this.text.push(segment.text)
    const logprobs = this.options.logprobs ? tokenLogprobs(segment) : undefined
    return delta || logprobs?.length ? [textDeltaEvent(delta, logprobs)] : []
  }
}
