// The borrower's end of the tunnels to one lender that llama.cpp cannot reach itself (an https
// lender, or one reached over IPv6 only; lender-link.ts), on a thread of its own: a split
// model's every step waits on these bytes, so they must never queue behind the server's own work
// (streaming answers, parsing requests) on the main thread. Plain JavaScript with Node's modules
// only, so it runs as it is from the source tree and from the desktop app's bundle.
//
// Each connection llama-server makes to the forwarder becomes one HTTP request to the lender's
// lend path with the key, upgraded to a raw stream; nothing of the RPC protocol is read.
import { request as httpRequest } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { createServer } from 'node:net'
import { parentPort, workerData } from 'node:worker_threads'

const { url, key, path, protocol, address, family } = workerData
// The address the lender's name resolved to once (lender-link.ts), so every tunnel reaches it; the
// name stays in Host and in TLS's server name.
const lookup = (_hostname, options, callback) => (options.all ? callback(null, [{ address, family }]) : callback(null, address, family))
const tunnels = new Set()

const forwarder = createServer((local) => {
  local.setNoDelay(true)
  tunnels.add(local)
  local.on('error', () => undefined)
  // llama.cpp closing its own connection is no drop; the lender closing one llama.cpp still holds is.
  let borrowerDone = false
  local.once('end', () => (borrowerDone = true))
  const target = new URL(path, url)
  const request = (target.protocol === 'https:' ? httpsRequest : httpRequest)(target, {
    headers: { connection: 'Upgrade', upgrade: protocol, ...(key ? { authorization: `Bearer ${key}` } : {}) },
    ...(address ? { lookup } : {}),
  })
  const dropped = (reason) => {
    local.destroy()
    if (tunnels.delete(local)) parentPort.postMessage({ type: 'drop', reason })
  }
  request.on('upgrade', (_res, remote, head) => {
    remote.setNoDelay(true)
    if (head.length > 0) local.write(head)
    local.pipe(remote)
    remote.pipe(local)
    remote.on('error', () => undefined)
    remote.on('close', () => (borrowerDone ? (tunnels.delete(local), local.destroy()) : dropped('dropped off (its connection closed)')))
    local.on('close', () => {
      tunnels.delete(local)
      remote.destroy()
    })
  })
  request.on('response', (res) => {
    res.resume()
    dropped(`refused the tunnel (HTTP ${res.statusCode})`)
  })
  request.on('error', (e) => dropped(`cannot be reached (${e.code ?? e.message})`))
  request.end()
})

forwarder.listen(0, '127.0.0.1', () => parentPort.postMessage({ type: 'listening', port: forwarder.address().port }))
