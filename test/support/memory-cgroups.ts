/**
 * A machine's memory, capped by the kernel: a memory cgroup (v2 where the unified hierarchy holds
 * the memory controller, v1 otherwise) that a test's process and its children run in. Made by the
 * test (root needed), removed when it ends. The kernel enforces the cap: a process that needs more
 * than it is OOM-killed, and the group's peak and OOM kills say so afterwards.
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export interface MemoryCgroup {
  /** Where it lives, e.g. /sys/fs/cgroup/memory/hearth-lan-123x1. */
  path: string
  /** Set (or change) the cap; bytes. */
  cap(bytes: number): void
  /** What the group holds now, page cache included; bytes. */
  usageBytes(): number
  /** The most it has held; bytes. */
  peakBytes(): number
  /** How many of its processes the kernel killed for memory. */
  oomKills(): number
  /** `command args`, run inside the group (and its children with it). */
  wrap(command: string, args: string[]): [string, string[]]
  remove(): void
}

interface Layout {
  root: string
  limit: string
  usage: string
  peak: string
  events: string
}

const V2: Layout = { root: '/sys/fs/cgroup', limit: 'memory.max', usage: 'memory.current', peak: 'memory.peak', events: 'memory.events' }
const V1: Layout = {
  root: '/sys/fs/cgroup/memory',
  limit: 'memory.limit_in_bytes',
  usage: 'memory.usage_in_bytes',
  peak: 'memory.max_usage_in_bytes',
  events: 'memory.oom_control',
}

function layout(): Layout | string {
  if (process.platform !== 'linux') return 'memory cgroups are Linux only'
  if (process.getuid?.() !== 0) return 'making memory cgroups needs root'
  const controllers = join(V2.root, 'cgroup.controllers')
  if (existsSync(controllers) && readFileSync(controllers, 'utf8').split(/\s+/).includes('memory')) {
    // A child of the root gets the controller only where the root hands it down.
    const subtree = join(V2.root, 'cgroup.subtree_control')
    try {
      if (!readFileSync(subtree, 'utf8').split(/\s+/).includes('memory')) writeFileSync(subtree, '+memory')
      return V2
    } catch (e) {
      return `the memory controller cannot be handed to child cgroups here: ${(e as Error).message}`
    }
  }
  if (existsSync(join(V1.root, V1.limit))) return V1
  return 'no memory cgroup controller is mounted'
}

const made = new Set<MemoryCgroup>()
process.once('exit', () => {
  for (const group of made) group.remove()
})

/** Why memory cgroups cannot be made here, or undefined where they can. */
export function memoryCgroupsUnavailable(): string | undefined {
  const found = layout()
  if (typeof found === 'string') return found
  try {
    makeMemoryCgroup(`hearth-probe-${process.pid}`).remove()
    return undefined
  } catch (e) {
    return `a memory cgroup cannot be made: ${(e as Error).message}`
  }
}

/** An uncapped group; `cap` it once what it holds at rest is known. */
export function makeMemoryCgroup(name: string): MemoryCgroup {
  const found = layout()
  if (typeof found === 'string') throw new Error(found)
  const path = join(found.root, name)
  mkdirSync(path)
  const read = (file: string) => readFileSync(join(path, file), 'utf8')
  const group: MemoryCgroup = {
    path,
    cap: (bytes) => writeFileSync(join(path, found.limit), String(Math.floor(bytes))),
    usageBytes: () => Number(read(found.usage).trim()),
    // memory.peak is kernel 5.19 on; before it, v2 keeps no peak and the usage now stands in.
    peakBytes: () => Number((existsSync(join(path, found.peak)) ? read(found.peak) : read(found.usage)).trim()),
    oomKills: () => Number(/^oom_kill (\d+)$/m.exec(read(found.events))?.[1] ?? 0),
    wrap: (command, args) => ['sh', ['-c', 'echo $$ > "$0" && exec "$@"', join(path, 'cgroup.procs'), command, ...args]],
    remove: () => {
      made.delete(group)
      // A stopped server's engines may take a moment to exit after it.
      for (let tries = 0; tries < 30 && existsSync(path); tries++) {
        try {
          rmdirSync(path)
        } catch {
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100)
        }
      }
    },
  }
  made.add(group)
  return group
}
