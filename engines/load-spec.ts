import { fallbackTemplateSource } from '../models/catalog/fallback-templates.ts'
import type { ModelRecord } from '../models/catalog/model-record.ts'
import type { EngineLoadSpec, SpeculationPlan } from './engine-jobs.ts'

/** All layers: llama.cpp clamps a larger number to the model's layer count. */
const ALL_LAYERS = 999
/** llama.cpp's own choice: as many layers as fit the device. */
const AUTO_LAYERS = -1

export interface EngineDefaults {
  threads: number
  /** -1 = auto, otherwise a layer count. */
  gpuLayers: number
  /** Parallel slots for chat models. */
  parallel: number
}

/** How an engine loads a model: the catalog entry's own settings over the server's defaults. */
export function loadSpecFor(model: ModelRecord, defaults: EngineDefaults): EngineLoadSpec {
  const entry = model.catalogEntry
  const gpu = entry?.gpu_layers
  return {
    modelId: model.id,
    kind: model.kind,
    path: model.path,
    projectorPath: model.projectorPath,
    contextLength: model.contextLength,
    threads: entry?.threads ?? defaults.threads,
    gpuLayers: gpu === 'all' ? ALL_LAYERS : gpu === 'auto' ? AUTO_LAYERS : (gpu ?? defaults.gpuLayers),
    parallel: slotsFor(model, defaults),
    ...(model.vadModelPath ? { vadModelPath: model.vadModelPath } : {}),
    ...(model.kind === 'chat' && model.chatTemplate !== undefined
      ? { chatTemplate: model.chatTemplate }
      : model.kind === 'chat' && model.templateGuessed && fallbackTemplateSource(model.templateGuessed)
        ? { chatTemplate: fallbackTemplateSource(model.templateGuessed) }
        : {}),
    ...(model.adapterPaths?.length ? { adapterPaths: model.adapterPaths } : {}),
    ...(speculationOf(model) ? { speculative: speculationOf(model) } : {}),
  }
}

/**
 * Speculative decoding, on for every chat model (issue 65): n-gram drafting from the conversation,
 * the draft model paired with it (its catalog `draft`, or a smaller model of the same vocabulary in
 * its folder), and its own MTP heads. `"speculative": false` turns it off, `"ngram"` keeps only the
 * n-gram drafting.
 */
export function speculationOf(model: ModelRecord): SpeculationPlan | undefined {
  const setting = model.catalogEntry?.speculative
  if (model.kind !== 'chat' || setting === false) return undefined
  if (setting === 'ngram') return { ngram: true, requested: true }
  return {
    ngram: true,
    ...(setting === true || model.catalogEntry?.draft ? { requested: true } : {}),
    ...(model.draftPath ? { draftPath: model.draftPath } : {}),
    ...(model.mtpLayers ? { mtp: true } : {}),
  }
}

/** Chat models decode several requests together; encoders and whisper take one job at a time. */
export function slotsFor(model: ModelRecord, defaults: EngineDefaults): number {
  if (model.kind !== 'chat') return 1
  return model.catalogEntry?.parallel ?? defaults.parallel
}
