/** The environment Hearth starts llama-server with: huge pages asked for on Linux, a person's own glibc settings kept. */
import { describe, expect, it } from 'vitest'
import { hugePagesEnvironment } from '../../engines/llama-server/llama-server-args.ts'

describe('llama-server’s environment', () => {
  it('asks glibc for transparent huge pages on Linux', () => {
    expect(hugePagesEnvironment({}, 'linux')).toEqual({ GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1' })
  })

  it('adds to the tunables a person set, and leaves their own huge-page choice alone', () => {
    expect(hugePagesEnvironment({ GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' }, 'linux')).toEqual({
      GLIBC_TUNABLES: 'glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1',
    })
    expect(hugePagesEnvironment({ GLIBC_TUNABLES: 'glibc.malloc.hugetlb=0' }, 'linux')).toEqual({})
  })

  it('sets nothing where there is no glibc to read it', () => {
    expect(hugePagesEnvironment({}, 'darwin')).toEqual({})
    expect(hugePagesEnvironment({}, 'win32')).toEqual({})
  })
})
