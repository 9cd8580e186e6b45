/** Saving a transcript or translation as .txt, .srt and .vtt, by segment or word-timed. */
import { describe, expect, it } from 'vitest'
import { formatTimestamp, savedFileName, subtitleFile, toPlainText, toSrt, toVtt, wordCues } from '../../renderer/src/lib/services/subtitles.ts'

const segments = [
  { start: 0, end: 2.5, text: ' Hello world.' },
  { start: 2.5, end: 3725.5, text: ' A long pause --> then more.' },
]

describe('subtitles', () => {
  it('formats timestamps with the decimal mark of each format', () => {
    expect(formatTimestamp(0, ',')).toBe('00:00:00,000')
    expect(formatTimestamp(3725.5, ',')).toBe('01:02:05,500')
    expect(formatTimestamp(59.9996, '.')).toBe('00:01:00.000')
    expect(formatTimestamp(-1, '.')).toBe('00:00:00.000')
  })

  it('writes SubRip: numbered cues, comma milliseconds, a blank line between cues', () => {
    expect(toSrt(segments)).toBe('1\n00:00:00,000 --> 00:00:02,500\nHello world.\n\n2\n00:00:02,500 --> 01:02:05,500\nA long pause --> then more.\n')
  })

  it('writes WebVTT: the header, dot milliseconds, no arrow inside cue text', () => {
    expect(toVtt(segments)).toBe('WEBVTT\n\n00:00:00.000 --> 00:00:02.500\nHello world.\n\n00:00:02.500 --> 01:02:05.500\nA long pause -> then more.\n')
  })

  it('drops empty segments and never ends a cue before it starts', () => {
    const srt = toSrt([
      { start: 1, end: 2, text: '   ' },
      { start: 5, end: 4, text: 'late' },
    ])
    expect(srt).toBe('1\n00:00:05,000 --> 00:00:05,000\nlate\n')
    expect(toVtt([])).toBe('WEBVTT\n\n')
  })

  it('keeps a blank line inside a VTT cue from ending it', () => {
    expect(toVtt([{ start: 0, end: 1, text: 'one\n\ntwo' }])).toContain('one\ntwo\n')
  })

  it('writes plain text as the streamed text, or joined segments', () => {
    expect(toPlainText(segments)).toBe('Hello world. A long pause --> then more.\n')
    expect(subtitleFile('txt', [], ' streamed text ')).toEqual({ content: 'streamed text\n', mime: 'text/plain' })
    expect(subtitleFile('srt', segments, '').mime).toBe('application/x-subrip')
    expect(subtitleFile('vtt', segments, '').content.startsWith('WEBVTT')).toBe(true)
  })

  it('names the file after the recording', () => {
    expect(savedFileName('interview.final.m4a', 'srt')).toBe('interview.final.srt')
    expect(savedFileName('recording', 'vtt')).toBe('recording.vtt')
    expect(savedFileName('.webm', 'txt')).toBe('transcript.txt')
  })

  it('times word-timed lines from their first word to their last, breaking at 42 characters and at pauses', () => {
    const word = (w: string, start: number) => ({ word: w, start, end: start + 0.3 })
    const words = ['And', 'so', 'my', 'fellow', 'Americans', 'ask', 'not', 'what', 'your', 'country', 'can', 'do'].map((w, i) => word(w, i * 0.4))
    words.push(word('for', 8), word('you', 8.4))
    const cues = wordCues(words)
    expect(cues.map((c) => c.text)).toEqual(['And so my fellow Americans ask not what', 'your country can do', 'for you'])
    expect(cues.every((c) => c.text.length <= 42)).toBe(true)
    expect(cues[0]).toMatchObject({ start: 0, end: 7 * 0.4 + 0.3 })
    expect(cues[2]!.start).toBe(8)
    expect(cues[2]!.end).toBeCloseTo(8.7, 9)
    expect(wordCues([])).toEqual([])
  })
})
