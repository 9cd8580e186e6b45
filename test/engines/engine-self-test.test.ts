/**
 * The self-test every build passes before install calls it ready, run again here on the engines
 * built on this machine: every weight type quantized from a random model and run at one and two
 * threads. On a CPU with AMX the quantized types with AMX kernels must have run on AMX's tiles
 * (the path that crashed with SIGILL until the ggml-01 patch); elsewhere the suite says loudly that
 * this path was not exercised. How install reacts to a crash is tested in engine-build-output.test.ts.
 */
import { readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { expect, it } from 'vitest'
import { describeIf } from '../support/skips.ts'
import { programPath } from '../../engines/builder/llama-build.ts'
import { LLAMA_WEIGHT_TYPES, selfTestLlama, selfTestVerdict, selfTestWhisper, WHISPER_WEIGHT_TYPES } from '../../engines/builder/self-test/engine-self-test.ts'
import { llamaBuild, whisperBuild } from '../support/upstream-servers.ts'

const cpuHasAmx = /\bamx_int8\b/.test(readFileSync('/proc/cpuinfo', 'utf8'))
const builtWithAmx = llamaBuild?.cpuFeatures.includes('AMX_INT8') ?? false
if (!cpuHasAmx) console.warn('*** NOT EXERCISED: this CPU has no AMX (amx_int8 in /proc/cpuinfo), so the AMX kernels of ggml did not run here ***')
else if (!builtWithAmx)
  console.warn(`*** NOT EXERCISED: this CPU has AMX but the build left it out (withheld: ${llamaBuild?.withheld?.join(', ') || 'nothing recorded'}) ***`)

const scratch = (name: string) => join(tmpdir(), `hearth-self-test-${name}-${process.pid}`)

describeIf(llamaBuild, 'needs llama.cpp built here (npm run build:engines)')('llama.cpp as built here', () => {
  it('runs every weight type llama-quantize makes, at 1 and 2 threads', () => {
    const report = selfTestLlama((p) => programPath(llamaBuild!.dir, p), scratch('llama'))
    expect(report.runs.filter((r) => r.outcome !== 'ran')).toEqual([])
    expect(report.runs.map((r) => `${r.weightType}@${r.threads}${r.rpc ? ' over rpc' : ''}`)).toEqual([
      ...LLAMA_WEIGHT_TYPES.flatMap((t) => [`${t.name}@1`, `${t.name}@2`]),
      'Q8_0@1 over rpc',
    ])
    expect(selfTestVerdict(report)).toMatch(/^self-test passed: 15 weight types ran at 1 and 2 threads/)
    if (cpuHasAmx && builtWithAmx) {
      const onAmx = [...new Set(report.runs.filter((r) => r.amx).map((r) => r.weightType))]
      expect(onAmx).toEqual(['Q4_0', 'Q4_1', 'Q8_0', 'Q4_K', 'Q5_K', 'Q6_K', 'IQ4_XS'])
    } else {
      expect(report.runs.some((r) => r.amx)).toBe(false)
    }
  })
})

describeIf(whisperBuild, 'needs whisper.cpp built here (npm run build:engines)')('whisper.cpp as built here', () => {
  it('runs every weight type whisper-quantize makes, at 1 and 2 threads', () => {
    const report = selfTestWhisper((p) => programPath(whisperBuild!.dir, p), scratch('whisper'))
    expect(report.runs.filter((r) => r.outcome !== 'ran')).toEqual([])
    expect(report.runs).toHaveLength(WHISPER_WEIGHT_TYPES.length * 2)
    if (cpuHasAmx && whisperBuild!.cpuFeatures.includes('AMX_INT8')) {
      expect([...new Set(report.runs.filter((r) => r.amx).map((r) => r.weightType))]).toEqual(['Q4_0', 'Q4_1', 'Q8_0', 'Q4_K', 'Q5_K', 'Q6_K'])
    }
  })
})
