/**
 * Runs inside an engine process: one llama.cpp model through @fugood/llama.node.
 *
 * Known traps of the binding, designed around here:
 * - after an error inside completion() the context refuses further work, so it is replaced
 *   before the next job instead of being reused;
 * - temperature 0 is not greedy by itself, so it is paired with top_k 1;
 * - stop sequences are cut by our own filter, so no partial stop text ever streams out;
 * - a media path that fails to load inside completion() aborts it half way, so images arrive here
 *   already checked and normalised by the server (PNG data URLs), and are counted with tokenize()
 *   before completion() ever sees them.
 */
import { pngDataUrl } from '../../images/normalize-image.ts'
import { llamaNode, type CompletionOptions, type CompletionResult, type CompletionToken, type LlamaContext } from './llama-binding.ts'
import { ModelError } from '../../errors.ts'
import { StopSequenceFilter } from '../../text/stop-sequence-filter.ts'
import { addsBosToken } from './special-tokens.ts'
import type { ChatJob, ChatResult, EngineLoadSpec, EngineModelInfo, JobProgress } from '../engine-protocol.ts'

/** Where the binding's chat formatting puts an image in the prompt (mtmd's default marker). */
const MEDIA_MARKER = '<__media__>'

interface FormattedPrompt {
  prompt: string
  stops: string[]
  /** Normalised image data URLs, in prompt order. */
  mediaPaths: string[]
}

export class LlamaRuntime {
  private context: LlamaContext
  private stale = false
  private readonly addsBos: boolean
  /** The model's own jinja template renders the prompt; without a usable one, llama.cpp's built-ins do. */
  private readonly usesJinja: boolean
  /** The BOS token as text, for the parallel path, whose tokenizer does not add it (llama.node 1.7.15). */
  private bosText = ''

  private constructor(
    private readonly spec: EngineLoadSpec,
    context: LlamaContext,
    readonly info: EngineModelInfo,
  ) {
    this.context = context
    const modelInfo = context.getModelInfo()
    this.addsBos = addsBosToken(modelInfo.metadata)
    this.usesJinja = modelInfo.chatTemplates.jinja.default || modelInfo.chatTemplates.jinja.toolUse
  }

  static async load(spec: EngineLoadSpec): Promise<LlamaRuntime> {
    const started = performance.now()
    const context = await createContext(spec)
    const used = context.getUsedDevices()
    const info: EngineModelInfo = {
      // The binding lists accelerators only; a model on none of them runs on the CPU.
      devices: used.length > 0 ? used : ['CPU'],
      loadMs: Math.round(performance.now() - started),
      vision: context.isMultimodalEnabled(),
    }
    const runtime = new LlamaRuntime(spec, context, info)
    if (spec.parallel > 1) runtime.bosText = await bosTokenText(context)
    return runtime
  }

  async chat(job: ChatJob, emit: (p: JobProgress) => void, signal: AbortSignal): Promise<ChatResult> {
    refuseWhatOnlyLlamaServerDoes(job)
    await this.replaceIfStale()
    const formatted = this.formatPrompt(job)
    const promptTokens = await this.countPromptTokens(formatted)
    const limit = this.spec.contextLength
    const requested = job.maxTokens ?? 0
    if (promptTokens + requested > limit || promptTokens >= limit) {
      throw new ModelError(
        'context_length_exceeded',
        `This model's maximum context length is ${limit} tokens. However, you requested ` +
          `${promptTokens + requested} tokens (${promptTokens} in the messages, ${requested} in the completion).`,
        'messages',
      )
    }
    if (signal.aborted) throw new ModelError('cancelled', 'the request was cancelled')

    const maxTokens = job.maxTokens ?? Math.min(job.maxCompletionTokens, limit - promptTokens)
    const output = new GeneratedText(new StopSequenceFilter([...job.stop, ...formatted.stops]), maxTokens, emit)
    const stopNow = () => this.context.stopCompletion()
    const onToken = (token: CompletionToken) => {
      if (output.closed) return // a late callback of a finished completion
      // The token limit needs no stop: the binding ends there itself, and a stop that races the
      // end of generation is one of the ways its context gets stuck.
      if (output.push(token.token) && output.stoppedBySequence && this.spec.parallel <= 1) stopNow()
    }
    if (this.spec.parallel <= 1) signal.addEventListener('abort', stopNow)
    try {
      const greedy = job.temperature === 0
      const options: CompletionOptions = {
        prompt: formatted.prompt,
        media_paths: formatted.mediaPaths.length > 0 ? formatted.mediaPaths : undefined,
        // n_predict 1 leaves llama.node 1.7.15 wedged ("Another completion is in progress" for
        // ever after), so a one-token request asks for two and keeps the first.
        n_predict: Math.max(2, maxTokens),
        temperature: job.temperature,
        top_k: greedy ? 1 : job.topK,
        top_p: greedy ? 1 : job.topP,
        seed: job.seed ?? (greedy ? 0 : Math.floor(Math.random() * 2 ** 31)),
        // The binding's defaults turn on XTC and DRY; the API promises plain temperature/top-k/top-p sampling.
        xtc_probability: 0,
        dry_multiplier: 0,
        penalty_last_n: 0,
      }
      const result = this.spec.parallel > 1
        ? await this.completeInSlot(options, formatted.stops.concat(job.stop), onToken, signal)
        : await this.startCompletion(options, onToken)
      if (signal.aborted) throw new ModelError('cancelled', 'the request was cancelled')
      // Token callbacks may arrive after the promise resolves: let them land, then take any
      // text they still owe from the result itself.
      await new Promise((resolve) => setImmediate(resolve))
      const finished = output.finish(result.text, result.tokens_predicted)
      const stoppedByLimit =
        finished.reachedLimit || (!finished.stopped && !result.stopped_eos && (result.stopped_limited || result.context_full))
      const t = result.timings
      return {
        type: 'chat',
        text: finished.text,
        reasoning: '',
        toolCalls: [],
        logprobs: undefined,
        finishReason: stoppedByLimit ? 'length' : 'stop',
        promptTokens,
        completionTokens: finished.tokens,
        reasoningTokens: 0,
        timings: {
          promptMs: t.prompt_ms,
          promptPerSecond: t.prompt_per_second,
          predictedMs: t.predicted_ms,
          predictedPerSecond: t.predicted_per_second,
        },
      }
    } catch (e) {
      if (!(e instanceof ModelError)) this.stale = true
      throw e
    } finally {
      output.closed = true
      signal.removeEventListener('abort', stopNow)
    }
  }

  /**
   * One sequence among the context's parallel slots: llama.cpp decodes all running requests in one
   * batch. Stop sequences are handed to the binding, which ends the request cleanly there (our
   * filter still cuts the text); a cancelled request is dropped from its slot at once.
   */
  private async completeInSlot(
    options: CompletionOptions,
    stops: string[],
    onToken: (t: CompletionToken) => void,
    signal: AbortSignal,
  ): Promise<CompletionResult> {
    const prompt = options.prompt ?? ''
    // mtmd adds BOS itself when it tokenizes around an image; plain text needs ours.
    const needsBos = this.addsBos && this.bosText && !options.media_paths && !prompt.startsWith(this.bosText)
    const withBos = needsBos ? this.bosText + prompt : prompt
    const request = await this.context.parallel.completion({ ...options, prompt: withBos, stop: stops }, (_id, token) => onToken(token))
    const cancel = () => request.stop()
    signal.addEventListener('abort', cancel, { once: true })
    try {
      const r = await request.promise
      return {
        text: r.text,
        tokens_predicted: r.tokens_predicted,
        tokens_evaluated: r.tokens_evaluated,
        truncated: false,
        context_full: r.context_full,
        interrupted: false,
        stopped_eos: r.stopped_eos,
        stopped_words: r.stopped_word,
        stopped_limited: r.stopped_limit,
        stopping_word: '',
        timings: r.timings,
      }
    } catch (e) {
      if (signal.aborted) throw new ModelError('cancelled', 'the request was cancelled')
      throw e
    } finally {
      signal.removeEventListener('abort', cancel)
    }
  }

  /**
   * llama.node 1.7.15 leaves a context marked busy for good when a completion ends on one of its
   * early-return paths (an error, a full context, n_predict 1, …): every later call gets "Another
   * completion is in progress". A short wait covers a worker still winding down; after that the
   * context is stuck, so it is replaced by a fresh one.
   */
  private async startCompletion(options: CompletionOptions, onToken: (t: CompletionToken) => void) {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.context.completion(options, onToken)
      } catch (e) {
        if (!/another completion is in progress/i.test((e as Error).message) || attempt > 10) throw e
        if (attempt < 10) await new Promise((resolve) => setTimeout(resolve, 25))
        else await this.replaceContext()
      }
    }
  }

  async release(): Promise<void> {
    await this.context.release()
  }

  /**
   * Prompt tokens as llama.cpp will evaluate them. With an image, tokenize() runs the projector's
   * preprocessing and returns one placeholder per image token plus BOS, exactly what completion()
   * evaluates (checked against its `timings.prompt_n`); text alone comes back without BOS.
   */
  private async countPromptTokens(formatted: FormattedPrompt): Promise<number> {
    if (formatted.mediaPaths.length === 0) {
      return (await this.context.tokenize(formatted.prompt)).tokens.length + (this.addsBos ? 1 : 0)
    }
    if (!this.info.vision) throw new ModelError('model_not_compatible', `model "${this.spec.modelId}" has no vision projector`, 'model')
    const markers = formatted.prompt.split(MEDIA_MARKER).length - 1
    if (markers !== formatted.mediaPaths.length) {
      // mtmd pairs markers with images one to one; the text itself may contain the marker.
      throw new ModelError(
        'invalid_value',
        `the messages must not contain the reserved text '${MEDIA_MARKER}' alongside an image`,
        'messages',
      )
    }
    try {
      return (await this.context.tokenize(formatted.prompt, { media_paths: formatted.mediaPaths })).tokens.length
    } catch (e) {
      throw new ModelError('invalid_image', `the engine could not read the image: ${(e as Error).message}`, 'messages')
    }
  }

  private formatPrompt(job: ChatJob): FormattedPrompt {
    // Each image part becomes the marker mtmd pairs with the image, in order.
    const mediaPaths: string[] = []
    const messages = job.messages.map((m) =>
      typeof m.content === 'string' || m.content === null
        ? { role: m.role, content: m.content ?? '' }
        : {
            role: m.role,
            content: m.content.map((part) => {
              if (part.type === 'text') return part
              mediaPaths.push(pngDataUrl(part.png))
              return { type: 'text', text: MEDIA_MARKER }
            }),
          },
    )
    let formatted
    try {
      formatted = this.context.ctx.getFormattedChat(messages, undefined, { jinja: this.usesJinja, add_generation_prompt: true })
    } catch (e) {
      // The model's own template refused the conversation (say, roles that do not alternate).
      throw new ModelError('invalid_value', `the model's chat template rejected the messages: ${(e as Error).message}`, 'messages')
    }
    if (typeof formatted === 'string') return { prompt: formatted, stops: [], mediaPaths }
    return { prompt: formatted.prompt, stops: formatted.additional_stops.filter((s) => s.length > 0), mediaPaths }
  }

  private async replaceIfStale(): Promise<void> {
    if (this.stale) await this.replaceContext()
  }

  private async replaceContext(): Promise<void> {
    await this.context.release().catch(() => undefined)
    this.context = await createContext(this.spec)
    this.stale = false
  }
}

async function createContext(spec: EngineLoadSpec): Promise<LlamaContext> {
  const context = await llamaNode.loadModel({
    model: spec.path,
    // Every slot gets the model's whole context, as each request is promised it.
    n_ctx: spec.contextLength * Math.max(1, spec.parallel),
    n_parallel: Math.max(1, spec.parallel),
    n_threads: spec.threads,
    n_gpu_layers: spec.gpuLayers,
    lib_variant: spec.backend,
    embedding: spec.kind === 'embedding',
    use_mmap: true,
  })
  if (spec.projectorPath && !context.initMultimodal({ path: spec.projectorPath, use_gpu: spec.gpuLayers !== 0 })) {
    await context.release()
    throw new ModelError('engine_load_failed', `the projector ${spec.projectorPath} could not be loaded`)
  }
  if (spec.parallel > 1 && !(await context.parallel.enable({ n_parallel: spec.parallel, n_batch: 512 }))) {
    await context.release()
    throw new ModelError('engine_load_failed', `parallel decoding with ${spec.parallel} slots could not be enabled`)
  }
  return context
}

/** The BOS token's text ("<s>"), when it reads back as exactly that token; else nothing. */
async function bosTokenText(context: LlamaContext): Promise<string> {
  const bos = Number(context.getModelInfo().metadata['tokenizer.ggml.bos_token_id'])
  if (!Number.isInteger(bos) || bos < 0) return ''
  const text = await context.detokenize([bos])
  const back = Array.from((await context.tokenize(text)).tokens)
  return back.length === 1 && back[0] === bos ? text : ''
}


/**
 * The text of one completion as the client sees it: tokens pass through the stop filter and out
 * as progress; what the callbacks missed is recovered from the final result.
 */
class GeneratedText {
  closed = false
  private raw = ''
  private shown = ''
  private tokens = 0

  constructor(
    private readonly filter: StopSequenceFilter,
    private readonly maxTokens: number,
    private readonly emit: (p: JobProgress) => void,
  ) {}

  get stoppedBySequence(): boolean {
    return this.filter.stopped
  }

  private get full(): boolean {
    return this.filter.stopped || this.tokens >= this.maxTokens
  }

  /** Takes one token; true when generation should end (a stop sequence or the token limit). */
  push(piece: string): boolean {
    if (this.full) return true
    this.tokens++
    this.raw += piece
    this.show(this.filter.push(piece))
    return this.full
  }

  finish(resultText: string, tokensPredicted: number) {
    const missed = resultText.startsWith(this.raw) && resultText.length > this.raw.length
    if (!this.full && missed && tokensPredicted <= this.maxTokens) {
      this.show(this.filter.push(resultText.slice(this.raw.length)))
      if (!this.filter.stopped) this.tokens = Math.max(this.tokens, tokensPredicted)
    }
    this.show(this.filter.flush())
    this.closed = true
    const stopped = this.filter.stopped
    return { text: this.shown, tokens: this.tokens, stopped, reachedLimit: !stopped && this.tokens >= this.maxTokens }
  }

  private show(text: string): void {
    if (!text) return
    this.shown += text
    this.emit({ type: 'text', text })
  }
}

/**
 * The prebuilt binding (the fallback when no engine could be built) has no chat parser or grammar
 * for tools, schemas or thinking, and no log probabilities: such requests are refused by name
 * rather than answered as if the fields were not there.
 */
function refuseWhatOnlyLlamaServerDoes(job: ChatJob): void {
  const needs = (param: string, what: string) =>
    new ModelError('model_not_compatible', `${what} needs the llama-server engine, which is not built on this machine (run: npm run build:engines)`, param)
  if (job.tools.length > 0 && job.toolChoice !== 'none') throw needs('tools', 'Tool calling')
  if (job.messages.some((m) => m.role === 'tool' || (m.role === 'assistant' && m.tool_calls?.length))) throw needs('messages', 'A conversation with tool calls')
  if (job.jsonSchema) throw needs('response_format', 'Structured output')
  if (job.topLogprobs !== undefined) throw needs('logprobs', 'Log probabilities')
  if (job.logitBias) throw needs('logit_bias', "'logit_bias'")
  if (job.presencePenalty !== 0 || job.frequencyPenalty !== 0) throw needs(job.presencePenalty !== 0 ? 'presence_penalty' : 'frequency_penalty', 'Repetition penalties')
}
