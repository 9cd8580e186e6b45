/**
 * Which engine serves chat and embeddings on this machine, decided once at start:
 * - llama.cpp built here, when there is a build and it can use the GPU (or there is none to use);
 * - the prebuilt binding when there is no build at all, or when the build is CPU-only while the
 *   binding's prebuilt CUDA or Vulkan build sees a GPU: a model on the GPU through the binding
 *   beats the same model on the CPU, however well compiled (the fix is the toolkit and a rebuild,
 *   which the warning names).
 */
import type { BackendDevice, GpuBackend } from '../../native-models/engine/engine-protocol.ts'
import type { LlamaBuild } from '../../native-models/native-build/llama-build.ts'

export interface EngineChoice {
  /** true: llama-server built here; false: the prebuilt binding. */
  native: boolean
  backend: GpuBackend
  devices: BackendDevice[]
  /** Said at start when the choice is not the fast one. */
  warning: string | undefined
}

export interface EngineChoiceInputs {
  llamaBuild: LlamaBuild | undefined
  /** The `--backend` setting: auto, cpu, cuda or vulkan. */
  wanted: 'auto' | 'cpu' | 'cuda' | 'vulkan'
  gpuLayers: number
  nativeDevices: (build: LlamaBuild) => Promise<BackendDevice[]>
  prebuiltBackend: (wanted: GpuBackend | 'auto') => Promise<{ backend: GpuBackend; devices: BackendDevice[] }>
}

export async function chooseChatEngine(inputs: EngineChoiceInputs): Promise<EngineChoice> {
  const { llamaBuild, wanted } = inputs
  const prebuiltWanted = wanted === 'cpu' ? 'default' : wanted
  // No build: the server has said so already, at start.
  if (!llamaBuild) return { native: false, ...(await inputs.prebuiltBackend(prebuiltWanted)), warning: undefined }
  const devices = await inputs.nativeDevices(llamaBuild)
  const nativeGpu = devices.some((d) => d.type === 'gpu')
  const nativeBackend: GpuBackend = nativeGpu && (llamaBuild.gpu === 'cuda' || llamaBuild.gpu === 'vulkan') ? llamaBuild.gpu : 'default'
  const native: EngineChoice = { native: true, backend: nativeBackend, devices, warning: undefined }
  if (nativeGpu || wanted === 'cpu' || inputs.gpuLayers === 0 || process.platform === 'darwin') return native
  const prebuilt = await inputs.prebuiltBackend(prebuiltWanted)
  if (!prebuilt.devices.some((d) => d.type === 'gpu')) return native
  return {
    native: false,
    ...prebuilt,
    warning:
      `a GPU is here (${prebuilt.backend}) but llama.cpp was built without its toolkit, so chat and embeddings run on the prebuilt binding's ${prebuilt.backend} build. ` +
      'For full speed install the toolkit (CUDA: nvcc; Vulkan: sudo apt-get install -y libvulkan-dev glslc), then: npm run build:engines',
  }
}
