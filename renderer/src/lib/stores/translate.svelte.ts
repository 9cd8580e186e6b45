/**
 * One recording or audio file translated to English: picked, dropped or recorded, streamed in
 * segment by segment, then copied or saved. Subtitles need timings the stream does not carry, so
 * saving .srt/.vtt asks the server once more for the timed segments (kept for the next save).
 */
import { ApiError } from '../services/api-client.ts'
import { startRecording, type Recording } from '../services/recorder.ts'
import { savedFileName, subtitleFile, type SaveFormat, type TimedSegment } from '../services/subtitles.ts'
import { saveFile } from '../services/save-file.ts'
import { api } from './connection.svelte.ts'
import { models } from './models.svelte.ts'

const MODEL_KEY = 'hearth.translate.model'
export const MAX_AUDIO_BYTES = 25 * 1024 * 1024

interface DeltaEvent {
  type: 'transcript.text.delta' | 'transcript.text.done'
  delta?: string
  text?: string
  start?: number
  end?: number
}

class TranslateStore {
  file = $state<File | undefined>(undefined)
  model = $state(localStorage.getItem(MODEL_KEY) ?? '')
  language = $state('')
  prompt = $state('')
  segments = $state<string[]>([])
  finalText = $state<string | undefined>(undefined)
  status = $state<'idle' | 'recording' | 'translating' | 'done' | 'stopped' | 'error'>('idle')
  error = $state<string | undefined>(undefined)
  recordingSeconds = $state(0)
  saving = $state(false)

  text = $derived(this.finalText ?? this.segments.join('').trim())

  private recording: Recording | undefined
  private recordingTimer: ReturnType<typeof setInterval> | undefined
  private controller: AbortController | undefined
  private timed: TimedSegment[] | undefined

  constructor() {
    $effect.root(() => {
      $effect(() => localStorage.setItem(MODEL_KEY, this.model))
    })
  }

  ensureModel(): void {
    const usable = models.translationModels
    if (usable.length > 0 && !usable.some((m) => m.id === this.model)) this.model = usable[0]!.id
  }

  choose(file: File): void {
    if (this.status === 'translating' || this.status === 'recording') return
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

  async translate(): Promise<void> {
    if (!this.file || this.status === 'translating') return
    if (!this.model) {
      this.error = 'Choose a translation model first (a whisper model, on the Models page)'
      return
    }
    this.reset()
    this.error = undefined
    this.status = 'translating'
    const controller = new AbortController()
    this.controller = controller
    const timed: TimedSegment[] = []
    try {
      const form = this.form('json')
      form.set('stream', 'true')
      for await (const event of api.events<DeltaEvent>('/v1/audio/translations', { body: form, signal: controller.signal })) {
        if (event.type === 'transcript.text.delta' && event.delta !== undefined) {
          this.segments.push(event.delta)
          if (typeof event.start === 'number' && typeof event.end === 'number') timed.push({ start: event.start, end: event.end, text: event.delta })
        } else if (event.type === 'transcript.text.done' && typeof event.text === 'string') {
          this.finalText = event.text.trim()
        }
      }
      if (timed.length > 0 && timed.length === this.segments.length) this.timed = timed
      this.status = 'done'
    } catch (e) {
      if (controller.signal.aborted) this.status = 'stopped'
      else {
        this.status = 'error'
        this.error = e instanceof ApiError && e.missingEndpoint ? 'Translation is not available on this server yet' : (e as Error).message
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
    let segments: TimedSegment[] = []
    if (format !== 'txt') {
      this.saving = true
      try {
        segments = this.timed ??= await this.fetchTimedSegments()
      } catch (e) {
        this.error = `The subtitles could not be timed: ${(e as Error).message}`
        return
      } finally {
        this.saving = false
      }
    }
    const { content, mime } = subtitleFile(format, segments, this.text)
    saveFile(savedFileName(this.file.name, format), content, mime)
  }

  private async fetchTimedSegments(): Promise<TimedSegment[]> {
    const body = await api.json<{ segments?: TimedSegment[] }>('/v1/audio/translations', { body: this.form('verbose_json') })
    return (body.segments ?? []).map((s) => ({ start: s.start, end: s.end, text: s.text }))
  }

  private form(format: 'json' | 'verbose_json'): FormData {
    const form = new FormData()
    form.set('model', this.model)
    form.set('file', this.file!, this.file!.name)
    form.set('response_format', format)
    if (this.language.trim()) form.set('language', this.language.trim().toLowerCase())
    if (this.prompt.trim()) form.set('prompt', this.prompt.trim())
    return form
  }

  private reset(): void {
    this.segments = []
    this.finalText = undefined
    this.timed = undefined
    if (this.status !== 'recording') this.status = 'idle'
  }
}

export const translate = new TranslateStore()
