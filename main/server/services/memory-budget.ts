import { freemem, totalmem } from 'node:os'
import type { ModelScheduler } from '../../../engines/scheduler/model-scheduler.ts'
import type { ServerSettings } from '../settings.ts'

/**
 * The memory this server may use: the machine's, or less where a cgroup caps it (a container's
 * `--memory`, a systemd unit's MemoryMax), since the kernel kills what grows past that cap however
 * much the machine has free. libuv reads the cap and what the group holds now.
 */
export function machineMemory(): { totalBytes: number; freeBytes: number } {
  const cap = process.constrainedMemory()
  const capped = cap > 0 && cap < totalmem()
  return { totalBytes: capped ? cap : totalmem(), freeBytes: capped ? Math.min(freemem(), process.availableMemory()) : freemem() }
}

/** The configured budget, or free memory now plus what our loaded models hold (they could give it back), less a margin. */
export function memoryBudget(settings: ServerSettings, scheduler: ModelScheduler): number {
  if (settings.memoryBudgetBytes !== undefined) return settings.memoryBudgetBytes
  const ours = scheduler.loaded().reduce((sum, m) => sum + m.estimateBytes, 0)
  return Math.floor(0.9 * (machineMemory().freeBytes + ours))
}
