/**
 * A structured fuzz of llama.cpp's RPC protocol (rpc-protocol.ts), as a borrower with a lending
 * key could send it: sessions of well-formed commands (every command of the protocol at our pin,
 * buffers allocated and used, tensors set and read, small graphs of real ops computed and
 * recomputed), about half of them corrupted on the way: a field of a tensor or a graph set to an
 * edge value (0, all ones, 2^31, a freed buffer, one byte past a buffer, another tensor's id), the
 * declared size made smaller or larger than the body or huge, the body cut short or padded, bytes
 * flipped, the command byte replaced, and commands out of order (a freed buffer used, a graph
 * recomputed after its buffer went). The same seed sends the same messages.
 *
 * It needs only a way to connect (through Hearth's lend tunnel, or to a bare rpc-server) and a way
 * to count the rpc-server's deaths; it says which message came before each death and how long
 * lending took to come back.
 */
import type { Duplex } from 'node:stream'
import { createRng } from './tiny-models.ts'
import {
  ANSWER_SIZE,
  body,
  Cmd,
  CMD_COUNT,
  CMD_NAMES,
  frame,
  GGML_OP_COUNT,
  GGML_TYPE_COUNT,
  GgmlOp,
  GgmlType,
  Reader,
  TENSOR_FIELDS,
  TENSOR_SIZE,
  type CmdName,
  type RpcTensor,
} from './rpc-protocol.ts'

export interface FuzzTarget {
  /** A new connection to the rpc-server (the tunnel made), or an error saying why not. */
  connect(): Promise<Duplex>
  /** How many times the rpc-server has died so far. */
  deaths(): Promise<number>
}

export interface FuzzCrash {
  /** What was sent last before the rpc-server died. */
  message: string
  seed: number
  /** From the dropped connection to the next HELLO answered through a new one. */
  recoveryMs: number
}

export interface FuzzReport {
  seeds: number[]
  /** Commands sent (pings and HELLOs included), and how many of them were corrupted. */
  messages: number
  corrupted: number
  sessions: number
  /** Well-formed commands by name, and corrupted ones by name. */
  sent: Record<string, number>
  corruptedBy: Record<string, number>
  /** Sessions the server ended (a refusal or a death) right after a corrupted message. */
  refused: number
  /** Well-formed commands the server took (answered, or took without a word and answered the ping after). */
  taken: number
  /** Well-formed commands the server refused though nothing was wrong with them: none should be. */
  wrongfullyRefused: string[]
  crashes: FuzzCrash[]
  /** Deaths the counter saw that no session could be tied to. */
  unattributedDeaths: number
  /** Times the server took longer than the answer timeout to answer (it may hang). */
  timeouts: number
  seconds: number
}

const ANSWER_TIMEOUT_MS = 5_000
/** Recovery is given up after this: lending did not come back. */
const RECOVERY_LIMIT_MS = 30_000
const MiB = 1024n * 1024n

/** What a session knows of the server: its alignment, and the buffers it was given. */
interface Session {
  sock: Duplex
  reader: Reader
  alignment: bigint
  buffers: Array<{ handle: bigint; base: bigint; size: bigint; freed: boolean }>
  /** Tensors made in this session, with the bytes last set in them. */
  tensors: RpcTensor[]
  nextId: bigint
  computed: boolean
  /** A corrupted message was taken: what the session thinks the server holds may be wrong from here on. */
  tainted: boolean
  cachedHash?: { tensor: RpcTensor; hash: bigint }
}

/** One message: the command byte, the body, and what the fuzz did to it. */
interface Message {
  cmd: CmdName
  frame: Buffer
  /** How the message was corrupted, or undefined when it is well formed. */
  corruption?: string
  /** A well-formed command the server should refuse all the same (a buffer freed twice, HELLO again). */
  refusalExpected?: boolean
  /** End the connection after sending (the body was cut short, or the size promises more). */
  thenClose?: boolean
  /** The size of the answer a well-formed message gets (GET_TENSOR: its size). */
  answer?: number
}

export async function fuzzRpc(target: FuzzTarget, options: { seeds: number[]; budgetMs: number; log?: (line: string) => void }): Promise<FuzzReport> {
  const report: FuzzReport = {
    seeds: options.seeds,
    messages: 0,
    corrupted: 0,
    sessions: 0,
    sent: {},
    corruptedBy: {},
    refused: 0,
    taken: 0,
    wrongfullyRefused: [],
    crashes: [],
    unattributedDeaths: 0,
    timeouts: 0,
    seconds: 0,
  }
  const started = performance.now()
  const deathsAtStart = await target.deaths()
  let deathsSeen = deathsAtStart
  const perSeed = options.budgetMs / options.seeds.length
  for (const seed of options.seeds) {
    const rng = createRng(seed)
    const seedEnd = performance.now() + perSeed
    while (performance.now() < seedEnd) {
      report.sessions++
      const outcome = await runSession(target, rng, report)
      // A session the server ended may have ended in its death: wait a moment for the supervisor to hear of it.
      const deaths = outcome.droppedAt === undefined ? await target.deaths() : await settledDeaths(target, deathsSeen)
      if (deaths > deathsSeen) {
        const dropped = outcome.droppedAt ?? performance.now()
        const recoveryMs = await recover(target, dropped, report)
        deathsSeen = await target.deaths()
        report.crashes.push({ message: outcome.last ?? '(none)', seed, recoveryMs })
        options.log?.(`rpc fuzz: the rpc-server died after ${outcome.last} (seed ${seed}); lending back in ${recoveryMs.toFixed(0)} ms`)
      }
    }
  }
  report.unattributedDeaths = (await target.deaths()) - deathsAtStart - report.crashes.length
  report.seconds = (performance.now() - started) / 1000
  return report
}

/** The death count once a dropped connection's death, if any, has been heard of by the supervisor. */
async function settledDeaths(target: FuzzTarget, seen: number): Promise<number> {
  let deaths = await target.deaths()
  for (let i = 0; i < 2 && deaths === seen; i++) {
    await new Promise((resolve) => setTimeout(resolve, 2))
    deaths = await target.deaths()
  }
  return deaths
}

/** Waits for a new connection to answer HELLO; the time since `since`. */
async function recover(target: FuzzTarget, since: number, report: FuzzReport): Promise<number> {
  while (performance.now() - since < RECOVERY_LIMIT_MS) {
    try {
      const sock = await target.connect()
      const reader = new Reader(sock)
      sock.write(frame(Cmd.HELLO, body.hello()))
      report.messages++
      const answered = await reader.answer(ANSWER_SIZE.HELLO!, ANSWER_TIMEOUT_MS)
      sock.destroy()
      if (answered) return performance.now() - since
    } catch {
      // Not back yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error(`lending did not come back within ${RECOVERY_LIMIT_MS / 1000} s of a crash`)
}

interface SessionOutcome {
  /** The last message sent before the server ended the session, described. */
  last?: string
  /** When the server ended it (undefined: the fuzz did). */
  droppedAt?: number
}

async function runSession(target: FuzzTarget, rng: () => number, report: FuzzReport): Promise<SessionOutcome> {
  let sock: Duplex
  try {
    sock = await target.connect()
  } catch {
    return {}
  }
  sock.on('error', () => undefined)
  ;(sock as Duplex & { setNoDelay?: (on: boolean) => void }).setNoDelay?.(true)
  const s: Session = { sock, reader: new Reader(sock), alignment: 32n, buffers: [], tensors: [], nextId: 0x1000n, computed: false, tainted: false }
  const describe = (m: Message) => `${m.cmd}${m.corruption ? ` (${m.corruption})` : ''}`
  try {
    // HELLO first; now and then a broken one.
    const hello: Message = { cmd: 'HELLO', frame: frame(Cmd.HELLO, body.hello()), answer: ANSWER_SIZE.HELLO }
    const sentHello = rng() < 0.03 ? corrupt(hello, s, rng) : hello
    const helloOutcome = await send(s, sentHello, report)
    if (helloOutcome !== 'ok') return helloOutcome === 'closed' ? { last: describe(sentHello), droppedAt: performance.now() } : {}
    if (sentHello.corruption) return {}
    // Learn the alignment and get a buffer or two: most commands need one.
    const alignment = await ask(s, { cmd: 'GET_ALIGNMENT', frame: frame(Cmd.GET_ALIGNMENT, body.device()), answer: 8 }, report)
    if (!alignment) return { last: 'GET_ALIGNMENT', droppedAt: performance.now() }
    s.alignment = alignment.readBigUInt64LE(0)
    for (let i = 0; i < 1 + Math.floor(rng() * 2); i++)
      if (!(await allocate(s, report, 64n * 1024n))) return { last: 'ALLOC_BUFFER', droppedAt: performance.now() }
    const steps = 4 + Math.floor(rng() * 30)
    for (let step = 0; step < steps; step++) {
      const wellFormed = generate(s, rng)
      if (!wellFormed) continue
      const message = rng() < 0.5 ? corrupt(wellFormed, s, rng) : wellFormed
      const outcome = await send(s, message, report)
      if (outcome === 'closed') {
        if (message.corruption) report.refused++
        else if (!message.refusalExpected && !s.tainted) report.wrongfullyRefused.push(message.cmd)
        return { last: describe(message), droppedAt: performance.now() }
      }
      if (outcome === 'ok' && !message.corruption) report.taken++
      if (outcome === 'ok' && message.corruption) s.tainted = true
      if (outcome === 'timeout' || message.thenClose || message.corruption?.startsWith('size')) return { last: describe(message) }
    }
    return {}
  } finally {
    sock.destroy()
  }
}

/** Sends a message and reads its answer (or a ping's, for commands that answer nothing). */
async function send(s: Session, m: Message, report: FuzzReport): Promise<'ok' | 'closed' | 'timeout'> {
  report.messages++
  report.sent[m.cmd] = (report.sent[m.cmd] ?? 0) + 1
  if (m.corruption) {
    report.corrupted++
    report.corruptedBy[m.cmd] = (report.corruptedBy[m.cmd] ?? 0) + 1
  }
  if (s.reader.ended) return 'closed'
  if (m.thenClose) {
    s.sock.end(m.frame)
    // The server reads what came, then sees the end: give it the time to die of it, if it does.
    await s.reader.take(1, 250)
    return s.reader.ended ? 'closed' : 'ok'
  }
  let expected = m.answer
  if (expected === undefined) {
    // No answer of its own: a ping tells whether the server took it (and keeps both ends in step),
    // in the same write (two small writes would wait on each other's ACK).
    s.sock.write(Buffer.concat([m.frame, frame(Cmd.GET_ALIGNMENT, body.device())]))
    report.messages++
    expected = 8
  } else {
    s.sock.write(m.frame)
  }
  const answer = await s.reader.answer(expected, m.corruption ? 250 : ANSWER_TIMEOUT_MS)
  if (answer) return 'ok'
  if (s.reader.ended) return 'closed'
  // Alive but out of step (a corrupted size) or slow: the session ends here.
  if (!m.corruption) report.timeouts++
  return 'timeout'
}

async function ask(s: Session, m: Message, report: FuzzReport): Promise<Buffer | undefined> {
  report.messages++
  report.sent[m.cmd] = (report.sent[m.cmd] ?? 0) + 1
  s.sock.write(m.frame)
  return s.reader.answer(m.answer!, ANSWER_TIMEOUT_MS)
}

async function allocate(s: Session, report: FuzzReport, size: bigint): Promise<boolean> {
  const answer = await ask(s, { cmd: 'ALLOC_BUFFER', frame: frame(Cmd.ALLOC_BUFFER, body.allocBuffer(size)), answer: 16 }, report)
  if (!answer) return false
  const handle = answer.readBigUInt64LE(0)
  if (handle === 0n) return true // refused (the lender's cap): still in step
  const base = await ask(s, { cmd: 'BUFFER_GET_BASE', frame: frame(Cmd.BUFFER_GET_BASE, body.bufferHandle(handle)), answer: 8 }, report)
  if (!base) return false
  s.buffers.push({ handle, base: base.readBigUInt64LE(0), size: answer.readBigUInt64LE(8), freed: false })
  return true
}

// --- well-formed messages ---

const TYPE_SIZE: Record<number, { block: number; bytes: number }> = {
  [GgmlType.F32]: { block: 1, bytes: 4 },
  [GgmlType.F16]: { block: 1, bytes: 2 },
  [GgmlType.Q8_0]: { block: 32, bytes: 34 },
  [GgmlType.I32]: { block: 1, bytes: 4 },
}

const floatBits = (f: number) => {
  const b = Buffer.alloc(4)
  b.writeFloatLE(f)
  return b.readInt32LE(0)
}

/** A buffer still held, and room in it for `bytes` at the alignment; undefined when there is none. */
function place(s: Session, rng: () => number, bytes: bigint): { buffer: Session['buffers'][number]; data: bigint } | undefined {
  const live = s.buffers.filter((b) => !b.freed && b.size >= bytes)
  if (live.length === 0) return undefined
  const buffer = live[Math.floor(rng() * live.length)]!
  const slots = (buffer.size - bytes) / s.alignment
  const slot = BigInt(Math.floor(rng() * Number(slots + 1n)))
  return { buffer, data: buffer.base + slot * s.alignment }
}

function contiguous(type: number, ne: [number, number, number, number]): [number, number, number, number] {
  const { block, bytes } = TYPE_SIZE[type]!
  const nb0 = bytes
  const nb1 = (ne[0] / block) * bytes
  return [nb0, nb1, nb1 * ne[1], nb1 * ne[1] * ne[2]]
}

function nbytes(t: RpcTensor): bigint {
  const { block, bytes } = TYPE_SIZE[t.type] ?? { block: 1, bytes: 4 }
  if (t.ne.some((n) => n === 0)) return 0n
  let size = BigInt((t.ne[0] / block) * bytes)
  for (let i = 1; i < 4; i++) size += BigInt(t.ne[i]! - 1) * BigInt(t.nb[i]!)
  return size
}

function tensor(s: Session, fields: Partial<RpcTensor> & Pick<RpcTensor, 'type' | 'ne'>): RpcTensor {
  s.nextId += 0x10n
  return {
    id: s.nextId,
    buffer: 0n,
    nb: contiguous(fields.type, fields.ne),
    op: GgmlOp.NONE,
    opParams: [],
    flags: 0,
    src: [],
    viewSrc: 0n,
    viewOffs: 0n,
    data: 0n,
    name: `fuzz-${s.nextId}`,
    useCount: 1,
    ...fields,
  }
}

/** A tensor in one of the session's buffers (a leaf), or undefined where none has room. */
function leaf(s: Session, rng: () => number, type: number, ne: [number, number, number, number]): RpcTensor | undefined {
  const t = tensor(s, { type, ne })
  const spot = place(s, rng, nbytes(t))
  if (!spot) return undefined
  t.buffer = spot.buffer.handle
  t.data = spot.data
  s.tensors.push(t)
  return t
}

function anyTensor(s: Session, rng: () => number): RpcTensor | undefined {
  const live = s.tensors.filter((t) => s.buffers.some((b) => b.handle === t.buffer && !b.freed))
  if (live.length > 0 && rng() < 0.6) return live[Math.floor(rng() * live.length)]
  return leaf(s, rng, GgmlType.F32, [4 + 4 * Math.floor(rng() * 16), 1 + Math.floor(rng() * 4), 1, 1])
}

const fnv = (data: Buffer) => {
  let hash = 0xcbf29ce484222325n
  for (const byte of data) hash = BigInt.asUintN(64, (hash ^ BigInt(byte)) * 0x100000001b3n)
  return hash
}

function randomFloats(rng: () => number, n: number): Buffer {
  const b = Buffer.alloc(n * 4)
  for (let i = 0; i < n; i++) b.writeFloatLE(rng() * 2 - 1, i * 4)
  return b
}

/**
 * A small graph of real ops over tensors in one buffer: element-wise ops, a norm, a matrix
 * product (F32 and Q8_0 weights), views, rows gathered and stored by index, softmax, unary and
 * gated units. Returns the node ids in order and every tensor they reach.
 */
function graph(s: Session, rng: () => number): { nodes: bigint[]; tensors: RpcTensor[]; inputs: Array<{ t: RpcTensor; data: Buffer }> } | undefined {
  const K = 32
  const M = 1 + Math.floor(rng() * 4)
  const N = 2 + Math.floor(rng() * 6)
  const a = leaf(s, rng, GgmlType.F32, [K, M, 1, 1])
  const b = leaf(s, rng, GgmlType.F32, [K, M, 1, 1])
  const w = leaf(s, rng, rng() < 0.5 ? GgmlType.F32 : GgmlType.Q8_0, [K, N, 1, 1])
  const ids = leaf(s, rng, GgmlType.I32, [M, 1, 1, 1])
  if (!a || !b || !w || !ids) return undefined
  const inputs = [
    { t: a, data: randomFloats(rng, K * M) },
    { t: b, data: randomFloats(rng, K * M) },
    { t: w, data: w.type === GgmlType.F32 ? randomFloats(rng, K * N) : Buffer.alloc(Number(nbytes(w)), 0x11) },
    { t: ids, data: Buffer.from(Int32Array.from({ length: M }, () => Math.floor(rng() * N)).buffer) },
  ]
  const nodes: RpcTensor[] = []
  const node = (op: number, src: RpcTensor[], ne: [number, number, number, number], opParams: number[] = [], type = GgmlType.F32): RpcTensor | undefined => {
    const t = leaf(s, rng, type, ne)
    if (!t) return undefined
    t.op = op
    t.src = src.map((x) => x.id)
    t.opParams = opParams
    nodes.push(t)
    return t
  }
  const view = (op: number, of: RpcTensor, ne: [number, number, number, number], nb: [number, number, number, number], offs = 0n): RpcTensor => {
    const t = tensor(s, { type: of.type, ne, nb, op, src: [of.id], viewSrc: of.id, viewOffs: offs, buffer: of.buffer, data: of.data + offs })
    nodes.push(t)
    return t
  }
  const c = node(GgmlOp.ADD, [a, b], [K, M, 1, 1])
  const d = c && node(GgmlOp.MUL, [c, a], [K, M, 1, 1])
  const e = d && node(GgmlOp.RMS_NORM, [d], [K, M, 1, 1], [floatBits(1e-6)])
  const f = e && node(GgmlOp.MUL_MAT, [w, e], [N, M, 1, 1])
  const g = f && node(GgmlOp.SCALE, [f], [N, M, 1, 1], [floatBits(0.5), floatBits(0)])
  const h = g && node(GgmlOp.SOFT_MAX, [g], [N, M, 1, 1], [floatBits(1), floatBits(0)])
  const i = h && node(GgmlOp.UNARY, [h], [N, M, 1, 1], [10 /* SILU */])
  const rows = node(GgmlOp.GET_ROWS, [w, ids], [K, M, 1, 1])
  const glu = node(GgmlOp.GLU, [a, b], [K, M, 1, 1], [2 /* SWIGLU */, 0])
  const t = view(GgmlOp.TRANSPOSE, a, [M, K, 1, 1], [a.nb[1], a.nb[0], a.nb[2], a.nb[3]])
  const ct = node(GgmlOp.CONT, [t], [M, K, 1, 1])
  const v = view(GgmlOp.VIEW, b, [K, 1, 1, 1], [...b.nb] as RpcTensor['nb'])
  const sq = node(GgmlOp.SQR, [v], [K, 1, 1, 1])
  const sum = sq && node(GgmlOp.SUM_ROWS, [sq], [1, 1, 1, 1])
  if (!c || !d || !e || !f || !g || !h || !i || !rows || !glu || !ct || !sq || !sum) return undefined
  // A copy into a leaf: CPY is a view of its destination.
  const dst = leaf(s, rng, GgmlType.F16, [K, M, 1, 1])
  if (dst) {
    const cpy = tensor(s, { type: dst.type, ne: dst.ne, nb: dst.nb, op: GgmlOp.CPY, src: [c.id, dst.id], viewSrc: dst.id, buffer: dst.buffer, data: dst.data })
    nodes.push(cpy)
  }
  const all = new Map<bigint, RpcTensor>()
  for (const x of [a, b, w, ids, ...(dst ? [dst] : []), ...nodes]) all.set(x.id, x)
  return { nodes: nodes.map((n) => n.id), tensors: shuffle([...all.values()], rng), inputs }
}

function shuffle<T>(items: T[], rng: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1))
    ;[items[i], items[j]] = [items[j]!, items[i]!]
  }
  return items
}

/** A well-formed message for a command picked at random (each command of the protocol), or undefined where the session cannot make one. */
function generate(s: Session, rng: () => number): Message | undefined {
  const live = s.buffers.filter((b) => !b.freed)
  const pick = rng()
  const m = (cmd: CmdName, b: Buffer, answer?: number): Message => ({ cmd, frame: frame(Cmd[cmd], b), answer: answer ?? ANSWER_SIZE[cmd] })
  if (pick < 0.04) return m('DEVICE_COUNT', Buffer.alloc(0))
  if (pick < 0.07) return m('GET_ALIGNMENT', body.device())
  if (pick < 0.1) return m('GET_MAX_SIZE', body.device())
  if (pick < 0.13) return m('GET_DEVICE_MEMORY', body.device())
  if (pick < 0.17) return m('ALLOC_BUFFER', body.allocBuffer(BigInt(1 + Math.floor(rng() * 256 * 1024))))
  if (pick < 0.2) return live.length ? m('BUFFER_GET_BASE', body.bufferHandle(live[0]!.handle)) : undefined
  if (pick < 0.23) {
    // Freed, and then (in later messages) perhaps used again: the session keeps the handle.
    const b = s.buffers[Math.floor(rng() * s.buffers.length)]
    if (!b) return undefined
    const twice = b.freed
    b.freed = true
    // The graph kept for GRAPH_RECOMPUTE goes with any buffer.
    s.computed = false
    return { ...m('FREE_BUFFER', body.bufferHandle(b.handle)), refusalExpected: twice }
  }
  if (pick < 0.26) return live.length ? m('BUFFER_CLEAR', body.bufferClear(live[0]!.handle, Math.floor(rng() * 256))) : undefined
  if (pick < 0.34) {
    const t = anyTensor(s, rng)
    if (!t) return undefined
    const size = Number(nbytes(t))
    const cache = rng() < 0.2
    const data = Buffer.alloc(size, Math.floor(rng() * 256))
    if (cache) s.cachedHash = { tensor: t, hash: fnv(data) }
    return m('SET_TENSOR', body.setTensor(t, 0n, data, cache))
  }
  if (pick < 0.38) {
    const known = s.cachedHash
    const t = known?.tensor ?? anyTensor(s, rng)
    if (!t) return undefined
    const gone = s.buffers.some((b) => b.handle === t.buffer && b.freed)
    return { ...m('SET_TENSOR_HASH', body.setTensorHash(t, 0n, known?.hash ?? BigInt(Math.floor(rng() * 2 ** 32)))), refusalExpected: gone }
  }
  if (pick < 0.44) {
    const t = anyTensor(s, rng)
    if (!t) return undefined
    const size = nbytes(t)
    return m('GET_TENSOR', body.getTensor(t, 0n, size), Number(size))
  }
  if (pick < 0.48) {
    const src = anyTensor(s, rng)
    const dst = src && leaf(s, rng, src.type, src.ne)
    return src && dst ? m('COPY_TENSOR', body.copyTensor(src, dst)) : undefined
  }
  if (pick < 0.51) {
    const t = anyTensor(s, rng)
    return t ? m('INIT_TENSOR', body.initTensor(t)) : undefined
  }
  if (pick < 0.55) {
    const t = anyTensor(s, rng)
    if (!t) return undefined
    const srcs = rng() < 0.5 ? [anyTensor(s, rng)].filter((x): x is RpcTensor => x !== undefined) : []
    // Before it is placed a tensor has neither buffer nor data (as ggml-alloc asks).
    return m('GET_ALLOC_SIZE', body.getAllocSize(rng() < 0.5 ? { ...t, buffer: 0n, data: 0n } : t, srcs))
  }
  if (pick < 0.59) {
    const t = anyTensor(s, rng)
    if (!t) return undefined
    const size = nbytes(t)
    return m('MEMSET_TENSOR', body.memsetTensor(t, 0n, size, Math.floor(rng() * 256)))
  }
  if (pick < 0.62) return s.computed ? m('GRAPH_RECOMPUTE', body.device()) : undefined
  if (pick < 0.63) return { ...m('HELLO', body.hello()), refusalExpected: true }
  if (pick < 0.64) return { cmd: 'NONE', frame: frame(Cmd.NONE, Buffer.alloc(0)), refusalExpected: true }
  // The rest: graphs, whose inputs are set first (in the same frame run: several commands in one write).
  const g = graph(s, rng)
  if (!g) return undefined
  s.computed = true
  const sets = g.inputs.map(({ t, data }) => frame(Cmd.SET_TENSOR, body.setTensor(t, 0n, data)))
  const compute = frame(Cmd.GRAPH_COMPUTE, body.graphCompute(g.nodes, g.tensors))
  return { cmd: 'GRAPH_COMPUTE', frame: Buffer.concat([...sets, compute]) }
}

// --- corruptions ---

const U64_EDGES = [0n, 1n, 0xffffffffffffffffn, 0x8000000000000000n, 0x7fffffffffffffffn, 0x100000000n, 0xffffffffn, 0xdeadbeefn]
const U32_EDGES = [0, 1, 0xffffffff, 0x80000000, 0x7fffffff, 0x10000, 3, 31, 33, GGML_TYPE_COUNT, GGML_OP_COUNT, GGML_OP_COUNT - 1]

/** A value for a u64 field: an edge value, or an address near the session's buffers (inside, at the end, past it, freed). */
function u64Value(s: Session, rng: () => number): bigint {
  const b = s.buffers[Math.floor(rng() * s.buffers.length)]
  const t = s.tensors[Math.floor(rng() * s.tensors.length)]
  const near = b ? [b.handle, b.base, b.base + b.size, b.base + b.size - 1n, b.base - 1n, b.base + b.size - 4n, b.handle + 8n] : []
  const ids = t ? [t.id, t.data, t.buffer] : []
  const pool = [...U64_EDGES, ...near, ...ids, BigInt(Math.floor(rng() * 2 ** 32)) * BigInt(Math.floor(rng() * 2 ** 32))]
  return pool[Math.floor(rng() * pool.length)]!
}

function u32Value(rng: () => number): number {
  return rng() < 0.8 ? U32_EDGES[Math.floor(rng() * U32_EDGES.length)]! : Math.floor(rng() * 2 ** 32)
}

/** The offsets of the rpc_tensor structs in a command's body (after its 9-byte head). */
function tensorOffsets(cmd: CmdName, bodyLength: number, bodyBytes: Buffer): number[] {
  switch (cmd) {
    case 'SET_TENSOR':
    case 'SET_TENSOR_HASH':
    case 'GET_TENSOR':
    case 'INIT_TENSOR':
    case 'MEMSET_TENSOR':
      return [0]
    case 'COPY_TENSOR':
      return [0, TENSOR_SIZE]
    case 'GET_ALLOC_SIZE':
      return Array.from({ length: 11 }, (_, i) => 4 + i * TENSOR_SIZE)
    case 'GRAPH_COMPUTE': {
      const nNodes = bodyBytes.readUInt32LE(4)
      const start = 8 + nNodes * 8 + 4
      const count = Math.floor((bodyLength - start) / TENSOR_SIZE)
      return Array.from({ length: count }, (_, i) => start + i * TENSOR_SIZE)
    }
    default:
      return []
  }
}

/** The same message, corrupted one way (the way is said in `corruption`). */
function corrupt(m: Message, s: Session, rng: () => number): Message {
  // A graph's frame carries its inputs' SET_TENSORs first: corrupt the GRAPH_COMPUTE at its end.
  const lastStart = m.cmd === 'GRAPH_COMPUTE' ? lastFrameStart(m.frame) : 0
  const prefix = m.frame.subarray(0, lastStart)
  const head = m.frame.subarray(lastStart, lastStart + 9)
  const bodyBytes = Buffer.from(m.frame.subarray(lastStart + 9))
  const out = (corruption: string, b: Buffer, declared: bigint = BigInt(b.length), extra: Partial<Message> = {}): Message => ({
    ...m,
    frame: Buffer.concat([prefix, frame(head[0]!, b, declared)]),
    corruption,
    ...extra,
  })
  const kind = rng()
  const tensors = tensorOffsets(m.cmd, bodyBytes.length, bodyBytes)
  if (kind < 0.45 && tensors.length > 0) {
    // A field of one of the tensors.
    const at = tensors[Math.floor(rng() * tensors.length)]!
    const names = Object.keys(TENSOR_FIELDS)
    const field = names[Math.floor(rng() * names.length)]!
    const [offset, width] = TENSOR_FIELDS[field]!
    if (width === 8) bodyBytes.writeBigUInt64LE(BigInt.asUintN(64, u64Value(s, rng)), at + offset)
    else if (width === 4)
      bodyBytes.writeUInt32LE(
        field === 'op' && rng() < 0.5
          ? Math.floor(rng() * GGML_OP_COUNT)
          : field === 'type' && rng() < 0.5
            ? Math.floor(rng() * GGML_TYPE_COUNT)
            : u32Value(rng),
        at + offset,
      )
    else bodyBytes.fill(rng() < 0.5 ? 0x41 : 0xff, at + offset, at + offset + width)
    return out(`tensor ${field}`, bodyBytes)
  }
  if (kind < 0.6 && m.cmd === 'GRAPH_COMPUTE') {
    // The graph's own fields: device, node count, a node id, tensor count.
    const nNodes = bodyBytes.readUInt32LE(4)
    const which = Math.floor(rng() * 4)
    if (which === 0) bodyBytes.writeUInt32LE(u32Value(rng), 0)
    else if (which === 1) bodyBytes.writeUInt32LE(u32Value(rng), 4)
    else if (which === 2 && nNodes > 0)
      bodyBytes.writeBigUInt64LE(
        rng() < 0.5 ? u64Value(s, rng) : bodyBytes.readBigUInt64LE(8 + 8 * Math.floor(rng() * nNodes)),
        8 + 8 * Math.floor(rng() * nNodes),
      )
    else bodyBytes.writeUInt32LE(u32Value(rng), 8 + nNodes * 8)
    return out(`graph ${['device', 'n_nodes', 'node id', 'n_tensors'][which]}`, bodyBytes)
  }
  if (kind < 0.7 && bodyBytes.length >= 4 && tensors.length === 0) {
    // A fixed-size command's own field (device, handle, size, value).
    const at = Math.floor(rng() * Math.max(1, bodyBytes.length - 7))
    if (bodyBytes.length - at >= 8 && rng() < 0.6) bodyBytes.writeBigUInt64LE(BigInt.asUintN(64, u64Value(s, rng)), at)
    else bodyBytes.writeUInt32LE(u32Value(rng), Math.min(at, bodyBytes.length - 4))
    return out('field', bodyBytes)
  }
  if (kind < 0.76) {
    // The size: smaller or larger than the body, the body then cut off.
    const delta = BigInt(1 + Math.floor(rng() * 16))
    return rng() < 0.5
      ? out('size smaller', bodyBytes, BigInt(bodyBytes.length) - delta < 0n ? 0n : BigInt(bodyBytes.length) - delta)
      : out('size larger', bodyBytes, BigInt(bodyBytes.length) + delta, { thenClose: true })
  }
  if (kind < 0.8) {
    // A size far past anything sent (up to 2^63), then the connection closed.
    const sizes = [256n * MiB, 0x7fffffffffffffffn, 0xffffffffffffffffn, 1n << 40n]
    return out('size huge', bodyBytes.subarray(0, Math.min(bodyBytes.length, 64)), sizes[Math.floor(rng() * sizes.length)]!, { thenClose: true })
  }
  if (kind < 0.85) return out('body cut short', bodyBytes.subarray(0, Math.floor(rng() * bodyBytes.length)), BigInt(bodyBytes.length), { thenClose: true })
  if (kind < 0.9) {
    // Padded: the declared size counts the extra bytes.
    const pad = Buffer.alloc(1 + Math.floor(rng() * 4096), Math.floor(rng() * 256))
    return out('body padded', Buffer.concat([bodyBytes, pad]))
  }
  if (kind < 0.95) {
    for (let i = 0; i < 1 + Math.floor(rng() * 8); i++) if (bodyBytes.length > 0) bodyBytes[Math.floor(rng() * bodyBytes.length)] = Math.floor(rng() * 256)
    return out('bytes flipped', bodyBytes)
  }
  // Another command byte: valid, NONE, or past the last.
  const cmd = rng() < 0.7 ? Math.floor(rng() * CMD_COUNT) : CMD_COUNT + Math.floor(rng() * (256 - CMD_COUNT))
  return {
    ...m,
    cmd: CMD_NAMES[cmd] ?? m.cmd,
    frame: Buffer.concat([prefix, frame(cmd, bodyBytes)]),
    corruption: `command byte ${cmd}`,
    answer: undefined,
    thenClose: true,
  }
}

/** Where the last frame of a run of frames starts (the sizes say). */
function lastFrameStart(run: Buffer): number {
  let at = 0
  let last = 0
  while (at < run.length) {
    last = at
    at += 9 + Number(run.readBigUInt64LE(at + 1))
  }
  return last
}
