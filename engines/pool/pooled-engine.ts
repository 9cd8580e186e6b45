/**
 * A model whose catalog entry names lenders (`"pool"`): llama-server started with `--rpc` to a
 * tunnel per lender, so llama.cpp places its layers over this machine's memory and theirs. When a
 * lender drops off (llama.cpp names it in its log, or the forwarder sees its tunnel close), the
 * lender is asked why (its rpc-server died, and how) and the engine is stopped with that reason:
 * every request it had ends with that error, none hangs, and the lender frees its memory as its
 * connection closes. The next request checks the lenders again and loads anew.
 */
import type { LlamaBuild } from '../builder/llama-build.ts'
import type { EngineLoadSpec } from '../engine-jobs.ts'
import { ModelError } from '../errors.ts'
import { LlamaServerEngine, type LlamaServerEngineOptions } from '../llama-server/llama-server-engine.ts'
import { LenderLink, rpcUpgradeEnvironment, type LenderLinkOptions, type PoolLender } from './lender-link.ts'

/** The most llama.cpp's fit leaves free on a lender: the lender's cap is already what its person chose to lend. */
const MAX_FIT_MARGIN_MIB = 512

/** What llama.cpp's fit leaves free on each lender (`--fit-target`), from the smallest lender's free memory. */
export function fitMarginMiB(smallestFreeMiB: number): number {
  return Math.max(1, Math.min(MAX_FIT_MARGIN_MIB, Math.floor(smallestFreeMiB / 10)))
}

/**
 * One server's pooled models: starts them, and remembers per model what its lenders had free at
 * their last check (the memory plan counts the rest as this machine's) and why it last could not
 * run. Built once per server and handed to whoever needs it (the engine factory, the models list).
 */
export class PooledModels {
  private readonly lentMiB = new Map<string, number>()
  private readonly problems = new Map<string, string>()

  /** How lenders are reached: their keys' environment and the resolver (tests give their own). */
  constructor(private readonly linkOptions: LenderLinkOptions = {}) {}

  /** What the lenders had free at their last check; undefined before the model was first loaded. */
  lastLentMiB(modelId: string): number | undefined {
    return this.lentMiB.get(modelId)
  }

  /** What keeps a pooled model from running now, as the last load or drop found it; undefined: nothing known. */
  problem(modelId: string): string | undefined {
    return this.problems.get(modelId)
  }

  async start(spec: EngineLoadSpec, build: LlamaBuild, pool: readonly PoolLender[], options: LlamaServerEngineOptions = {}): Promise<LlamaServerEngine> {
    const links: LenderLink[] = []
    const closeAll = () => links.forEach((l) => l.close())
    try {
      // One at a time: a lender that refuses is named before anything is borrowed from the next.
      for (const lender of pool) links.push(await LenderLink.open(lender, build.commit, this.linkOptions))
    } catch (e) {
      closeAll()
      this.problems.set(spec.modelId, e instanceof Error ? e.message : String(e))
      throw e
    }
    this.lentMiB.set(
      spec.modelId,
      links.reduce((sum, l) => sum + l.freeMiB, 0),
    )
    const smallest = Math.min(...links.map((l) => l.freeMiB))
    const pooled: EngineLoadSpec = {
      ...spec,
      // Layers may go to the lenders whatever this machine's own GPU setting says.
      gpuLayers: spec.gpuLayers === 0 ? -1 : spec.gpuLayers,
      rpc: { endpoints: links.map((l) => ({ endpoint: l.endpoint, name: l.name })), fitMarginMiB: fitMarginMiB(smallest) },
    }
    // The first drop, explained (the lender asked why) before the engine is stopped with it.
    let dropped: Promise<string> | undefined
    let engine: LlamaServerEngine | undefined
    const drop = (link: LenderLink, reason: string) => {
      dropped ??= link.explainDrop(reason).then((why) => {
        this.problems.set(spec.modelId, why)
        engine?.stopBecause(why)
        return why
      })
    }
    for (const link of links) link.onDrop((reason) => drop(link, reason))
    const onLogLine = (line: string) => {
      for (const link of links) {
        const reason = link.reasonIn(line)
        if (reason) return drop(link, reason)
      }
    }
    try {
      engine = await LlamaServerEngine.start(pooled, build, { ...options, env: { ...options.env, ...rpcUpgradeEnvironment(links) }, onLogLine })
    } catch (e) {
      closeAll()
      if (dropped) throw new ModelError('remote_unavailable', `model "${spec.modelId}" could not load: ${await dropped}`)
      throw e
    }
    if (dropped) {
      const started = engine
      void dropped.then((why) => started.stopBecause(why))
    } else {
      this.problems.delete(spec.modelId)
    }
    engine.onExit(closeAll)
    return engine
  }
}
