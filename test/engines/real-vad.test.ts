/**
 * Skipping silence on real weights: the trained Silero model (shared fixtures) finds where jfk.wav's
 * speech is inside recordings padded with digital silence, through Hearth's `chunking_strategy` and
 * its `--vad` setting. The whisper model beside it is random, so its words are too: the checks are
 * on where segments are timed, never on what they say.
 *
 * What docs/speech.md promises for skipped silence, and what is checked of it here: no text over
 * silence (no segment time lands in the padding; silence alone gets no segment and no text), times
 * those of the whole recording (the second copy of the speech is timed where it is in the upload,
 * not where it sits in the shorter speech-only audio whisper hears), and `--vad` doing it for
 * requests that do not ask. "Faster" is not timed: other suites share the machine.
 */
import { copyFileSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { decodeAudio } from '../../media/audio/decode-audio.ts'
import { findWhisperBuild } from '../../engines/builder/whisper-build.ts'
import { wavFile } from '../audio/synthesize-audio-files.ts'
import { startTestServer, type TestServer } from '../support/server-process.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { cannotRun, describeIf } from '../support/skips.ts'

const whisperModel = sharedFixture('models/ggml-tiny-random-multilingual.bin')
const silero = sharedFixture('models/for-tests-silero-v6.2.0-ggml.bin')
const jfk = sharedFixture('audio/jfk.wav')
// Without whisper-server there is no speech at all (503, engine_not_built).
const whisperBuilt = findWhisperBuild() !== undefined
if (!whisperBuilt) cannotRun('real-vad needs whisper.cpp built here (npm run build:engines)')

const MODEL = 'whisper-random'
const RATE = 16_000
/** whisper.cpp's speech_pad_ms when a request gives no prefix_padding_ms. */
const DEFAULT_PAD_S = 0.03
/**
 * How far outside the speech a segment time may land, besides the pad. Silero judges 32 ms windows
 * (512 samples); whisper.cpp widens a detected stretch by the pad on each side, whisper's times come
 * in 10 ms steps, and a segment is made at least 10 ms long: at most one window plus 20 ms past the
 * pad. This allows two windows and more; a time in the padding proper (seconds long) is far outside.
 */
const TOLERANCE_S = 0.1

/** Seconds of digital silence, or the whole of jfk.wav (11 s of speech over crowd noise, first sample to last). */
type Part = number | 'speech'

/**
 * Both copies within whisper's first 30 s piece: whisper.cpp cuts the silence out and maps its
 * times back. Over 30 s, Hearth cuts the recording in the pause and adds the second piece's offset.
 */
const LAYOUTS: Array<{ name: string; parts: Part[] }> = [
  { name: 'one piece (29.5 s)', parts: [2.5, 'speech', 3, 'speech', 2] },
  { name: 'two pieces (38 s)', parts: [5, 'speech', 6, 'speech', 5] },
]

interface Segment {
  start: number
  end: number
  text: string
}

interface Transcript {
  duration: number
  text: string
  segments: Segment[]
}

interface Padded {
  wav: Uint8Array
  seconds: number
  /** Where each copy of the speech is, in seconds of the whole recording. */
  speech: Array<{ start: number; end: number }>
}

describeIf(whisperModel && silero && jfk && whisperBuilt, 'needs the shared fixtures (../shared/fixtures) and whisper.cpp built here (npm run build:engines)')(
  'skipping silence with the trained Silero model (shared fixtures)',
  () => {
    let server: TestServer
    /** The same folder served with `--vad`: silence skipped unless a request says otherwise. */
    let vadServer: TestServer
    let speech: Float32Array
    let modelsDir: string

    beforeAll(async () => {
      modelsDir = mkdtempSync(join(tmpdir(), 'hearth-real-vad-'))
      copyFileSync(whisperModel!, join(modelsDir, `ggml-${MODEL}.bin`))
      // Found by its header, beside the speech model; no models.json needed.
      copyFileSync(silero!, join(modelsDir, 'ggml-silero-v6.2.0.bin'))
      ;[server, vadServer] = await Promise.all([startTestServer({ modelsDir }), startTestServer({ modelsDir, args: ['--vad'] })])
      speech = (await decodeAudio(new Uint8Array(readFileSync(jfk!)))).samples
    })

    afterAll(async () => {
      await Promise.all([server?.stop(), vadServer?.stop()])
    })

    function padded(parts: Part[]): Padded {
      const lengths = parts.map((p) => (p === 'speech' ? speech.length : Math.round(p * RATE)))
      const samples = new Float32Array(lengths.reduce((a, b) => a + b, 0))
      const regions: Padded['speech'] = []
      let at = 0
      parts.forEach((part, i) => {
        if (part === 'speech') {
          samples.set(speech, at)
          regions.push({ start: at / RATE, end: (at + speech.length) / RATE })
        }
        at += lengths[i]!
      })
      return { wav: wavFile(samples, { sampleRate: RATE, encoding: 'int', bitsPerSample: 16 }), seconds: samples.length / RATE, speech: regions }
    }

    async function transcribe(audio: Padded, fields: Record<string, string> = {}, on = server): Promise<Transcript> {
      const body = new FormData()
      for (const [k, v] of Object.entries({ model: `ggml-${MODEL}`, response_format: 'verbose_json', ...fields })) body.append(k, v)
      body.append('file', new Blob([new Uint8Array(audio.wav)]), 'padded.wav')
      const res = await fetch(`${on.url}/v1/audio/transcriptions`, { method: 'POST', headers: { authorization: `Bearer ${on.apiKey}` }, body })
      const json = (await res.json()) as Transcript
      expect(res.status, JSON.stringify(json)).toBe(200)
      expect(json.duration).toBeCloseTo(audio.seconds, 2)
      return json
    }

    const times = (t: Transcript) => t.segments.flatMap((s) => [s.start, s.end])

    /** How far `time` is outside the nearest copy of the speech (negative: that far inside it). */
    function outside(time: number, audio: Padded): number {
      return Math.min(...audio.speech.map((r) => Math.max(r.start - time, time - r.end)))
    }

    /** Every segment time inside the speech (within pad + tolerance), and each copy with times of its own. */
    function expectTimedInSpeech(t: Transcript, audio: Padded, padS: number, label: string) {
      expect(t.segments.length).toBeGreaterThan(0)
      const limit = padS + TOLERANCE_S
      const worst = Math.max(...times(t).map((time) => outside(time, audio)))
      console.log(
        `${label}: ${t.segments.length} segments; the time nearest the silence is ${worst <= 0 ? `${(-worst).toFixed(2)} s inside` : `${worst.toFixed(2)} s outside`} the speech (limit ${limit.toFixed(2)} s outside)`,
      )
      const strays = t.segments.filter((s) => outside(s.start, audio) > limit || outside(s.end, audio) > limit)
      expect(strays, `segments timed in the silence around ${JSON.stringify(audio.speech)}`).toEqual([])
      for (const region of audio.speech) {
        expect(
          times(t).some((time) => time >= region.start - limit && time <= region.end + limit),
          `no segment in the copy at ${region.start} s`,
        ).toBe(true)
      }
    }

    it.each(LAYOUTS)(
      '$name: chunking_strategy auto times every segment inside the speech, where the random model also wrote over the silence',
      async ({ name, parts }) => {
        const audio = padded(parts)
        const plain = await transcribe(audio)
        // Without the detector whisper hears the silence and the random model writes over it.
        expect(times(plain).some((time) => outside(time, audio) > 1)).toBe(true)

        const skipped = await transcribe(audio, { chunking_strategy: 'auto' })
        expectTimedInSpeech(skipped, audio, DEFAULT_PAD_S, `${name}, auto`)
      },
    )

    it.each(LAYOUTS)('$name: server_vad as docs/speech.md shows it, and a threshold no window reaches hears no speech at all', async ({ name, parts }) => {
      const audio = padded(parts)
      const readme = await transcribe(audio, { chunking_strategy: '{"type":"server_vad","threshold":0.5,"silence_duration_ms":300,"prefix_padding_ms":100}' })
      expectTimedInSpeech(readme, audio, 0.1, `${name}, server_vad`)
      // The fields reach the detector: at threshold 1 no 32 ms window counts as speech.
      const deaf = await transcribe(audio, { chunking_strategy: '{"type":"server_vad","threshold":1}' })
      expect({ segments: deaf.segments, text: deaf.text }).toEqual({ segments: [], text: '' })
    })

    it('silence alone: text made up without the detector, no segment and no text with it', async () => {
      const audio = padded([10])
      expect((await transcribe(audio)).segments.length).toBeGreaterThan(0)
      const skipped = await transcribe(audio, { chunking_strategy: 'auto' })
      expect({ segments: skipped.segments, text: skipped.text }).toEqual({ segments: [], text: '' })
    })

    it('--vad skips silence for a request that does not ask, as chunking_strategy auto does', async () => {
      const audio = padded(LAYOUTS[0]!.parts)
      const byDefault = await transcribe(audio, {}, vadServer)
      expectTimedInSpeech(byDefault, audio, DEFAULT_PAD_S, '--vad')
      // Greedy decoding on one thread: the same audio gives the same segments either way.
      expect(byDefault.segments).toEqual((await transcribe(audio, { chunking_strategy: 'auto' })).segments)
    })

    it('a request without skipping after one with it is timed as the audio is (patch whisper-1)', async () => {
      // A server of its own, so that its engine has never skipped silence before the first request.
      const fresh = await startTestServer({ modelsDir })
      try {
        const audio = padded(LAYOUTS[0]!.parts)
        const before = await transcribe(audio, {}, fresh)
        await transcribe(padded(LAYOUTS[1]!.parts), { chunking_strategy: 'auto' }, fresh)
        const after = await transcribe(audio, {}, fresh)
        expect(after.segments).toEqual(before.segments)
      } finally {
        await fresh.stop()
      }
    })

    it('--vad gives way to chunking_strategy none: the silence is heard, as on a server without --vad', async () => {
      const audio = padded(LAYOUTS[0]!.parts)
      const heard = await transcribe(audio, { chunking_strategy: 'none' }, vadServer)
      expect(times(heard).some((time) => outside(time, audio) > 1)).toBe(true)
      expect(heard.segments).toEqual((await transcribe(audio)).segments)
    })
  },
)
