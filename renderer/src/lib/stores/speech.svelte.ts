/**
 * One recording or audio file turned into text: transcribed in its own language or translated to
 * English; picked, dropped or recorded, streamed in segment by segment, then copied or saved.
 * Subtitles need timings the stream does not carry, so saving .srt/.vtt asks the server once more
 * for the timed segments or words (kept for the next save of the same kind).
 */
import { ApiError } from '../services/api-client.ts'
import { startRecording, type Recording } from '../services/recorder.ts'
import { savedFileName, subtitleFile, wordCues, type SaveFormat } from '../services/subtitles.ts'
import { saveFile } from '../services/save-file.ts'
import { api } from './connection.svelte.ts'
import { models } from './models.svelte.ts'
import type { TimedSegment, TimedWord, TranscriptEvent } from '../../../../main/server/wire-types.ts'

const MODEL_KEY = 'hearth.speech.model'
const TASK_KEY = 'hearth.speech.task'
const SKIP_SILENCE_KEY = 'hearth.speech.skipSilence'
const SUBTITLE_TIMING_KEY = 'hearth.speech.subtitleTiming'
export const MAX_AUDIO_BYTES = 25 * 1024 * 1024

export type SpeechTask = 'transcribe' | 'translate'
/** Subtitle cues: whisper's segments, or short lines timed word by word. */
export type SubtitleTiming = 'segments' | 'words'

const ROUTES: Record<SpeechTask, string> = { transcribe: '/v1/audio/transcriptions', translate: '/v1/audio/translations' }

class SpeechStore {
  file = $state<File | undefined>(undefined)
  model = $state(localStorage.getItem(MODEL_KEY) ?? localStorage.getItem('hearth.translate.model') ?? '')
  task = $state<SpeechTask>(localStorage.getItem(TASK_KEY) === 'translate' ? 'translate' : 'transcribe')
  language = $state('')
  prompt = $state('')
  skipSilence = $state(localStorage.getItem(SKIP_SILENCE_KEY) === 'true')
  subtitleTiming = $state<SubtitleTiming>(localStorage.getItem(SUBTITLE_TIMING_KEY) === 'words' ? 'words' : 'segments')
  segments = $state<string[]>([])
  finalText = $state<string | undefined>(undefined)
  /** The task of the text shown (the switch may have moved since). */
  shownTask = $state<SpeechTask>('transcribe')
  status = $state<'idle' | 'recording' | 'working' | 'done' | 'stopped' | 'error'>('idle')
  error = $state<string | undefined>(undefined)
  recordingSeconds = $state(0)
  saving = $state(false)

  text = $derived(this.finalText ?? this.segments.join('').trim())

  private recording: Recording | undefined
  private recordingTimer: ReturnType<typeof setInterval> | undefined
  private controller: AbortController | undefined
  private timed = new Map<SubtitleTiming, TimedSegment[]>()

  constructor() {
    $effect.root(() => {
      $effect(() => localStorage.setItem(MODEL_KEY, this.model))
      $effect(() => localStorage.setItem(TASK_KEY, this.task))
      $effect(() => localStorage.setItem(SKIP_SILENCE_KEY, String(this.skipSilence)))
      $effect(() => localStorage.setItem(SUBTITLE_TIMING_KEY, this.subtitleTiming))
    })
  }

  ensureModel(): void {
    const usable = models.speechModels
    if (usable.length > 0 && !usable.some((m) => m.id === this.model)) this.model = usable[0]!.id
  }

  choose(file: File): void {
    if (this.status === 'working' || this.status === 'recording') return
    this.error = file.size > MAX_AUDIO_BYTES ? `"${file.name}" is larger than 25 MB, the most the server takes` : undefined
    this.file = file
    this.reset()
  }

  async record(): Promise<void> {
    this.error = undefined
    try {
      this.recording = await startRecording()
    } catch (e) {
      this.error = (e as Error).message
      return
    }
    this.status = 'recording'
    this.recordingSeconds = 0
    this.recordingTimer = setInterval(() => this.recordingSeconds++, 1000)
  }

  async stopRecording(): Promise<void> {
    clearInterval(this.recordingTimer)
    const recording = this.recording
    this.recording = undefined
    if (!recording) return
    const file = await recording.stop()
    this.status = 'idle'
    this.choose(file)
  }

  async run(): Promise<void> {
    if (!this.file || this.status === 'working') return
    if (!this.model) {
      this.error = 'Choose a speech model first (a whisper model, on the Models page)'
      return
    }
    this.reset()
    this.error = undefined
    this.status = 'working'
    this.shownTask = this.task
    const controller = new AbortController()
    this.controller = controller
    try {
      const form = this.form('json')
      form.set('stream', 'true')
      for await (const event of api.events<TranscriptEvent>(ROUTES[this.task], { body: form, signal: controller.signal })) {
        if (event.type === 'transcript.text.delta' && event.delta !== undefined) this.segments.push(event.delta)
        else if (event.type === 'transcript.text.done' && typeof event.text === 'string') this.finalText = event.text.trim()
      }
      this.status = 'done'
    } catch (e) {
      if (controller.signal.aborted) this.status = 'stopped'
      else {
        this.status = 'error'
        this.error =
          e instanceof ApiError && e.missingEndpoint
            ? `${this.task === 'transcribe' ? 'Transcription' : 'Translation'} is not available on this server`
            : (e as Error).message
      }
    } finally {
      this.controller = undefined
    }
  }

  stop(): void {
    this.controller?.abort()
    if (this.recording) {
      clearInterval(this.recordingTimer)
      this.recording.cancel()
      this.recording = undefined
      this.status = 'idle'
    }
  }

  async save(format: SaveFormat): Promise<void> {
    if (!this.file || !this.text) return
    this.error = undefined
    let cues: TimedSegment[] = []
    if (format !== 'txt') {
      this.saving = true
      try {
        const timing = this.subtitleTiming
        cues = this.timed.get(timing) ?? (await this.fetchCues(timing))
        this.timed.set(timing, cues)
      } catch (e) {
        this.error = `The subtitles could not be timed: ${(e as Error).message}`
        return
      } finally {
        this.saving = false
      }
    }
    const { content, mime } = subtitleFile(format, cues, this.text)
    saveFile(savedFileName(this.file.name, format), content, mime)
  }

  private async fetchCues(timing: SubtitleTiming): Promise<TimedSegment[]> {
    const form = this.form('verbose_json')
    form.append('timestamp_granularities[]', timing === 'words' ? 'word' : 'segment')
    const body = await api.json<{ segments?: TimedSegment[]; words?: TimedWord[] }>(ROUTES[this.shownTask], { body: form })
    if (timing === 'words') return wordCues(body.words ?? [])
    return (body.segments ?? []).map((s) => ({ start: s.start, end: s.end, text: s.text }))
  }

  private form(format: 'json' | 'verbose_json'): FormData {
    const form = new FormData()
    form.set('model', this.model)
    form.set('file', this.file!, this.file!.name)
    form.set('response_format', format)
    if (this.language.trim()) form.set('language', this.language.trim().toLowerCase())
    if (this.prompt.trim()) form.set('prompt', this.prompt.trim())
    // Said either way, so that unchecking wins over a server started with --vad.
    form.set('chunking_strategy', this.skipSilence ? 'auto' : 'none')
    return form
  }

  private reset(): void {
    this.segments = []
    this.finalText = undefined
    this.timed.clear()
    if (this.status !== 'recording') this.status = 'idle'
  }
}

export const speech = new SpeechStore()
