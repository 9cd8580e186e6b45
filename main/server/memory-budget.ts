import { freemem } from 'node:os'
import type { ModelScheduler } from '../../engines/scheduler/model-scheduler.ts'
import type { ServerSettings } from './settings.ts'

/** The configured budget, or free RAM now plus what our loaded models hold (they could give it back), less a margin. */
export function memoryBudget(settings: ServerSettings, scheduler: ModelScheduler): number {
  if (settings.memoryBudgetBytes !== undefined) return settings.memoryBudgetBytes
  const ours = scheduler.loaded().reduce((sum, m) => sum + m.estimateBytes, 0)
  return Math.floor(0.9 * (freemem() + ours))
}
