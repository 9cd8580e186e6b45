/** Vitest's global setup for every project: the run's own temporary folder (run-scratch.ts). */
import { useRunScratch } from './run-scratch.ts'

export default function setup(): () => void {
  return useRunScratch('test')
}
