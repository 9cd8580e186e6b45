/** GET /api/system: the devices, the memory and its budget, and what is loaded at what real cost. */
import { machineMemory, memoryBudget } from '../../services/memory-budget.ts'
import type { ServerContext } from '../../server-context.ts'
import type { SystemInfo } from '../../wire-types.ts'

export async function systemInfo(ctx: ServerContext): Promise<SystemInfo> {
  const { backend, devices, llamaBuild, whisperBuild, notBuilt } = await ctx.hardware
  const selfTests = [
    { engine: 'llama.cpp' as const, build: llamaBuild },
    { engine: 'whisper.cpp' as const, build: whisperBuild },
  ].flatMap(({ engine, build }) =>
    build
      ? [
          {
            engine,
            passed: build.selfTest?.passed ?? null,
            verdict: build.selfTest?.verdict ?? 'not self-tested (built before install ran a self-test: npm run build:engines runs it)',
            withheld: build.withheld ?? [],
          },
        ]
      : [],
  )
  const cpuFallbacks = (ctx.cpuFallbacks?.() ?? []).map((f) => ({
    model: f.model,
    weight_type: f.weightType,
    signal: f.signal,
    phase: f.phase,
    without: f.without,
    recovered: f.recovered,
    at: f.at,
  }))
  const loaded = await Promise.all(
    ctx.scheduler.loaded().map(async (m) => ({
      id: m.id,
      pid: m.engine.pid ?? null,
      devices: m.engine.info.devices,
      // Only a remote model's engine is not a program built here.
      engine: m.engine.info.engine?.name ?? ('remote' as const),
      estimate_bytes: m.estimateBytes,
      rss_bytes: await m.engine.memoryBytes(),
      busy: m.busy,
      waiting: m.waiting,
    })),
  )
  const memory = machineMemory()
  return {
    backend,
    // What serves chat and embeddings: llama.cpp built here (commit, CPU features, GPU toolkit), or
    // nothing until `npm run build:engines` has run; and what cannot run for want of a build.
    engine: llamaBuild
      ? {
          name: 'llama-server',
          commit: llamaBuild.commit,
          cpu_features: llamaBuild.cpuFeatures,
          gpu_backend: llamaBuild.gpu,
          not_built: notBuilt,
          self_tests: selfTests,
          cpu_fallbacks: cpuFallbacks,
        }
      : { name: 'not-built', commit: null, cpu_features: [], gpu_backend: 'none', not_built: notBuilt, self_tests: selfTests, cpu_fallbacks: cpuFallbacks },
    devices: devices.map((d) => ({ name: d.name, type: d.type, backend: d.backend, memory_bytes: d.memoryBytes })),
    memory: {
      total_bytes: memory.totalBytes,
      free_bytes: memory.freeBytes,
      budget_bytes: memoryBudget(ctx.settings, ctx.scheduler),
      budget_source: ctx.settings.memoryBudgetBytes === undefined ? 'free memory' : 'settings',
    },
    threads: ctx.settings.threads,
    loaded,
  }
}
