import { fallbackTemplateSource } from '../models/catalog/fallback-templates.ts'
import type { ModelRecord } from '../models/catalog/model-record.ts'
import type { EngineLoadSpec } from './engine-jobs.ts'

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
    ...(model.kind !== 'chat'
      ? {}
      : model.draftPath
        ? { speculative: { draftPath: model.draftPath } }
        : entry?.speculative === 'ngram'
          ? { speculative: { ngram: true as const } }
          : {}),
  }
}

/** Chat models decode several requests together; encoders and whisper take one job at a time. */
export function slotsFor(model: ModelRecord, defaults: EngineDefaults): number {
  if (model.kind !== 'chat') return 1
  return model.catalogEntry?.parallel ?? defaults.parallel
}
