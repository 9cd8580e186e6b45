/**
 * Ollama's `options` (the Modelfile's parameters) as Hearth's sampling: each one honoured, set
 * aside with a notice, or refused by name, as field-decisions.ts decides. Ollama's own defaults
 * apply where neither the request nor the model's Modelfile says otherwise, so an Ollama client
 * gets the answers it would get from Ollama.
 */
import type { ExtraSamplers, Sampling } from '../../../../engines/engine-jobs.ts'
import { ollamaFieldDecisions } from '../field-decisions.ts'
import { Notices } from '../../services/pipeline/request-notices.ts'
import { OllamaError } from './ollama-errors.ts'

/** Ollama's defaults (api.DefaultOptions): what its clients expect when they say nothing. */
export const OLLAMA_DEFAULTS = { temperature: 0.8, topK: 40, topP: 0.9 } as const

export interface OllamaSampling {
  sampling: Sampling
  /** `num_predict`: the most tokens to write; undefined = as many as the model may. */
  maxTokens: number | undefined
}

const number = (name: string, value: unknown): number => {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new OllamaError(400, `option "${name}" must be a number`)
  return value
}

const integer = (name: string, value: unknown): number => {
  const n = number(name, value)
  if (!Number.isInteger(n)) throw new OllamaError(400, `option "${name}" must be of type integer`)
  return n
}

const inRange = (name: string, value: unknown, min: number, max: number): number => {
  const n = number(name, value)
  if (n < min || n > max) throw new OllamaError(400, `option "${name}" must be between ${min} and ${max}`)
  return n
}

/**
 * The request's options over the model's own parameters (its Modelfile's, for a model from
 * Ollama's store) over Ollama's defaults. Unknown options are set aside, as Ollama does, and said.
 */
export function ollamaSampling(
  requestOptions: Record<string, unknown> | undefined,
  modelParameters: Record<string, unknown> | undefined,
  notices: Notices,
): OllamaSampling {
  const options: Record<string, unknown> = { ...modelParameters, ...dropNulls(requestOptions ?? {}) }
  // Parameters a Modelfile set that Hearth has no use for are the model's business, not the client's.
  decideOptions(dropNulls(requestOptions ?? {}), notices)

  const stop = options.stop === undefined ? [] : stopsOf(options.stop)
  const extra: ExtraSamplers = {}
  if (options.min_p !== undefined) extra.minP = inRange('min_p', options.min_p, 0, 1)
  if (options.typical_p !== undefined) extra.typicalP = inRange('typical_p', options.typical_p, 0, 1)
  if (options.repeat_penalty !== undefined) extra.repeatPenalty = inRange('repeat_penalty', options.repeat_penalty, 0, 10)
  if (options.repeat_last_n !== undefined) extra.repeatLastN = Math.max(-1, integer('repeat_last_n', options.repeat_last_n))
  const mirostat = options.mirostat === undefined ? 0 : integer('mirostat', options.mirostat)
  if (mirostat !== 0 && mirostat !== 1 && mirostat !== 2) throw new OllamaError(400, 'option "mirostat" must be 0, 1 or 2')
  if (mirostat) {
    extra.mirostat = {
      version: mirostat,
      tau: options.mirostat_tau === undefined ? 5 : number('mirostat_tau', options.mirostat_tau),
      eta: options.mirostat_eta === undefined ? 0.1 : number('mirostat_eta', options.mirostat_eta),
    }
  }
  const numPredict = options.num_predict === undefined ? undefined : integer('num_predict', options.num_predict)
  return {
    sampling: {
      temperature: options.temperature === undefined ? OLLAMA_DEFAULTS.temperature : inRange('temperature', options.temperature, 0, 2),
      topK: options.top_k === undefined ? OLLAMA_DEFAULTS.topK : Math.max(1, integer('top_k', options.top_k)),
      topP: options.top_p === undefined ? OLLAMA_DEFAULTS.topP : inRange('top_p', options.top_p, 0, 1),
      presencePenalty: options.presence_penalty === undefined ? 0 : inRange('presence_penalty', options.presence_penalty, -2, 2),
      frequencyPenalty: options.frequency_penalty === undefined ? 0 : inRange('frequency_penalty', options.frequency_penalty, -2, 2),
      logitBias: undefined,
      stop,
      // Ollama's seed 0 is "unset" (its JSON drops zeros); -1 too.
      seed: options.seed === undefined || options.seed === 0 || options.seed === -1 ? undefined : integer('seed', options.seed),
      ...(Object.keys(extra).length > 0 ? { extraSamplers: extra } : {}),
      ...(options.speculative === false ? { speculative: false } : {}),
    },
    // -1 is "no limit" and -2 "fill the context": both run to what the model may write. 0 is
    // Ollama's "unset" too (its JSON omits zero values).
    maxTokens: numPredict === undefined || numPredict <= 0 ? undefined : numPredict,
  }
}

/** Each option a request sends, as the table decides it: said where set aside or unknown, refused by name. */
function decideOptions(options: Record<string, unknown>, notices: Notices): void {
  const decisions = ollamaFieldDecisions('options')
  for (const [name, value] of Object.entries(options)) {
    const decision = decisions.get(name)
    if (decision === undefined) notices.add(`option "${name}" was set aside: Ollama does not know it either`)
    else if (decision.decision === 'set aside') notices.add(decision.note!)
    else if (decision.decision === 'refused' && isActive(name, value)) throw new OllamaError(400, `option "${name}" is not supported: ${decision.note}`)
  }
}

/** An embedding request's options: those of loading as for chat, and sampling ones said to do nothing (an embedding is not sampled). */
export function ollamaEmbedOptions(options: Record<string, unknown> | null | undefined, notices: Notices): void {
  const sent = dropNulls(options ?? {})
  decideOptions(sent, notices)
  const decisions = ollamaFieldDecisions('options')
  for (const name of Object.keys(sent))
    if (decisions.get(name)?.decision === 'honoured') notices.add(`option "${name}" was set aside: an embedding is not sampled`)
}

/** Whether a refused option asks for something: its off value (Ollama's own defaults) asks for nothing. */
function isActive(name: string, value: unknown): boolean {
  if (value === null || value === undefined || value === false) return false
  if (name === 'tfs_z') return value !== 1
  return value !== 0
}

function stopsOf(value: unknown): string[] {
  const list = typeof value === 'string' ? [value] : value
  if (!Array.isArray(list) || !list.every((s) => typeof s === 'string')) throw new OllamaError(400, 'option "stop" must be of type array')
  return list.filter((s) => s.length > 0)
}

function dropNulls(options: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== null))
}
