/** The compute devices a llama.cpp build sees, as `llama-server --list-devices` prints them. */
import { execFile } from 'node:child_process'
import { cpus, totalmem } from 'node:os'
import { programPath, type LlamaBuild } from '../builder/llama-build.ts'

/** A compute device as llama.cpp names it: its backend (CUDA, Vulkan, Metal, CPU), kind, name and memory. */
export interface BackendDevice {
  backend: string
  type: string
  name: string
  memoryBytes: number
}

/** GPUs first (as llama.cpp lists them), then the CPU, which it never lists but always has. */
export function listLlamaDevices(build: LlamaBuild, timeoutMs = 30_000): Promise<BackendDevice[]> {
  return new Promise((resolve) => {
    execFile(programPath(build.dir, 'llama-server'), ['--list-devices'], { timeout: timeoutMs, encoding: 'utf8' }, (_error, stdout) => {
      resolve([...parseDeviceList(stdout ?? ''), cpuDevice()])
    })
  })
}

/** "  CUDA0: NVIDIA GeForce RTX 4090 (24080 MiB, 23500 MiB free)" → a device. */
export function parseDeviceList(output: string): BackendDevice[] {
  const devices: BackendDevice[] = []
  for (const match of output.matchAll(/^\s+(\S+): (.+) \((\d+) MiB, \d+ MiB free\)$/gm)) {
    const [, name, description, mib] = match as unknown as [string, string, string, string]
    const backend = name.replace(/\d+$/, '')
    devices.push({ backend, type: backend === 'CPU' ? 'cpu' : 'gpu', name: `${name} ${description}`, memoryBytes: Number(mib) * 1024 * 1024 })
  }
  return devices
}

/** The CPU as a device: always there, whether or not llama.cpp is built to list the rest. */
export function cpuDevice(): BackendDevice {
  return { backend: 'CPU', type: 'cpu', name: cpus()[0]?.model.trim() ?? 'CPU', memoryBytes: totalmem() }
}
