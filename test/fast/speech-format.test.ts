/**
 * Speech without a model: the response formats, words and logprobs from whisper's tokens, the form
 * fields of both routes, the language list and how long audio is cut into pieces for whisper.cpp.
 */
import { describe, expect, it } from 'vitest'
import { WHISPER_LANGUAGES, whisperLanguageCode, whisperLanguageName } from '../../engines/speech/whisper-languages.ts'
import { carriedPrompt, chunkEnd, CUT_SEARCH_SECONDS, quietestFrameMiddle, toPcm16 } from '../../engines/speech/audio-chunks.ts'
import type { SpeechSegment } from '../../engines/engine-jobs.ts'
import { ApiError } from '../../main/server/services/api-error.ts'
import { parseSpeechForm, planSpeech } from '../../main/server/protocols/openai/speech-request.ts'
import {
  compressionRatio,
  formatSpeech,
  SegmentText,
  srt,
  textDeltaEvent,
  textDoneEvent,
  timestamp,
  speechText,
  tokenLogprobs,
  verboseJson,
  vtt,
  wordsOf,
} from '../../main/server/protocols/openai/speech-response.ts'
import { inAudioTime } from '../../engines/speech/speech-in-pieces.ts'
import type { ModelRecord } from '../../models/catalog/model-record.ts'

/** whisper's details for a segment whose tokens are `pieces`, timed one after another from `startMs`. */
function detail(pieces: string[], startMs: number, stepMs = 100): SpeechSegment['detail'] {
  return {
    tokenIds: pieces.map((_, i) => 1000 + i),
    tokens: pieces.map((text, i) => ({ text, probability: 0.5, startMs: startMs + i * stepMs, endMs: startMs + (i + 1) * stepMs })),
    temperature: 0.2,
    avgLogprob: -0.3456789,
    noSpeechProb: 0.0123,
  }
}

const segments: SpeechSegment[] = [
  { startMs: 0, endMs: 2000, text: ' Hello world.', detail: detail([' Hello', ' world', '.'], 0) },
  { startMs: 2000, endMs: 4520.4, text: ' How are you?', detail: detail([' How', ' are', ' you', '?'], 2000) },
  {
    startMs: 3_723_004,
    endMs: 3_725_000,
    text: ' An hour <later> & more.',
    detail: detail([' An', ' hour', ' <', 'later', '>', ' &', ' more', '.'], 3_723_004),
  },
]
const output = { task: 'translate' as const, segments, language: 'fr', durationSeconds: 3725.5 }
const answer = { responseFormat: 'json' as const, segmentTimestamps: true, wordTimestamps: false, logprobs: false }
const as = (responseFormat: 'json' | 'text' | 'srt' | 'vtt' | 'verbose_json') => ({ ...answer, responseFormat })

describe('response formats', () => {
  it('json and text carry the joined text without the leading space', () => {
    expect(formatSpeech(as('json'), output)).toEqual({
      contentType: 'application/json; charset=utf-8',
      body: JSON.stringify({ text: 'Hello world. How are you? An hour <later> & more.' }),
    })
    // A transcription also says what it cost, as OpenAI's do.
    expect(JSON.parse(formatSpeech(as('json'), { ...output, task: 'transcribe' }).body).usage).toEqual({ type: 'duration', seconds: 3725.5 })
    const text = formatSpeech(as('text'), output)
    expect(text.contentType).toBe('text/plain; charset=utf-8')
    expect(text.body).toBe('Hello world. How are you? An hour <later> & more.\n')
  })

  it('srt: numbered cues with comma milliseconds, hours past one', () => {
    expect(srt(segments)).toBe(
      '1\n00:00:00,000 --> 00:00:02,000\nHello world.\n\n' +
        '2\n00:00:02,000 --> 00:00:04,520\nHow are you?\n\n' +
        '3\n01:02:03,004 --> 01:02:05,000\nAn hour <later> & more.\n\n',
    )
    expect(formatSpeech(as('srt'), output).contentType).toBe('application/x-subrip; charset=utf-8')
  })

  it('vtt: header, dot milliseconds, escaped text', () => {
    expect(vtt(segments)).toBe(
      'WEBVTT\n\n' +
        '00:00:00.000 --> 00:00:02.000\nHello world.\n\n' +
        '00:00:02.000 --> 00:00:04.520\nHow are you?\n\n' +
        '01:02:03.004 --> 01:02:05.000\nAn hour &lt;later&gt; &amp; more.\n\n',
    )
    expect(formatSpeech(as('vtt'), output).contentType).toBe('text/vtt; charset=utf-8')
  })

  it('subtitles skip empty segments and keep each cue on one line', () => {
    const odd: SpeechSegment[] = [
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

  it("verbose_json has every field OpenAI requires, in seconds, with the language by name and the engine's numbers", () => {
    const body = verboseJson(output, answer)
    expect(body).toMatchObject({ task: 'translate', language: 'french', duration: 3725.5, text: 'Hello world. How are you? An hour <later> & more.' })
    expect(body.segments).toHaveLength(3)
    expect(body.segments![1]).toEqual({
      id: 1,
      seek: 200,
      start: 2,
      end: 4.52,
      text: ' How are you?',
      tokens: [1000, 1001, 1002, 1003],
      temperature: 0.2,
      avg_logprob: -0.345679,
      compression_ratio: compressionRatio(' How are you?'),
      no_speech_prob: 0.0123,
    })
    expect(body).not.toHaveProperty('words')
    expect(verboseJson({ ...output, task: 'transcribe' }, answer).task).toBe('transcribe')
    for (const s of body.segments!) {
      for (const key of ['id', 'seek', 'start', 'end', 'temperature', 'avg_logprob', 'compression_ratio', 'no_speech_prob'] as const) {
        expect(typeof s[key]).toBe('number')
      }
      expect(Number.isInteger(s.id) && Number.isInteger(s.seek)).toBe(true)
    }
    expect(JSON.parse(formatSpeech(as('verbose_json'), output).body)).toEqual(body)
  })

  it('verbose_json lists words when asked, and only words when segments were not asked for', () => {
    const words = verboseJson(output, { segmentTimestamps: false, wordTimestamps: true })
    expect(words).not.toHaveProperty('segments')
    expect(words.words!.map((w) => w.word)).toEqual(['Hello', 'world', 'How', 'are', 'you', 'An', 'hour', '<later>', 'more'])
    // "world" is followed by a token of punctuation alone, which gives the word no time.
    expect(words.words![1]).toEqual({ word: 'world', start: 0.1, end: 0.2 })
  })

  it('words join tokens that continue a word, and leave punctuation out, of their text and of their times', () => {
    const tokens = detail([' Ich', ' bin', ' ein', ' Ber', 'liner', '!', ' "', 'Ja', '",', ' don', "'t", ' —'], 0)!.tokens
    expect(wordsOf(tokens).map((w) => w.word)).toEqual(['Ich', 'bin', 'ein', 'Berliner', 'Ja', "don't"])
    // "!" (0.5 to 0.6) is whisper's token of punctuation alone: Berliner ends where "liner" does.
    const berliner = wordsOf(tokens)[3]!
    expect([berliner.start, berliner.end]).toEqual([0.3, 0.5])
    // '"' opens "Ja": the word starts with its first token of letters.
    expect(wordsOf(tokens)[4]).toMatchObject({ word: 'Ja', start: 0.7 })
    expect(wordsOf([])).toEqual([])
  })

  it('logprobs: each token with its natural-log probability and UTF-8 bytes', () => {
    const [first] = tokenLogprobs({ startMs: 0, endMs: 1, text: ' é', detail: detail([' é'], 0) })
    expect(first).toEqual({ token: ' é', logprob: Math.round(Math.log(0.5) * 1e6) / 1e6, bytes: [0x20, 0xc3, 0xa9] })
    const json = JSON.parse(formatSpeech({ ...answer, logprobs: true }, output).body)
    expect(json.logprobs).toHaveLength(15)
    expect(() => tokenLogprobs({ startMs: 0, endMs: 1, text: ' x' })).toThrow(/details/)
  })

  it("token times are held inside their segment and in order, in the audio's time", () => {
    const raw: SpeechSegment = {
      startMs: 100,
      endMs: 900,
      text: ' a b c',
      detail: {
        ...detail([' a', ' b', ' c'], 0)!,
        tokens: [
          { text: ' a', probability: 1, startMs: -1000, endMs: 300 },
          { text: ' b', probability: 1, startMs: 200, endMs: 1200 },
          { text: ' c', probability: 1, startMs: -1000, endMs: -1000 },
        ],
      },
    }
    const timed = inAudioTime(raw, 16_000, 16_000 * 0.8)
    expect([timed.startMs, timed.endMs]).toEqual([1100, 1800])
    const times = timed.detail!.tokens.map((t) => [t.startMs, t.endMs])
    expect(times).toEqual([
      [1100, 1300],
      [1300, 1800],
      [1800, 1800],
    ])
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
    expect(speechText(pieces.map((t, i) => ({ startMs: i, endMs: i, text: t })))).toBe(text.text)
  })

  it('leading blank segments send nothing', () => {
    const text = new SegmentText()
    expect(text.push('   ')).toBe('')
    expect(text.push(' Hi')).toBe('Hi')
    expect(text.text).toBe('Hi')
  })

  it('events have the contract shapes', () => {
    expect(textDeltaEvent('Hi')).toEqual({ type: 'transcript.text.delta', delta: 'Hi' })
    const logprobs = [{ token: 'Hi', logprob: -0.1, bytes: [72, 105] }]
    expect(textDeltaEvent('Hi', logprobs)).toEqual({ type: 'transcript.text.delta', delta: 'Hi', logprobs })
    expect(textDoneEvent('Hi', undefined, logprobs)).toEqual({ type: 'transcript.text.done', text: 'Hi', logprobs })
    expect(textDoneEvent('Hi there', undefined)).toEqual({ type: 'transcript.text.done', text: 'Hi there' })
    expect(textDoneEvent('Hi there', 11.00003)).toEqual({
      type: 'transcript.text.done',
      text: 'Hi there',
      usage: { type: 'duration', seconds: 11 },
    })
  })
})

describe('form fields', () => {
  const fails = (fields: Record<string, string>, lists: Record<string, string[]> = {}): ApiError => {
    try {
      parseSpeechForm(fields, lists)
    } catch (e) {
      if (e instanceof ApiError) return e
      throw e
    }
    throw new Error('expected a 400')
  }

  it('defaults: json, detect the language, greedy, no stream', () => {
    expect(parseSpeechForm({ model: 'w' })).toEqual({
      model: 'w',
      prompt: undefined,
      responseFormat: 'json',
      language: undefined,
      temperature: undefined,
      stream: false,
      includeUsage: false,
      segmentTimestamps: true,
      wordTimestamps: false,
      logprobs: false,
      vad: undefined,
    })
  })

  it('reads every field as the clients send them, and ignores unknown ones', () => {
    expect(
      parseSpeechForm({
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
    expect(parseSpeechForm({ model: 'w', stream: '1', stream_options: '{"include_usage": true}' }).includeUsage).toBe(true)
    expect(parseSpeechForm({ model: 'w', language: '' }).language).toBeUndefined()
    expect(parseSpeechForm({ model: 'w', language: 'jv' }).language).toBe('jw')
    expect(parseSpeechForm({ model: 'w', temperature: '0' }).temperature).toBe(0)
  })

  it('reads lists as the SDKs send them (name[] repeated), and a plain value too', () => {
    const verbose = { model: 'w', response_format: 'verbose_json' }
    expect(parseSpeechForm(verbose, { timestamp_granularities: ['word', 'segment'] })).toMatchObject({ segmentTimestamps: true, wordTimestamps: true })
    expect(parseSpeechForm(verbose, { timestamp_granularities: ['word'] })).toMatchObject({ segmentTimestamps: false, wordTimestamps: true })
    expect(parseSpeechForm({ ...verbose, timestamp_granularities: 'word' })).toMatchObject({ segmentTimestamps: false, wordTimestamps: true })
    expect(parseSpeechForm({ model: 'w' }, { include: ['logprobs'] }).logprobs).toBe(true)
    expect(parseSpeechForm({ model: 'w', stream: 'true' }, { include: ['logprobs'] }).logprobs).toBe(true)
  })

  it("chunking_strategy turns on voice activity detection, with server_vad's numbers as whisper.cpp's", () => {
    expect(parseSpeechForm({ model: 'w', chunking_strategy: 'auto' }).vad).toEqual({})
    expect(
      parseSpeechForm({ model: 'w', chunking_strategy: '{"type":"server_vad","threshold":0.6,"prefix_padding_ms":200,"silence_duration_ms":500}' }).vad,
    ).toEqual({ threshold: 0.6, speechPadMs: 200, minSilenceMs: 500 })
    expect(parseSpeechForm({ model: 'w', 'chunking_strategy[type]': 'server_vad', 'chunking_strategy[threshold]': '0.3' }).vad).toEqual({ threshold: 0.3 })
  })

  it('plans a transcription or a translation, with details only when the answer needs them', () => {
    const model = { id: 'w', capabilities: ['transcription', 'translation'], vadModelPath: '/m/silero.bin' } as unknown as ModelRecord
    const plain = planSpeech('transcribe', parseSpeechForm({ model: 'w' }), model, false)
    expect(plain).toEqual({
      type: 'speech',
      task: 'transcribe',
      language: undefined,
      prompt: undefined,
      temperature: undefined,
      detailed: false,
      logprobs: false,
    })
    expect(planSpeech('translate', parseSpeechForm({ model: 'w', response_format: 'verbose_json' }), model, false)).toMatchObject({
      task: 'translate',
      detailed: true,
    })
    // The server's setting turns the detector on where the model has one; a request's own choice wins.
    expect(planSpeech('transcribe', parseSpeechForm({ model: 'w' }), model, true).vad).toEqual({})
    expect(planSpeech('transcribe', parseSpeechForm({ model: 'w' }), { ...model, vadModelPath: undefined }, true).vad).toBeUndefined()
    const chat = { id: 'c', capabilities: ['chat'] } as unknown as ModelRecord
    expect(() => planSpeech('transcribe', parseSpeechForm({ model: 'c' }), chat, false)).toThrow(/audio transcription/)
  })

  it.each([
    [{ model: 'w' }, { timestamp_granularities: ['sentence'] }, 'invalid_value', 'timestamp_granularities[0]'],
    [{ model: 'w' }, { timestamp_granularities: ['word'] }, 'invalid_value', 'timestamp_granularities'],
    [{ model: 'w', response_format: 'srt' }, { include: ['logprobs'] }, 'invalid_value', 'include'],
    [{ model: 'w' }, { include: ['segments'] }, 'invalid_value', 'include[0]'],
    [{ model: 'w' }, { known_speaker_names: ['Ann'] }, 'unsupported_parameter', 'known_speaker_names[]'],
    [{ model: 'w' }, { languages: ['en', 'fr'] }, 'unsupported_parameter', 'languages[]'],
    [{ model: 'w', keywords: 'Hearth' }, {}, 'unsupported_parameter', 'keywords'],
    [{ model: 'w', chunking_strategy: 'manual' }, {}, 'invalid_value', 'chunking_strategy'],
    [{ model: 'w', chunking_strategy: '{"type":"semantic"}' }, {}, 'invalid_value', 'chunking_strategy.type'],
    [{ model: 'w', chunking_strategy: '{"type":"server_vad","threshold":2}' }, {}, 'invalid_value', 'chunking_strategy.threshold'],
    [{ model: 'w', chunking_strategy: '{"type":"server_vad","colour":1}' }, {}, 'invalid_value', 'chunking_strategy'],
    [{ model: 'w', 'chunking_strategy[threshold]': '0.5' }, {}, 'missing_required_parameter', 'chunking_strategy[type]'],
    [
      { model: 'w', 'chunking_strategy[type]': 'server_vad', 'chunking_strategy[silence_duration_ms]': 'long' },
      {},
      'invalid_value',
      'chunking_strategy[silence_duration_ms]',
    ],
    [{ model: 'w', chunking_strategy: 'auto', 'chunking_strategy[type]': 'server_vad' }, {}, 'invalid_value', 'chunking_strategy'],
  ])('%j %j → 400 %s on %s', (fields, lists, code, param) => {
    const error = fails(fields as Record<string, string>, lists as Record<string, string[]>)
    expect(error.status).toBe(400)
    expect(error.code).toBe(code)
    expect(error.param).toBe(param)
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
