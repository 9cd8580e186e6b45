/**
 * A GPU without its toolkit gets the CPU build, and install names the toolkit to install
 * (engines/builder/cmake-build.ts), as it would on a machine with that GPU.
 */
import { expect, it } from 'vitest'
import { describeIf } from '../support/skips.ts'
import { missingGpuToolkit } from '../../engines/builder/cmake-build.ts'

const probes = (nvidia: boolean, render: boolean) => ({ nvidiaDriver: () => nvidia, renderNode: () => render })

describeIf(process.platform !== 'darwin', "the GPU toolkit probes are Linux's and Windows'; macOS has Metal", { elsewhere: true })(
  'a GPU without its toolkit',
  () => {
    it('an NVIDIA card without nvcc: the CUDA toolkit, and the command to build again', () => {
      const message = missingGpuToolkit('none', {}, probes(true, true))
      expect(message).toMatch(/NVIDIA GPU is here, but not the CUDA toolkit \(nvcc\).*nvidia-cuda-toolkit.*npm run build:engines/)
    })

    it('another GPU without glslc and the Vulkan headers: those', () => {
      expect(missingGpuToolkit('none', {}, probes(false, true))).toMatch(/Vulkan build tools.*libvulkan-dev glslc.*npm run build:engines/)
    })

    it('says nothing without a GPU, with its toolkit, or when the CPU was asked for', () => {
      expect(missingGpuToolkit('none', {}, probes(false, false))).toBeUndefined()
      expect(missingGpuToolkit('cuda', {}, probes(true, true))).toBeUndefined()
      expect(missingGpuToolkit('none', { HEARTH_ENGINE_GPU: 'none' }, probes(true, true))).toBeUndefined()
    })
  },
)
