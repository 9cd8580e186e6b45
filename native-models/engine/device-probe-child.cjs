// Asks one build of llama.cpp which devices it sees, in a process of its own: loading a build whose
// driver is missing (CUDA without an NVIDIA driver, say) may take the process down. Plain CommonJS,
// so it starts in milliseconds without the TypeScript loader.
const { getBackendDevicesInfo } = require('@fugood/llama.node')

process.once('message', async ({ backend }) => {
  try {
    const devices = await getBackendDevicesInfo(backend)
    process.send({ type: 'devices', devices: devices.map((d) => ({ backend: d.backend, type: d.type, name: d.deviceName, memoryBytes: d.maxMemorySize })) })
  } catch {
    process.send({ type: 'devices', devices: [] })
  }
})
