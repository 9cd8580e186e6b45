/**
 * The GGUF writer and the tiny model generators the suites load, read back without an engine:
 * every metadata type and tensor layout as @huggingface/gguf parses them, and the same bytes for
 * the same seed.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { gguf } from '@huggingface/gguf'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { float32ToFloat16Bits, kv, writeGguf } from '../../models/writers/gguf-writer.ts'
import { generateTestModels, writeTinyLlama } from '../support/tiny-models.ts'

let dir: string

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'hearth-gguf-writer-'))
})

afterAll(() => {
  rmSync(dir, { recursive: true, force: true })
})

describe('gguf-writer', () => {
  it('writes every metadata type and F32/F16 tensors that @huggingface/gguf reads back', async () => {
    const path = join(dir, 'all-types.gguf')
    writeGguf(path, {
      alignment: 64,
      metadata: [
        kv.str('general.architecture', 'test'),
        kv.u8('t.u8', 255),
        kv.i8('t.i8', -128),
        kv.u16('t.u16', 65535),
        kv.i16('t.i16', -32768),
        kv.u32('t.u32', 4294967295),
        kv.i32('t.i32', -2147483648),
        kv.u64('t.u64', 18446744073709551615n),
        kv.i64('t.i64', -9007199254740993n),
        kv.f32('t.f32', 0.5),
        kv.f64('t.f64', Math.PI),
        kv.bool('t.bool', true),
        kv.str('t.str', 'héllo ▁ 日本'),
        kv.strs('t.strs', ['a', '', 'ünïcode']),
        kv.nums('t.i32s', 'int32', [1, -2, 3]),
        kv.nums('t.f32s', 'float32', new Float32Array([1.5, -2.25])),
        kv.bools('t.bools', [true, false]),
        kv.bigs('t.u64s', 'uint64', [1n, 2n]),
      ],
      tensors: [
        { name: 'a', shape: [3], type: 'F32', data: new Float32Array([1, 2, 3]) },
        { name: 'b', shape: [2, 2], type: 'F16', data: new Float32Array([0.5, -1, 65504, 1e-7]) },
      ],
    })
    const parsed = await gguf(path, { allowLocalFile: true, typedMetadata: true })
    const m = parsed.typedMetadata as unknown as Record<string, { value: unknown; type: number; subType?: number }>
    expect(m['general.alignment']).toMatchObject({ value: 64, type: 4 })
    expect(m['t.u8']).toMatchObject({ value: 255, type: 0 })
    expect(m['t.i8']).toMatchObject({ value: -128, type: 1 })
    expect(m['t.u16']).toMatchObject({ value: 65535, type: 2 })
    expect(m['t.i16']).toMatchObject({ value: -32768, type: 3 })
    expect(m['t.u32']).toMatchObject({ value: 4294967295, type: 4 })
    expect(m['t.i32']).toMatchObject({ value: -2147483648, type: 5 })
    expect(m['t.u64']).toMatchObject({ value: 18446744073709551615n, type: 10 })
    expect(m['t.i64']).toMatchObject({ value: -9007199254740993n, type: 11 })
    expect(m['t.f32']).toMatchObject({ value: 0.5, type: 6 })
    expect(m['t.f64']).toMatchObject({ value: Math.PI, type: 12 })
    expect(m['t.bool']).toMatchObject({ value: true, type: 7 })
    expect(m['t.str']).toMatchObject({ value: 'héllo ▁ 日本', type: 8 })
    expect(m['t.strs']).toMatchObject({ value: ['a', '', 'ünïcode'], type: 9, subType: 8 })
    expect(m['t.i32s']).toMatchObject({ value: [1, -2, 3], subType: 5 })
    expect(m['t.f32s']).toMatchObject({ value: [1.5, -2.25], subType: 6 })
    expect(m['t.bools']).toMatchObject({ value: [true, false], subType: 7 })
    expect(m['t.u64s']).toMatchObject({ value: [1n, 2n], subType: 10 })

    expect(parsed.tensorInfos.map((t) => [t.name, t.shape.map(Number), t.dtype, Number(t.offset)])).toEqual([
      ['a', [3], 0, 0],
      ['b', [2, 2], 1, 64],
    ])
    // The data section starts at the first 64-byte boundary after the header.
    const bytes = readFileSync(path)
    const dataStart = bytes.length - 64 - 64
    expect(dataStart % 64).toBe(0)
    expect(Array.from(new Float32Array(bytes.buffer.slice(bytes.byteOffset + dataStart, bytes.byteOffset + dataStart + 12)))).toEqual([1, 2, 3])
    const half = new Uint16Array(bytes.buffer.slice(bytes.byteOffset + dataStart + 64, bytes.byteOffset + dataStart + 72))
    expect(Array.from(half)).toEqual([0x3800, 0xbc00, 0x7bff, float32ToFloat16Bits(1e-7)])
    expect(float32ToFloat16Bits(1e-7)).toBe(2) // a subnormal half
  })

  it('generators are deterministic for a seed', () => {
    const a = join(dir, 'seed-a.gguf')
    const b = join(dir, 'seed-b.gguf')
    const c = join(dir, 'seed-c.gguf')
    writeTinyLlama(a, { seed: 7 })
    writeTinyLlama(b, { seed: 7 })
    writeTinyLlama(c, { seed: 8 })
    expect(readFileSync(a).equals(readFileSync(b))).toBe(true)
    expect(readFileSync(a).equals(readFileSync(c))).toBe(false)
  })

  it('generateTestModels reuses a folder from the same generator version', () => {
    const models = generateTestModels(join(dir, 'models'))
    expect(models.generated).toBe(true)
    const again = generateTestModels(models.dir)
    expect(again.generated).toBe(false)
    expect(again.llamaChat).toEqual({ ...models.llamaChat })
    expect(again.whisper.path).toBe(models.whisper.path)
  })
})
