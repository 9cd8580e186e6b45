/**
 * Other machines on a LAN, made on this one: each a network namespace joined to this one by a veth
 * pair, with addresses of its own (10.231.N.2 there, 10.231.N.1 here; with `ipv6`, fd00:231:N::2
 * and fd00:231:N::1 too). Made by the test (root needed), removed when it ends; traffic goes only
 * between this machine and those namespaces. Latency and rate come from a delaying proxy
 * (delaying-proxy.ts): this kernel has no netem qdisc. Names for them: hostsFile below.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'

export interface LanMachine {
  /** The namespace's name, for `ip netns exec`. */
  namespace: string
  /** Its address, as this machine reaches it. */
  address: string
  /** Its IPv6 address, where it was made with one. */
  address6?: string
  remove(): void
}

const made = new Set<LanMachine>()
process.once('exit', () => {
  for (const machine of made) machine.remove()
})

/** Why namespaces cannot be made here, or undefined where they can. */
export function namespacesUnavailable(): string | undefined {
  if (process.platform !== 'linux') return 'network namespaces are Linux only'
  if (process.getuid?.() !== 0) return 'making network namespaces needs root'
  const probe = `hearth-probe-${process.pid}`
  const added = spawnSync('ip', ['netns', 'add', probe], { encoding: 'utf8' })
  if (added.status !== 0) return `ip netns add failed: ${(added.stderr || added.error?.message || '').trim()}`
  spawnSync('ip', ['netns', 'del', probe])
  return undefined
}

/** A namespace with one veth link to this one; `index` (1–250) picks its subnet. */
export function makeLanMachine(index: number, options: { ipv6?: boolean } = {}): LanMachine {
  const tag = `${process.pid % 100_000}x${index}`
  const namespace = `hearth-lan-${tag}`
  const here = `hl${tag}a`
  const there = `hl${tag}b`
  const address = `10.231.${index}.2`
  const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] })
  const inside = (...args: string[]) => ip('netns', 'exec', namespace, 'ip', ...args)
  const machine: LanMachine = {
    namespace,
    address,
    ...(options.ipv6 ? { address6: `fd00:231:${index}::2` } : {}),
    remove: () => {
      made.delete(machine)
      // Deleting the namespace deletes its end of the pair, and with it this one.
      spawnSync('ip', ['netns', 'del', namespace])
      spawnSync('ip', ['link', 'del', here])
    },
  }
  made.add(machine)
  try {
    ip('netns', 'add', namespace)
    ip('link', 'add', here, 'type', 'veth', 'peer', 'name', there)
    ip('link', 'set', there, 'netns', namespace)
    ip('addr', 'add', `10.231.${index}.1/24`, 'dev', here)
    ip('link', 'set', here, 'up')
    inside('addr', 'add', `${address}/24`, 'dev', there)
    inside('link', 'set', there, 'up')
    inside('link', 'set', 'lo', 'up')
    if (options.ipv6) {
      // nodad: usable at once, not after duplicate address detection's second or two.
      ip('-6', 'addr', 'add', `fd00:231:${index}::1/64`, 'dev', here, 'nodad')
      inside('-6', 'addr', 'add', `fd00:231:${index}::2/64`, 'dev', there, 'nodad')
    }
  } catch (e) {
    machine.remove()
    throw e
  }
  return machine
}

/** The TCP ports a namespace listens on, with their addresses (`127.0.0.1:41234`). */
export function listeningIn(machine: LanMachine): string[] {
  const out = execFileSync('ip', ['netns', 'exec', machine.namespace, 'ss', '-Hltn'], { encoding: 'utf8' })
  return out
    .split('\n')
    .map((line) => line.trim().split(/\s+/)[3])
    .filter((a): a is string => a !== undefined && a !== '')
}

/**
 * A hosts file naming the machines (`{ desk: machine }` → `10.231.1.2 desk`), for a process run with
 * it in place of /etc/hosts (server-process.ts's `hostsFile`): names resolved as the system resolves
 * them, without touching this machine's own /etc/hosts.
 */
export function hostsFile(path: string, names: Record<string, LanMachine>): string {
  const lines = ['127.0.0.1 localhost', '::1 localhost', ...Object.entries(names).map(([name, machine]) => `${machine.address} ${name}`)]
  writeFileSync(path, `${lines.join('\n')}\n`)
  return path
}
