/**
 * Runs inside an engine process: one llama.cpp model through @fugood/llama.node.
 *
 * Known traps of the binding, designed around here:
 * - after an error inside completion() the context refuses further work, so it is replaced
 *   before the next job instead of being reused;
 * - temperature 0 is not greedy by itself, so it is paired with top_k 1;
 * - stop sequences are cut by our own filter, so no partial stop text ever streams out.
 */
import { llamaNode, type LlamaContext } from './llama-binding.ts'
import { ModelError } from '../errors.ts'
import { StopSequenceFilter } from '../text/stop-sequence-filter.ts'
import type { ChatJob, ChatResult, EngineLoadSpec, EngineModelInfo, FinishReason, JobProgress } from './engine-protocol.ts'


export class LlamaRuntime {
  private context: LlamaContext
  private stale = false
  private readonly addsBos: boolean

  private constructor(
    private readonly spec: EngineLoadSpec,
    context: LlamaContext,
    readonly info: EngineModelInfo,
  ) {
    this.context = context
    this.addsBos = modelAddsBos(context.getModelInfo().metadata)
  }

  static async load(spec: EngineLoadSpec): Promise<LlamaRuntime> {
    const started = performance.now()
    const context = await createContext(spec)
    const info: EngineModelInfo = {
      devices: context.getUsedDevices(),
      loadMs: Math.round(performance.now() - started),
      vision: context.isMultimodalEnabled(),
    }
    return new LlamaRuntime(spec, context, info)
  }

  async chat(job: ChatJob, emit: (p: JobProgress) => void, signal: AbortSignal): Promise<ChatResult> {
    await this.replaceIfStale()
    const formatted = this.formatPrompt(job)
    const promptTokens = (await this.context.tokenize(formatted.prompt)).tokens.length + (this.addsBos ? 1 : 0)
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
    const maxTokens = job.maxTokens ?? Math.min(job.maxCompletionTokens, limit - promptTokens)

    const filter = new StopSequenceFilter([...job.stop, ...formatted.stops])
    let text = ''
    let generated = 0
    const greedy = job.temperature === 0
    const stopNow = () => this.context.stopCompletion()
    signal.addEventListener('abort', stopNow)
    try {
      if (signal.aborted) throw new ModelError('cancelled', 'the request was cancelled')
      const result = await this.context.completion(
        {
          prompt: formatted.prompt,
          n_predict: maxTokens,
          temperature: job.temperature,
          top_k: greedy ? 1 : job.topK,
          top_p: greedy ? 1 : job.topP,
          seed: job.seed ?? (greedy ? 0 : Math.floor(Math.random() * 2 ** 31)),
        },
        (token) => {
          if (filter.stopped || signal.aborted) return
          generated++
          const visible = filter.push(token.token)
          if (visible) {
            text += visible
            emit({ type: 'text', text: visible })
          }
          if (filter.stopped) stopNow()
        },
      )
      if (signal.aborted) throw new ModelError('cancelled', 'the request was cancelled')
      const rest = filter.flush()
      if (rest) {
        text += rest
        emit({ type: 'text', text: rest })
      }
      const stoppedByLimit = !filter.stopped && (result.stopped_limited || result.context_full) && !result.stopped_eos
      const finishReason: FinishReason = stoppedByLimit ? 'length' : 'stop'
      const t = result.timings
      return {
        type: 'chat',
        text,
        finishReason,
        promptTokens,
        completionTokens: generated,
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
      signal.removeEventListener('abort', stopNow)
    }
  }

  async release(): Promise<void> {
    await this.context.release()
  }

  private formatPrompt(job: ChatJob): { prompt: string; stops: string[] } {
    let formatted
    try {
      formatted = this.context.getFormattedChat(job.messages, undefined, { jinja: true, add_generation_prompt: true })
    } catch (e) {
      // The model's own template refused the conversation (say, roles that do not alternate).
      throw new ModelError('invalid_value', `the model's chat template rejected the messages: ${(e as Error).message}`, 'messages')
    }
    const stops = formatted.type === 'jinja' ? formatted.additional_stops.filter((s) => s.length > 0) : []
    return { prompt: formatted.prompt, stops }
  }

  private async replaceIfStale(): Promise<void> {
    if (!this.stale) return
    await this.context.release().catch(() => undefined)
    this.context = await createContext(this.spec)
    this.stale = false
  }
}

async function createContext(spec: EngineLoadSpec): Promise<LlamaContext> {
  const context = await llamaNode.loadModel({
    model: spec.path,
    n_ctx: spec.contextLength,
    n_threads: spec.threads,
    n_gpu_layers: spec.gpuLayers,
    embedding: spec.kind === 'embedding',
    use_mmap: true,
  })
  if (spec.projectorPath && !context.initMultimodal({ path: spec.projectorPath, use_gpu: spec.gpuLayers !== 0 })) {
    await context.release()
    throw new ModelError('engine_load_failed', `the projector ${spec.projectorPath} could not be loaded`)
  }
  return context
}

/** llama.cpp adds a BOS token when the vocabulary asks for one; SentencePiece vocabularies do by default. */
function modelAddsBos(metadata: Record<string, string>): boolean {
  const flag = metadata['tokenizer.ggml.add_bos_token']
  if (flag !== undefined) return flag === 'true' || flag === '1'
  return metadata['tokenizer.ggml.model'] === 'llama'
}
