/**
 * A model whose catalog entry names lenders (`"pool"`): llama-server started with `--rpc` to a
 * tunnel per lender, so llama.cpp places its layers over this machine's memory and theirs. When a
 * lender drops off (llama.cpp names it in its log, or the forwarder sees its tunnel close), the
 * engine is stopped at once with the lender's name as the reason: every request it had ends with
 * that error, none hangs, and the lender frees its memory as its connection closes. The next
 * request checks the lenders again and loads anew.
 */
import type { LlamaBuild } from '../builder/llama-build.ts'
import type { EngineLoadSpec } from '../engine-jobs.ts'
import { ModelError } from '../errors.ts'
import { LlamaServerEngine, type LlamaServerEngineOptions } from '../llama-server/llama-server-engine.ts'
import { LenderLink, rpcUpgradeEnvironment, type PoolLender } from './lender-link.ts'

/** The most llama.cpp's fit leaves free on a lender: the lender's cap is already what its person chose to lend. */
const MAX_FIT_MARGIN_MIB = 512

/** What llama.cpp's fit leaves free on each lender (`--fit-target`), from the smallest lender's free memory. */
export function fitMarginMiB(smallestFreeMiB: number): number {
  return Math.max(1, Math.min(MAX_FIT_MARGIN_MIB, Math.floor(smallestFreeMiB / 10)))
}

/** What the lenders had free at their last check, per model: the memory plan counts the rest as ours. */
const lentMiB = new Map<string, number>()

export function lastLentMiB(modelId: string): number | undefined {
  return lentMiB.get(modelId)
}

/** Why a pooled model last could not run (a lender dropped off or refused), until it next loads. */
const problems = new Map<string, string>()

/** What keeps a pooled model from running now, as the last load or drop found it; undefined: nothing known. */
export function poolProblem(modelId: string): string | undefined {
  return problems.get(modelId)
}

export async function startPooledLlama(
  spec: EngineLoadSpec,
  build: LlamaBuild,
  pool: readonly PoolLender[],
  options: LlamaServerEngineOptions = {},
): Promise<LlamaServerEngine> {
  const links: LenderLink[] = []
  const closeAll = () => links.forEach((l) => l.close())
  try {
    // One at a time: a lender that refuses is named before anything is borrowed from the next.
    for (const lender of pool) links.push(await LenderLink.open(lender, build.commit))
  } catch (e) {
    closeAll()
    problems.set(spec.modelId, e instanceof Error ? e.message : String(e))
    throw e
  }
  lentMiB.set(spec.modelId, links.reduce((sum, l) => sum + l.freeMiB, 0))
  const smallest = Math.min(...links.map((l) => l.freeMiB))
  const pooled: EngineLoadSpec = {
    ...spec,
    // Layers may go to the lenders whatever this machine's own GPU setting says.
    gpuLayers: spec.gpuLayers === 0 ? -1 : spec.gpuLayers,
    rpc: { endpoints: links.map((l) => ({ endpoint: l.endpoint, name: l.name })), fitMarginMiB: fitMarginMiB(smallest) },
  }
  let dropped: string | undefined
  let engine: LlamaServerEngine | undefined
  const drop = (reason: string) => {
    dropped ??= reason
    problems.set(spec.modelId, reason)
    engine?.stopBecause(reason)
  }
  for (const link of links) link.onDrop(drop)
  const onLogLine = (line: string) => {
    for (const link of links) {
      const reason = link.reasonIn(line)
      if (reason) return drop(reason)
    }
  }
  try {
    engine = await LlamaServerEngine.start(pooled, build, { ...options, env: { ...options.env, ...rpcUpgradeEnvironment(links) }, onLogLine })
  } catch (e) {
    closeAll()
    if (dropped) throw new ModelError('remote_unavailable', `model "${spec.modelId}" could not load: ${dropped}`)
    throw e
  }
  if (dropped) engine.stopBecause(dropped)
  else problems.delete(spec.modelId)
  engine.onExit(closeAll)
  return engine
}
