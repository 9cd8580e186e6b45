/**
 * Audio translation without a model: the response formats, the form fields, the language list and
 * how long audio is cut into pieces for whisper.cpp.
 */
import { describe, expect, it } from 'vitest'
import { WHISPER_LANGUAGES, whisperLanguageCode, whisperLanguageName } from '../native-models/audio/whisper-languages.ts'
import { carriedPrompt, chunkEnd, CUT_SEARCH_SECONDS, quietestFrameMiddle, toPcm16 } from '../native-models/engine/audio-chunks.ts'
import type { TranslateSegment } from '../native-models/engine/engine-protocol.ts'
import { ApiError } from '../main/server/http-errors.ts'
import { parseTranslationForm } from '../main/server/openai/translation-request.ts'
import {
  compressionRatio,
  formatTranslation,
  SegmentText,
  srt,
  textDeltaEvent,
  textDoneEvent,
  timestamp,
  translationText,
  verboseJson,
  vtt,
} from '../main/server/openai/translation-response.ts'

const segments: TranslateSegment[] = [
  { startMs: 0, endMs: 2000, text: ' Hello world.' },
  { startMs: 2000, endMs: 4520.4, text: ' How are you?' },
  { startMs: 3_723_004, endMs: 3_725_000, text: ' An hour <later> & more.' },
]
const output = { segments, language: 'fr', durationSeconds: 3725.5, temperature: 0 }

describe('response formats', () => {
  it('json and text carry the joined text without the leading space', () => {
    expect(formatTranslation('json', output)).toEqual({
      contentType: 'application/json; charset=utf-8',
      body: JSON.stringify({ text: 'Hello world. How are you? An hour <later> & more.' }),
    })
    const text = formatTranslation('text', output)
    expect(text.contentType).toBe('text/plain; charset=utf-8')
    expect(text.body).toBe('Hello world. How are you? An hour <later> & more.\n')
  })

  it('srt: numbered cues with comma milliseconds, hours past one', () => {
    expect(srt(segments)).toBe(
      '1\n00:00:00,000 --> 00:00:02,000\nHello world.\n\n' +
        '2\n00:00:02,000 --> 00:00:04,520\nHow are you?\n\n' +
        '3\n01:02:03,004 --> 01:02:05,000\nAn hour <later> & more.\n\n',
    )
    expect(formatTranslation('srt', output).contentType).toBe('application/x-subrip; charset=utf-8')
  })

  it('vtt: header, dot milliseconds, escaped text', () => {
    expect(vtt(segments)).toBe(
      'WEBVTT\n\n' +
        '00:00:00.000 --> 00:00:02.000\nHello world.\n\n' +
        '00:00:02.000 --> 00:00:04.520\nHow are you?\n\n' +
        '01:02:03.004 --> 01:02:05.000\nAn hour &lt;later&gt; &amp; more.\n\n',
    )
    expect(formatTranslation('vtt', output).contentType).toBe('text/vtt; charset=utf-8')
  })

  it('subtitles skip empty segments and keep each cue on one line', () => {
    const odd: TranslateSegment[] = [
      { startMs: 0, endMs: 500, text: '   ' },
      { startMs: 500, endMs: 900, text: ' two\nlines ' },
    ]
    expect(srt(odd)).toBe('1\n00:00:00,500 --> 00:00:00,900\ntwo lines\n\n')
    expect(vtt([])).toBe('WEBVTT\n\n')
  })

  it('timestamps round to the millisecond and never go negative', () => {
    expect(timestamp(0, ',')).toBe('00:00:00,000')
    expect(timestamp(59_999.6, '.')).toBe('00:01:00.000')
    expect(timestamp(-5, '.')).toBe('00:00:00.000')
    expect(timestamp(100 * 3_600_000, ',')).toBe('100:00:00,000')
  })

  it('verbose_json has every field OpenAI requires, in seconds, with the language by name', () => {
    const body = verboseJson(output)
    expect(body).toMatchObject({ task: 'translate', language: 'french', duration: 3725.5, text: 'Hello world. How are you? An hour <later> & more.' })
    expect(body.segments).toHaveLength(3)
    expect(body.segments[1]).toEqual({
      id: 1,
      seek: 200,
      start: 2,
      end: 4.52,
      text: ' How are you?',
      tokens: [],
      temperature: 0,
      avg_logprob: 0,
      compression_ratio: compressionRatio(' How are you?'),
      no_speech_prob: 0,
    })
    for (const s of body.segments) {
      for (const key of ['id', 'seek', 'start', 'end', 'temperature', 'avg_logprob', 'compression_ratio', 'no_speech_prob'] as const) {
        expect(typeof s[key]).toBe('number')
      }
      expect(Number.isInteger(s.id) && Number.isInteger(s.seek)).toBe(true)
    }
    expect(JSON.parse(formatTranslation('verbose_json', output).body)).toEqual(body)
  })

  it('compression ratio grows with repetition, as whisper uses it', () => {
    expect(compressionRatio('')).toBe(0)
    expect(compressionRatio(' the the the the the the the the the the the the the the')).toBeGreaterThan(2.4)
    expect(compressionRatio(' A short and varied sentence.')).toBeLessThan(1.5)
  })
})

describe('streamed text', () => {
  it('deltas add up to exactly the final text', () => {
    const pieces = [' Hello', ' world. ', '  ', 'ук', ' again.  ', '']
    const text = new SegmentText()
    const deltas = pieces.map((p) => text.push(p))
    expect(deltas).toEqual(['Hello', ' world.', '', '   ук', ' again.', ''])
    expect(deltas.join('')).toBe(text.text)
    expect(text.text).toBe('Hello world.   ук again.')
    expect(translationText(pieces.map((t, i) => ({ startMs: i, endMs: i, text: t })))).toBe(text.text)
  })

  it('leading blank segments send nothing', () => {
    const text = new SegmentText()
    expect(text.push('   ')).toBe('')
    expect(text.push(' Hi')).toBe('Hi')
    expect(text.text).toBe('Hi')
  })

  it('events have the contract shapes', () => {
    expect(textDeltaEvent('Hi')).toEqual({ type: 'transcript.text.delta', delta: 'Hi' })
    expect(textDoneEvent('Hi there', undefined)).toEqual({ type: 'transcript.text.done', text: 'Hi there' })
    expect(textDoneEvent('Hi there', 11.00003)).toEqual({
      type: 'transcript.text.done',
      text: 'Hi there',
      usage: { type: 'duration', seconds: 11 },
    })
  })
})

describe('form fields', () => {
  const fails = (fields: Record<string, string>): ApiError => {
    try {
      parseTranslationForm(fields)
    } catch (e) {
      if (e instanceof ApiError) return e
      throw e
    }
    throw new Error('expected a 400')
  }

  it('defaults: json, detect the language, greedy, no stream', () => {
    expect(parseTranslationForm({ model: 'w' })).toEqual({
      model: 'w',
      prompt: undefined,
      responseFormat: 'json',
      language: undefined,
      temperature: undefined,
      stream: false,
      includeUsage: false,
    })
  })

  it('reads every field as the clients send them, and ignores unknown ones', () => {
    expect(
      parseTranslationForm({
        model: 'w',
        prompt: 'Names: Zoë, Łukasz.',
        response_format: 'verbose_json',
        language: 'FR',
        temperature: '0.4',
        stream: 'true',
        'stream_options[include_usage]': 'true',
        'timestamp_granularities[]': 'segment',
        user: 'x',
      }),
    ).toMatchObject({ prompt: 'Names: Zoë, Łukasz.', responseFormat: 'verbose_json', language: 'fr', temperature: 0.4, stream: true, includeUsage: true })
    expect(parseTranslationForm({ model: 'w', stream: '1', stream_options: '{"include_usage": true}' }).includeUsage).toBe(true)
    expect(parseTranslationForm({ model: 'w', language: '' }).language).toBeUndefined()
    expect(parseTranslationForm({ model: 'w', language: 'jv' }).language).toBe('jw')
    expect(parseTranslationForm({ model: 'w', temperature: '0' }).temperature).toBe(0)
  })

  it.each([
    [{}, 400, 'missing_required_parameter', 'model'],
    [{ model: '' }, 400, 'invalid_value', 'model'],
    [{ model: 'w', response_format: 'docx' }, 400, 'invalid_value', 'response_format'],
    [{ model: 'w', temperature: 'hot' }, 400, 'invalid_value', 'temperature'],
    [{ model: 'w', temperature: '' }, 400, 'invalid_value', 'temperature'],
    [{ model: 'w', temperature: '1.5' }, 400, 'invalid_value', 'temperature'],
    [{ model: 'w', temperature: '-0.1' }, 400, 'invalid_value', 'temperature'],
    [{ model: 'w', stream: 'yes' }, 400, 'invalid_value', 'stream'],
    [{ model: 'w', stream: 'true', 'stream_options[include_usage]': 'maybe' }, 400, 'invalid_value', 'stream_options[include_usage]'],
    [{ model: 'w', stream: 'true', stream_options: '{include_usage' }, 400, 'invalid_value', 'stream_options'],
    [{ model: 'w', stream: 'true', stream_options: '{"include_usage": "yes"}' }, 400, 'invalid_value', 'stream_options.include_usage'],
    [{ model: 'w', 'stream_options[include_usage]': 'true' }, 400, 'invalid_value', 'stream_options'],
    [{ model: 'w', language: 'xx' }, 400, 'invalid_language', 'language'],
    [{ model: 'w', language: 'english' }, 400, 'invalid_language', 'language'],
  ])('%j → %i %s on %s', (fields, status, code, param) => {
    const error = fails(fields as Record<string, string>)
    expect(error.status).toBe(status)
    expect(error.code).toBe(code)
    expect(error.param).toBe(param)
  })
})

describe('whisper languages', () => {
  it("are whisper.cpp's 100, with names", () => {
    expect(Object.keys(WHISPER_LANGUAGES)).toHaveLength(100)
    expect(Object.keys(WHISPER_LANGUAGES).slice(0, 7)).toEqual(['en', 'zh', 'de', 'es', 'ru', 'ko', 'fr'])
    expect(whisperLanguageCode(' De ')).toBe('de')
    expect(whisperLanguageCode('haw')).toBe('haw')
    expect(whisperLanguageCode('toString')).toBeUndefined()
    expect(whisperLanguageName('ht')).toBe('haitian creole')
    expect(whisperLanguageName('xx')).toBe('xx')
  })
})

describe('cutting long audio', () => {
  const rate = 16_000

  it('the last piece ends with the audio; others end in the quietest moment near their end', () => {
    const samples = new Float32Array(60 * rate).map((_, i) => 0.5 * Math.sin(i / 7))
    expect(chunkEnd(samples, true, rate)).toBe(samples.length)
    // A pause of 0.3 s, 10 s before the end of the window.
    const pauseStart = samples.length - 10 * rate
    samples.fill(0, pauseStart, pauseStart + 0.3 * rate)
    const cut = chunkEnd(samples, false, rate)
    expect(cut).toBeGreaterThanOrEqual(pauseStart)
    expect(cut).toBeLessThanOrEqual(pauseStart + 0.3 * rate)
    // A pause before the search window is not looked at.
    const early = new Float32Array(60 * rate).map((_, i) => 0.5 * Math.sin(i / 7))
    early.fill(0, rate, 2 * rate)
    expect(chunkEnd(early, false, rate)).toBeGreaterThanOrEqual(early.length - CUT_SEARCH_SECONDS * rate)
  })

  it('finds the quietest frame and copes with short inputs', () => {
    const samples = new Float32Array([1, 1, 1, 0, 0, 1, 1, 1])
    expect(quietestFrameMiddle(samples, 0, 2)).toBe(4)
    expect(quietestFrameMiddle(samples, 6, 4)).toBe(8)
    expect(quietestFrameMiddle(new Float32Array(3), 0, 2)).toBe(1)
  })

  it('converts to 16-bit PCM with clipping', () => {
    expect(Array.from(toPcm16(new Float32Array([0, 0.5, -0.5, 1, -1, 2, -2])))).toEqual([0, 16384, -16384, 32767, -32768, 32767, -32768])
  })

  it('carries the end of the text, from a word boundary, into the next piece', () => {
    expect(carriedPrompt('  short  ')).toBe('short')
    expect(carriedPrompt('one two three four', 9)).toBe('four')
    expect(carriedPrompt('abcdefghij', 4)).toBe('ghij')
  })
})
