/**
 * Which build of the llama.node binding this machine can run (CUDA, Vulkan, or the default), and
 * the devices it sees: each asked of a short-lived process of its own, since loading a build whose
 * driver is missing can take the process down.
 */
import { fork } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import type { BackendDevice, FromEngine, GpuBackend, ToEngine } from './engine-protocol.ts'

/** The compute devices one build of the binding can use, asked of a short-lived process. */
export async function probeBackendDevices(backend: GpuBackend = 'default', timeoutMs = 30_000): Promise<BackendDevice[]> {
  const child = fork(fileURLToPath(new URL('./device-probe-child.cjs', import.meta.url)), [], {
    execArgv: [],
    stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
  })
  try {
    return await new Promise<BackendDevice[]>((resolve) => {
      const timer = setTimeout(() => resolve([]), timeoutMs)
      child.on('message', (m: FromEngine) => {
        if (m.type !== 'devices') return
        clearTimeout(timer)
        resolve(m.devices)
      })
      child.on('exit', () => resolve([]))
      child.on('error', () => resolve([]))
      child.send({ type: 'probe-devices', backend } satisfies ToEngine)
    })
  } finally {
    child.kill('SIGKILL')
  }
}

/**
 * The llama.cpp build to use: CUDA where an NVIDIA device answers, else Vulkan where a GPU
 * answers, else the platform's default (CPU; Metal on macOS). Each is asked in its own short-lived
 * process, since loading a build whose driver is missing can take the process down.
 */
export async function chooseBackend(wanted: GpuBackend | 'auto'): Promise<{ backend: GpuBackend; devices: BackendDevice[] }> {
  if (wanted !== 'auto') return { backend: wanted, devices: await probeBackendDevices(wanted) }
  for (const backend of ['cuda', 'vulkan'] as const) {
    if (!hasBuild(backend)) continue
    const devices = await probeBackendDevices(backend)
    if (devices.some((d) => d.type === 'gpu')) return { backend, devices }
  }
  return { backend: 'default', devices: await probeBackendDevices('default') }
}

function hasBuild(backend: GpuBackend): boolean {
  try {
    createRequire(import.meta.url).resolve(`@fugood/node-llama-${process.platform}-${process.arch}-${backend}`)
    return true
  } catch {
    return false
  }
}
