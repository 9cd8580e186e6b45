/**
 * The model families the conformance suite checks (test/engines/tool-conformance.test.ts), row by row: what
 * each family's template does today. The engines project's setup generates their test models before
 * any suite runs (engines-setup.ts), so no suite pays for it inside a hook's time limit.
 */
import type { FamilyModelSpec } from './family-models.ts'

export interface Family extends FamilyModelSpec {
  /** Several calls in one answer when `parallel_tool_calls` allows them. */
  parallel: boolean
  /** The template renders a history with two calls in one turn (some allow one call per turn). */
  replaysParallel: boolean
  /**
   * The template opens its thinking itself; `reasoning_effort: "none"` turns it off through the
   * template's own switch (`switch`), or, where the template has none, by the engine closing the
   * thinking as soon as it opens (`closed`).
   */
  thinking: 'switch' | 'closed' | 'none'
  /** Words of the thinking the template writes itself (Apriel's "Here are my reasoning steps:"): they stay as reasoning when it is closed. */
  openingWords?: string
  /** Tokens a forced call may take: formats whose markers are many tokens in the test model's vocabulary need more. */
  callTokens?: number
}

type Row = Omit<Family, 'template' | 'vocabulary'>
const qwen = (template: string, row: Row): Family => ({ template, vocabulary: 'qwen3', ...row })
const llama = (template: string, row: Row): Family => ({ template, vocabulary: 'llama3_1', ...row })
const deepseek = (template: string, row: Row): Family => ({ template, vocabulary: 'deepseek_v3', ...row })
/** Most rows: JSON arguments that satisfy the schema, parallel calls, schema output, no thinking. */
const json: Row = { parallel: true, replaysParallel: true, thinking: 'none' }
/** Families that write arguments as tagged text (or their own syntax): the call is forced, and a string enum takes one of its values (Hearth's llama.cpp patches llama-05, llama-09 and llama-10). */
const tagged: Row = { parallel: false, replaysParallel: true, thinking: 'none' }

export const FAMILIES: Family[] = [
  qwen('Qwen-Qwen2.5-7B-Instruct', json),
  qwen('Qwen-Qwen3-0.6B', json),
  qwen('Qwen-QwQ-32B', { ...json, thinking: 'switch' }),
  qwen('Qwen3-Coder', tagged),
  qwen('Qwen3.5-4B', { ...tagged, parallel: true, thinking: 'switch' }),
  llama('NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use', { ...json, parallel: false }),
  llama('NousResearch-Hermes-3-Llama-3.1-8B-tool_use', { ...json, parallel: false }),
  llama('meta-llama-Llama-3.1-8B-Instruct', { ...json, replaysParallel: false }),
  llama('meta-llama-Llama-3.2-3B-Instruct', { ...json, replaysParallel: false }),
  llama('meta-llama-Llama-3.3-70B-Instruct', { ...json, replaysParallel: false }),
  llama('fireworks-ai-llama-3-firefunction-v2', { ...json, parallel: false }),
  llama('meetkai-functionary-medium-v3.1', json),
  llama('meetkai-functionary-medium-v3.2', json),
  qwen('mistralai-Mistral-Nemo-Instruct-2407', { ...json, eos: '</s>', replaysParallel: false }),
  qwen('Mistral-Small-3.2-24B-Instruct-2506', { ...json, eos: '</s>', parallel: false, replaysParallel: false }),
  qwen('unsloth-mistral-Devstral-Small-2507', { ...json, eos: '</s>', parallel: false }),
  qwen('mistralai-Ministral-3-14B-Reasoning-2512', { ...json, eos: '</s>', parallel: false, replaysParallel: false }),
  deepseek('deepseek-ai-DeepSeek-V3.1', { ...json, parallel: false, thinking: 'switch' }),
  deepseek('deepseek-ai-DeepSeek-V3.2', { ...tagged, thinking: 'switch', callTokens: 240 }),
  deepseek('deepseek-ai-DeepSeek-V4', { ...tagged, parallel: true, thinking: 'switch', callTokens: 240 }),
  qwen('ibm-granite-granite-4.0', json),
  qwen('ibm-granite-granite-4.1', json),
  qwen('CohereForAI-c4ai-command-r-plus-tool_use', json),
  qwen('GLM-4.6', tagged),
  qwen('GLM-4.7-Flash', { ...tagged, thinking: 'switch' }),
  // Gemma 4's dict syntax and LFM2's Python-style calls are held to the schema by Hearth's llama-09 and llama-10.
  qwen('google-gemma-4-31B-it', { ...tagged, parallel: true }),
  qwen('LFM2-8B-A1B', tagged),
  qwen('LFM2.5-8B-A1B', tagged),
  qwen('NVIDIA-Nemotron-3-Nano-30B-A3B-BF16', { ...tagged, parallel: true, thinking: 'switch' }),
  qwen('ByteDance-Seed-OSS', tagged),
  qwen('poolside-Laguna-XS.2', { ...tagged, parallel: true, thinking: 'switch' }),
  qwen('tencent-Hy3', { ...tagged, callTokens: 240 }),
  qwen('openbmb-MiniCPM5-1B', { ...tagged, parallel: true, thinking: 'switch' }),
  qwen('Bielik-11B-v3.0-Instruct', { ...json, thinking: 'switch' }),
  // Reka may think before the schema's object even with thinking off: a zero budget closes it (llama-11).
  qwen('Reka-Edge', { ...json, thinking: 'switch' }),
  qwen('MiMo-VL', json),
  qwen('GigaChat3-10B-A1.8B', { ...json, parallel: false }),
  qwen('GigaChat3.1-10B-A1.8B', json),
  qwen('upstage-Solar-Open-100B', json),
  qwen('Apertus-8B-Instruct', { ...json, parallel: false }),
  qwen('unsloth-Apriel-1.5', { ...json, parallel: false }),
  qwen('LFM2.5-Instruct', tagged),
  qwen('StepFun3.5-Flash', { ...tagged, thinking: 'closed' }),
  deepseek('deepseek-ai-DeepSeek-V4-Flash-0731', { ...tagged, parallel: true, thinking: 'switch', callTokens: 240 }),
  qwen('google-gemma-4-31B-it-interleaved', { ...tagged, parallel: true }),
  qwen('poolside-Laguna-S-2.1', { ...tagged, parallel: true, thinking: 'switch' }),
  qwen('poolside-Laguna-XS-2.1', { ...tagged, parallel: true, thinking: 'switch' }),
  // Forced calls here come out through Hearth's llama-12 (bounded ids and format names), llama-01 (no
  // free text before a required call), llama-15 (Granite 3's own parser) and llama-11 (a zero budget
  // closes "<think>\n").
  // gpt-oss, Kimi K2 Thinking and Command R7B think only when the model opens its thinking, which a
  // random model never does.
  { template: 'openai-gpt-oss-120b', vocabulary: 'gptoss', ...json, parallel: false, callTokens: 160 },
  qwen('Kimi-K2-Instruct', { ...json, parallel: false }),
  qwen('Kimi-K2-Thinking', { ...json, parallel: false }),
  qwen('moonshotai-Kimi-K2', { ...json, parallel: false }),
  qwen('MiniMax-M2', { ...tagged, eos: '[e~[', parallel: true, thinking: 'closed' }),
  qwen('MiniMax-M3', { ...tagged, eos: '[e~[', callTokens: 240 }),
  qwen('CohereForAI-c4ai-command-r7b-12-2024-tool_use', { ...json, eos: '<|END_OF_TURN_TOKEN|>' }),
  qwen('Cohere2MoE', { ...json, eos: '<|END_OF_TURN_TOKEN|>', thinking: 'closed' }),
  qwen('ibm-granite-granite-3.3-2B-Instruct', { ...json, eos: '<|end_of_text|>' }),
  qwen('NVIDIA-Nemotron-Nano-v2', { ...json, eos: '<SPECIAL_12>', thinking: 'switch' }),
  qwen('Apriel-1.6-15b-Thinker-fixed', { ...json, eos: '<|end|>', thinking: 'closed', openingWords: 'Here are my reasoning steps:\n' }),
  deepseek('llama-cpp-deepseek-r1', { ...json, parallel: false, thinking: 'closed' }),
  // Writes calls but never shows the model its tools: Hearth lists them in the system message.
  deepseek('deepseek-ai-DeepSeek-R1-Distill-Qwen-32B', { ...json, parallel: false, thinking: 'closed' }),
]

/** Templates with no tool calling at all (no tools shown, no calls written): a request with tools is refused, not answered as if there were none. */
export const WITHOUT_TOOLS: FamilyModelSpec[] = [
  { template: 'google-gemma-2-2b-it', vocabulary: 'qwen3', eos: '<end_of_turn>' },
  { template: 'microsoft-Phi-3.5-mini-instruct', vocabulary: 'qwen3', eos: '<|end|>' },
  { template: 'llama-cpp-rwkv-world', vocabulary: 'qwen3' },
  { template: 'HuggingFaceTB-SmolLM3-3B', vocabulary: 'qwen3' },
  { template: 'deepseek-ai-DeepSeek-R1-Distill-Llama-8B', vocabulary: 'deepseek_v3' },
]

/** The model the agent suites run: Qwen 2.5's template, room for an agent's prompt, and it answers "OK". */
export const AGENT_MODEL: FamilyModelSpec = { template: 'Qwen-Qwen2.5-7B-Instruct', vocabulary: 'qwen3', contextLength: 65536, reply: ['Ċ', 'OK'] }
