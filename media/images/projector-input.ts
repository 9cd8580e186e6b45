/**
 * How large an image a vision projector can use, read from its GGUF header. Images are shrunk to fit
 * before they reach the engine, so a 6000×4000 photo costs what a small one does: the engine decodes
 * a few kilobytes of PNG instead of tens of megapixels it would throw away.
 */
import { stat } from 'node:fs/promises'
import { gguf } from '@huggingface/gguf'

export interface ProjectorInput {
  /** The projector's native input size (`clip.vision.image_size`), when the header says. */
  imageSize: number | undefined
  /** Longest side, in pixels, an image is shrunk to; never smaller than what the projector uses. */
  maxSide: number
}

/** Projectors that always look at one square of `image_size` pixels. */
const FIXED_SIZE_PROJECTORS = new Set(['mlp', 'mlp_norm', 'ldp', 'ldpv2', 'adapter', 'gemma3', 'janus_pro', 'cogvlm'])
/** llama.cpp resamples the image itself: twice its input size keeps that resampling sharp. */
const MARGIN = 2
/** For projectors that tile or take images at their own resolution (Qwen-VL, Pixtral, MiniCPM-V, …). */
const DYNAMIC_NEED = 1024
const MIN_SIDE = 64
const MAX_SIDE = 4096
export const DEFAULT_PROJECTOR_INPUT: ProjectorInput = { imageSize: undefined, maxSide: DYNAMIC_NEED * MARGIN }

const cache = new Map<string, { key: string; input: ProjectorInput }>()

export async function readProjectorInput(path: string): Promise<ProjectorInput> {
  let key: string
  try {
    const info = await stat(path)
    key = `${info.mtimeMs}:${info.size}`
  } catch {
    return DEFAULT_PROJECTOR_INPUT
  }
  const cached = cache.get(path)
  if (cached?.key === key) return cached.input
  let input = DEFAULT_PROJECTOR_INPUT
  try {
    const { metadata } = await gguf(path, { allowLocalFile: true })
    input = projectorInputOf(metadata as Record<string, unknown>)
  } catch {
    // An unreadable header fails the model's load with a clear message; images just get the default.
  }
  cache.set(path, { key, input })
  return input
}

export function projectorInputOf(metadata: Record<string, unknown>): ProjectorInput {
  const imageSize = positive(metadata['clip.vision.image_size'])
  const type = String(metadata['clip.vision.projector_type'] ?? metadata['clip.projector_type'] ?? 'mlp')
  const pinpoints = metadata['clip.vision.image_grid_pinpoints']
  let need: number
  if (Array.isArray(pinpoints) && pinpoints.length > 0) need = Math.max(...pinpoints.map(Number).filter(Number.isFinite))
  else if (FIXED_SIZE_PROJECTORS.has(type) && imageSize !== undefined) need = imageSize
  else need = Math.max(imageSize ?? 0, DYNAMIC_NEED)
  const maxSide = Math.min(MAX_SIDE, Math.max(MIN_SIDE, Math.ceil(need * MARGIN)))
  return { imageSize, maxSide }
}

function positive(v: unknown): number | undefined {
  const n = typeof v === 'bigint' ? Number(v) : v
  return typeof n === 'number' && Number.isFinite(n) && n > 0 ? n : undefined
}
