// A llama-server that dies of SIGILL as an engine with a broken CPU kernel does (issue 34), for
// test/cpu-faults.test.ts. With `--no-repack` (Hearth's fallback) it is the real llama-server, unless
// FAULT_PHASE=always; otherwise it dies at once (FAULT_PHASE=loading) or runs the real one behind a
// proxy and dies on the first completion it is sent (FAULT_PHASE=first-batch), killing the real one first.
import { spawn } from 'node:child_process'
import { createServer, request } from 'node:http'
import { createServer as netServer } from 'node:net'

const [real, ...args] = process.argv.slice(2)
const phase = process.env.FAULT_PHASE ?? 'first-batch'
if (args.includes('--no-repack') && phase !== 'always') {
  const child = spawn(real, args, { stdio: 'inherit' })
  for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => child.kill(signal))
  child.on('exit', (code, signal) => (signal ? process.kill(process.pid, signal) : process.exit(code ?? 1)))
} else if (phase === 'loading') {
  process.kill(process.pid, 'SIGILL')
} else {
  const port = Number(args[args.indexOf('--port') + 1])
  const inner = await new Promise((resolve) => {
    const probe = netServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address()
      probe.close(() => resolve(port))
    })
  })
  const innerArgs = [...args]
  innerArgs[innerArgs.indexOf('--port') + 1] = String(inner)
  const child = spawn(real, innerArgs, { stdio: 'inherit' })
  const die = () => {
    child.kill('SIGKILL')
    process.kill(process.pid, 'SIGILL')
  }
  for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => (child.kill(signal), process.exit(0)))
  createServer((req, res) => {
    if (req.method === 'POST' && /completions/.test(req.url)) return die()
    const upstream = request({ host: '127.0.0.1', port: inner, path: req.url, method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode, answer.headers)
      answer.pipe(res)
    })
    upstream.on('error', () => res.writeHead(503).end())
    req.pipe(upstream)
  }).listen(port, '127.0.0.1')
}
