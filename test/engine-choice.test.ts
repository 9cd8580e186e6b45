/** Which engine serves chat: the rules of main/server/engine-choice.ts, with the device probes faked. */
import { describe, expect, it } from 'vitest'
import { chooseChatEngine, type EngineChoiceInputs } from '../main/server/engine-choice.ts'
import type { BackendDevice } from '../native-models/engine/engine-protocol.ts'
import type { LlamaBuild } from '../native-models/native-build/llama-build.ts'

const cpu: BackendDevice = { backend: 'CPU', type: 'cpu', name: 'a CPU', memoryBytes: 1 }
const gpu = (backend: string): BackendDevice => ({ backend, type: 'gpu', name: `${backend}0 a GPU`, memoryBytes: 8 << 30 })
const build = (toolkit: LlamaBuild['gpu']): LlamaBuild =>
  ({ dir: '/engines/llama', commit: 'de3ff81', sourceVersion: 'x', gpu: toolkit, cpuFeatures: ['AVX2'], compiler: 'c++', cmakeFlags: [], builtAt: '' })

function inputs(over: Partial<EngineChoiceInputs> & { prebuiltSees?: BackendDevice[]; nativeSees?: BackendDevice[] }) {
  const probed: string[] = []
  const all: EngineChoiceInputs = {
    llamaBuild: build('none'),
    wanted: 'auto',
    gpuLayers: -1,
    nativeDevices: async () => (probed.push('native'), over.nativeSees ?? [cpu]),
    prebuiltBackend: async () => {
      probed.push('prebuilt')
      const devices = over.prebuiltSees ?? [cpu]
      const found = devices.find((d) => d.type === 'gpu')
      return { backend: found ? (found.backend.toLowerCase() as 'cuda' | 'vulkan') : 'default', devices }
    },
    ...over,
  }
  return { all, probed }
}

describe.skipIf(process.platform === 'darwin')('choosing the chat engine', () => {
  it('uses llama.cpp built here on a machine without a GPU', async () => {
    const { all } = inputs({})
    expect(await chooseChatEngine(all)).toMatchObject({ native: true, backend: 'default', warning: undefined })
  })

  it('uses the build on its own GPU, without asking the prebuilt builds', async () => {
    const { all, probed } = inputs({ llamaBuild: build('cuda'), nativeSees: [gpu('CUDA'), cpu] })
    expect(await chooseChatEngine(all)).toMatchObject({ native: true, backend: 'cuda' })
    expect(probed).toEqual(['native'])
  })

  it('prefers the prebuilt GPU build over a CPU-only build, and says how to get both', async () => {
    const { all } = inputs({ prebuiltSees: [gpu('Vulkan'), cpu] })
    const choice = await chooseChatEngine(all)
    expect(choice).toMatchObject({ native: false, backend: 'vulkan' })
    expect(choice.warning).toContain('libvulkan-dev glslc')
    expect(choice.warning).toContain('npm run build:engines')
  })

  it('keeps the build when told to stay on the CPU', async () => {
    for (const over of [{ wanted: 'cpu' as const }, { gpuLayers: 0 }]) {
      const { all, probed } = inputs({ ...over, prebuiltSees: [gpu('CUDA')] })
      expect(await chooseChatEngine(all)).toMatchObject({ native: true })
      expect(probed).toEqual(['native'])
    }
  })

  it('falls back to the prebuilt binding without a build', async () => {
    const { all } = inputs({ llamaBuild: undefined })
    expect(await chooseChatEngine(all)).toMatchObject({ native: false, backend: 'default' })
  })
})
