/** A transcript or translation saved as plain text or as subtitles (SubRip .srt, WebVTT .vtt). */
import type { TimedSegment, TimedWord } from '../../../../main/server/wire-types.ts'

export type SaveFormat = 'txt' | 'srt' | 'vtt'

/** Subtitle lines no longer than broadcasters allow, and a pause that starts a new one. */
const MAX_LINE_CHARS = 42
const PAUSE_SECONDS = 0.8

/**
 * Word-timed cues: words gathered into short lines, each shown from its first word's start to its
 * last word's end, so the text follows the voice more closely than whisper's long segments do.
 */
export function wordCues(words: readonly TimedWord[]): TimedSegment[] {
  const cues: TimedSegment[] = []
  let line: TimedWord[] = []
  const flush = () => {
    if (line.length > 0) cues.push({ start: line[0]!.start, end: line.at(-1)!.end, text: line.map((w) => w.word).join(' ') })
    line = []
  }
  for (const word of words) {
    const last = line.at(-1)
    const length = line.reduce((sum, w) => sum + w.word.length + 1, 0) + word.word.length
    if (last && (length > MAX_LINE_CHARS || word.start - last.end > PAUSE_SECONDS)) flush()
    line.push(word)
  }
  flush()
  return cues
}

/** 3725.5 → "01:02:05,500" (SRT) or "01:02:05.500" (VTT). */
export function formatTimestamp(seconds: number, decimalMark: ',' | '.'): string {
  const totalMs = Math.max(0, Math.round(seconds * 1000))
  const ms = totalMs % 1000
  const totalSeconds = Math.floor(totalMs / 1000)
  const pad = (n: number, width = 2) => String(n).padStart(width, '0')
  return `${pad(Math.floor(totalSeconds / 3600))}:${pad(Math.floor(totalSeconds / 60) % 60)}:${pad(totalSeconds % 60)}${decimalMark}${pad(ms, 3)}`
}

/** Subtitle cues: text trimmed, empty segments dropped, an end never before its start. */
function cues(segments: readonly TimedSegment[]): TimedSegment[] {
  return segments.map((s) => ({ start: s.start, end: Math.max(s.start, s.end), text: s.text.trim() })).filter((s) => s.text !== '')
}

export function toSrt(segments: readonly TimedSegment[]): string {
  return cues(segments)
    .map((s, i) => `${i + 1}\n${formatTimestamp(s.start, ',')} --> ${formatTimestamp(s.end, ',')}\n${s.text}\n`)
    .join('\n')
}

export function toVtt(segments: readonly TimedSegment[]): string {
  // A blank line inside a cue would end it early, and "-->" would start a new one.
  const safe = (text: string) => text.replace(/\n\s*\n/g, '\n').replace(/-->/g, '->')
  const body = cues(segments)
    .map((s) => `${formatTimestamp(s.start, '.')} --> ${formatTimestamp(s.end, '.')}\n${safe(s.text)}\n`)
    .join('\n')
  return `WEBVTT\n\n${body}`
}

/** Segments joined as the server joins them: whisper's segments carry their own leading spaces. */
export function toPlainText(segments: readonly { text: string }[]): string {
  return `${segments
    .map((s) => s.text)
    .join('')
    .trim()}\n`
}

export function subtitleFile(format: SaveFormat, segments: readonly TimedSegment[], text: string): { content: string; mime: string } {
  switch (format) {
    case 'srt':
      return { content: toSrt(segments), mime: 'application/x-subrip' }
    case 'vtt':
      return { content: toVtt(segments), mime: 'text/vtt' }
    default:
      return { content: text.trim() ? `${text.trim()}\n` : toPlainText(segments), mime: 'text/plain' }
  }
}

/** "interview.m4a" → "interview.srt". */
export function savedFileName(audioName: string, format: SaveFormat): string {
  const base = audioName.replace(/\.[^.\\/]*$/, '') || 'transcript'
  return `${base}.${format}`
}
