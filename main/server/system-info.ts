/** GET /api/system: the devices, the memory and its budget, and what is loaded at what real cost. */
import { freemem, totalmem } from 'node:os'
import { memoryBudget } from './memory-budget.ts'
import type { ServerContext } from './server-context.ts'

export async function systemInfo(ctx: ServerContext) {
  const { backend, devices } = await ctx.hardware
  const loaded = await Promise.all(
    ctx.scheduler.loaded().map(async (m) => ({
      id: m.id,
      pid: m.engine.pid ?? null,
      devices: m.engine.info.devices,
      estimate_bytes: m.estimateBytes,
      rss_bytes: await m.engine.memoryBytes(),
      busy: m.busy,
      waiting: m.waiting,
    })),
  )
  return {
    backend,
    devices: devices.map((d) => ({ name: d.name, type: d.type, backend: d.backend, memory_bytes: d.memoryBytes })),
    memory: {
      total_bytes: totalmem(),
      free_bytes: freemem(),
      budget_bytes: memoryBudget(ctx.settings, ctx.scheduler),
      budget_source: ctx.settings.memoryBudgetBytes === undefined ? 'free memory' : 'settings',
    },
    threads: ctx.settings.threads,
    loaded,
  }
}
