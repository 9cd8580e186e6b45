/**
 * Ollama's `keep_alive`: how long a model stays loaded after the request, as a Go duration
 * ("5m", "1h30m", "300ms"), a number of seconds, or a negative value for "until told otherwise".
 */
import { OllamaError } from './ollama-errors.ts'

const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 }

/** Milliseconds (Infinity: keep it loaded; 0: unload it once the request is done); undefined when not given. */
export function keepAliveMs(value: string | number | null | undefined): number | undefined {
  if (value === null || value === undefined || value === '') return undefined
  const ms = durationMs(value)
  if (ms === undefined) throw new OllamaError(400, `invalid keep_alive: "${value}" (a duration such as "5m" or "1h", seconds, or -1)`)
  return ms
}

/**
 * A duration as Ollama reads one (its `keep_alive`, `OLLAMA_KEEP_ALIVE`): Go's "5m", "1h30m",
 * "300ms", or a number of seconds; a negative one is "for ever" (Infinity). Undefined when it is none of these.
 */
export function durationMs(value: string | number): number | undefined {
  if (typeof value === 'number') return fromSeconds(value)
  const text = value.trim()
  if (/^-?\d+(\.\d+)?$/.test(text)) return fromSeconds(Number(text))
  const negative = text.startsWith('-')
  const body = negative ? text.slice(1) : text
  const parts = [...body.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)]
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== body) return undefined
  if (negative) return Infinity
  return parts.reduce((ms, [, amount, unit]) => ms + Number(amount) * UNIT_MS[unit!]!, 0)
}

function fromSeconds(seconds: number): number | undefined {
  if (!Number.isFinite(seconds)) return undefined
  return seconds < 0 ? Infinity : seconds * 1000
}
