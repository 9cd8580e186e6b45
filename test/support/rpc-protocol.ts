/**
 * llama.cpp's RPC protocol at our pin (v7.0.0, ggml/src/ggml-rpc/ggml-rpc.cpp), written and read
 * byte for byte, for the RPC fuzz (rpc-fuzz.ts) and for tests that speak to a lender's rpc-server
 * through Hearth's tunnel. Every struct is packed and little-endian:
 *
 *   request:  | command (1 byte) | size (8 bytes) | body (size bytes) |
 *   response: | size (8 bytes) | body (size bytes) |       (only the commands that answer)
 *
 * A connection starts with HELLO and its answer; each other command follows.
 */
import type { Duplex } from 'node:stream'

export const RPC_PROTOCOL = '7.0.0'

export const Cmd = {
  ALLOC_BUFFER: 0,
  GET_ALIGNMENT: 1,
  GET_MAX_SIZE: 2,
  BUFFER_GET_BASE: 3,
  FREE_BUFFER: 4,
  BUFFER_CLEAR: 5,
  SET_TENSOR: 6,
  SET_TENSOR_HASH: 7,
  GET_TENSOR: 8,
  COPY_TENSOR: 9,
  GRAPH_COMPUTE: 10,
  GET_DEVICE_MEMORY: 11,
  INIT_TENSOR: 12,
  GET_ALLOC_SIZE: 13,
  HELLO: 14,
  DEVICE_COUNT: 15,
  GRAPH_RECOMPUTE: 16,
  MEMSET_TENSOR: 17,
  NONE: 18,
} as const
export type CmdName = keyof typeof Cmd
/** RPC_CMD_COUNT: the first byte the server takes for no command. */
export const CMD_COUNT = 19
export const CMD_NAMES = Object.fromEntries(Object.entries(Cmd).map(([name, n]) => [n, name])) as Record<number, CmdName>

/** The size of each command's answer; absent: it answers nothing (GET_TENSOR answers the bytes asked). */
export const ANSWER_SIZE: Partial<Record<CmdName, number>> = {
  ALLOC_BUFFER: 16,
  GET_ALIGNMENT: 8,
  GET_MAX_SIZE: 8,
  BUFFER_GET_BASE: 8,
  SET_TENSOR_HASH: 1,
  COPY_TENSOR: 1,
  GET_DEVICE_MEMORY: 16,
  GET_ALLOC_SIZE: 8,
  HELLO: 28,
  DEVICE_COUNT: 4,
}

export const GGML_MAX_DIMS = 4
export const GGML_MAX_SRC = 10
export const GGML_MAX_OP_PARAMS = 64
export const GGML_MAX_NAME = 64
export const RPC_CONN_CAPS_SIZE = 24
/** sizeof(rpc_tensor). */
export const TENSOR_SIZE = 296
export const GGML_TYPE_COUNT = 43
export const GGML_OP_COUNT = 101

export const GgmlType = { F32: 0, F16: 1, Q4_0: 2, Q8_0: 8, I32: 26 } as const
/** The ops the fuzz builds graphs of (enum ggml_op at our pin). */
export const GgmlOp = {
  NONE: 0,
  ADD: 2,
  MUL: 7,
  SQR: 9,
  SUM_ROWS: 15,
  RMS_NORM: 25,
  MUL_MAT: 29,
  SCALE: 32,
  CPY: 34,
  CONT: 35,
  RESHAPE: 36,
  VIEW: 37,
  PERMUTE: 38,
  TRANSPOSE: 39,
  GET_ROWS: 40,
  SET_ROWS: 42,
  SOFT_MAX: 46,
  ROPE: 48,
  FLASH_ATTN_EXT: 74,
  UNARY: 91,
  MAP_CUSTOM1: 92,
  CUSTOM: 95,
  GLU: 100,
} as const

/** A serialized ggml tensor (struct rpc_tensor). Addresses are the server's own (buffer handles and data pointers). */
export interface RpcTensor {
  id: bigint
  type: number
  buffer: bigint
  ne: [number, number, number, number]
  nb: [number, number, number, number]
  op: number
  opParams: number[]
  flags: number
  src: bigint[]
  viewSrc: bigint
  viewOffs: bigint
  data: bigint
  name: string
  useCount: number
}

export function encodeTensor(t: RpcTensor): Buffer {
  const b = Buffer.alloc(TENSOR_SIZE)
  b.writeBigUInt64LE(BigInt.asUintN(64, t.id), 0)
  b.writeUInt32LE(t.type >>> 0, 8)
  b.writeBigUInt64LE(BigInt.asUintN(64, t.buffer), 12)
  for (let i = 0; i < 4; i++) b.writeUInt32LE(t.ne[i]! >>> 0, 20 + 4 * i)
  for (let i = 0; i < 4; i++) b.writeUInt32LE(t.nb[i]! >>> 0, 36 + 4 * i)
  b.writeUInt32LE(t.op >>> 0, 52)
  for (let i = 0; i < 16; i++) b.writeInt32LE((t.opParams[i] ?? 0) | 0, 56 + 4 * i)
  b.writeInt32LE(t.flags | 0, 120)
  for (let i = 0; i < GGML_MAX_SRC; i++) b.writeBigUInt64LE(BigInt.asUintN(64, t.src[i] ?? 0n), 124 + 8 * i)
  b.writeBigUInt64LE(BigInt.asUintN(64, t.viewSrc), 204)
  b.writeBigUInt64LE(BigInt.asUintN(64, t.viewOffs), 212)
  b.writeBigUInt64LE(BigInt.asUintN(64, t.data), 220)
  b.write(t.name.slice(0, GGML_MAX_NAME - 1), 228, 'latin1')
  b.writeInt32LE(t.useCount | 0, 292)
  return b
}

/** Where each field of rpc_tensor lies, for corrupting one in place: [offset, width in bytes]. */
export const TENSOR_FIELDS: Record<string, [number, number]> = {
  id: [0, 8],
  type: [8, 4],
  buffer: [12, 8],
  ne0: [20, 4],
  ne1: [24, 4],
  ne2: [28, 4],
  ne3: [32, 4],
  nb0: [36, 4],
  nb1: [40, 4],
  nb2: [44, 4],
  nb3: [48, 4],
  op: [52, 4],
  op_param0: [56, 4],
  op_param1: [60, 4],
  op_param2: [64, 4],
  flags: [120, 4],
  src0: [124, 8],
  src1: [132, 8],
  src2: [140, 8],
  view_src: [204, 8],
  view_offs: [212, 8],
  data: [220, 8],
  name: [228, 64],
  use_count: [292, 4],
}

/** One command on the wire: the byte, the size it declares and the body (which may differ from the size, on purpose). */
export function frame(cmd: number, body: Buffer, declaredSize: bigint = BigInt(body.length)): Buffer {
  const head = Buffer.alloc(9)
  head.writeUInt8(cmd & 0xff, 0)
  head.writeBigUInt64LE(BigInt.asUintN(64, declaredSize), 1)
  return Buffer.concat([head, body])
}

export const u32 = (n: number) => {
  const b = Buffer.alloc(4)
  b.writeUInt32LE(n >>> 0)
  return b
}
export const u64 = (n: bigint) => {
  const b = Buffer.alloc(8)
  b.writeBigUInt64LE(BigInt.asUintN(64, n))
  return b
}
export const u8 = (n: number) => Buffer.from([n & 0xff])

/** The bodies of each command, well formed. */
export const body = {
  hello: () => Buffer.alloc(RPC_CONN_CAPS_SIZE),
  device: (device = 0) => u32(device),
  allocBuffer: (size: bigint, device = 0) => Buffer.concat([u32(device), u64(size)]),
  bufferHandle: (handle: bigint) => u64(handle),
  bufferClear: (handle: bigint, value: number) => Buffer.concat([u64(handle), u8(value)]),
  setTensor: (t: RpcTensor, offset: bigint, data: Buffer, cache = false) => Buffer.concat([encodeTensor(t), u8(cache ? 1 : 0), u64(offset), data]),
  setTensorHash: (t: RpcTensor, offset: bigint, hash: bigint) => Buffer.concat([encodeTensor(t), u64(offset), u64(hash)]),
  getTensor: (t: RpcTensor, offset: bigint, size: bigint) => Buffer.concat([encodeTensor(t), u64(offset), u64(size)]),
  copyTensor: (src: RpcTensor, dst: RpcTensor) => Buffer.concat([encodeTensor(src), encodeTensor(dst)]),
  initTensor: (t: RpcTensor) => encodeTensor(t),
  getAllocSize: (t: RpcTensor, srcs: RpcTensor[] = [], device = 0) =>
    Buffer.concat([
      u32(device),
      encodeTensor(t),
      ...Array.from({ length: GGML_MAX_SRC }, (_, i) => (srcs[i] ? encodeTensor(srcs[i]) : Buffer.alloc(TENSOR_SIZE))),
    ]),
  memsetTensor: (t: RpcTensor, offset: bigint, size: bigint, value: number) => Buffer.concat([encodeTensor(t), u64(offset), u64(size), u8(value)]),
  /** | device | n_nodes | node ids | n_tensors | tensors |. */
  graphCompute: (nodes: bigint[], tensors: RpcTensor[], device = 0) =>
    Buffer.concat([u32(device), u32(nodes.length), ...nodes.map(u64), u32(tensors.length), ...tensors.map(encodeTensor)]),
}

/** Reads whole messages off a stream as they come. */
export class Reader {
  private chunks: Buffer[] = []
  private length = 0
  private waiting: (() => void) | undefined
  ended = false

  constructor(stream: Duplex) {
    stream.on('data', (chunk: Buffer) => {
      this.chunks.push(chunk)
      this.length += chunk.length
      this.waiting?.()
    })
    const end = () => {
      this.ended = true
      this.waiting?.()
    }
    stream.on('end', end)
    stream.on('close', end)
    stream.on('error', end)
  }

  /** `n` bytes, or undefined once the stream ended without them or `timeoutMs` passed. */
  async take(n: number, timeoutMs: number): Promise<Buffer | undefined> {
    const deadline = performance.now() + timeoutMs
    while (this.length < n) {
      if (this.ended) return undefined
      const left = deadline - performance.now()
      if (left <= 0) return undefined
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left)
        this.waiting = () => (clearTimeout(timer), resolve())
      })
      this.waiting = undefined
    }
    const all = Buffer.concat(this.chunks)
    this.chunks = [all.subarray(n)]
    this.length = all.length - n
    return all.subarray(0, n)
  }

  /** An answer (`| size | body |`) of the size expected, or undefined (closed, timed out, or another size). */
  async answer(expected: number, timeoutMs: number): Promise<Buffer | undefined> {
    const size = await this.take(8, timeoutMs)
    if (!size || size.readBigUInt64LE(0) !== BigInt(expected)) return undefined
    return this.take(expected, timeoutMs)
  }
}
