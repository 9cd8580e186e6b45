import { describe, expect, it } from 'vitest'
import { StopSequenceFilter } from '../native-models/text/stop-sequence-filter.ts'

function streamThrough(filter: StopSequenceFilter, pieces: string[]): string[] {
  const shown = pieces.map((p) => filter.push(p))
  shown.push(filter.flush())
  return shown
}

describe('StopSequenceFilter', () => {
  it('passes text through untouched when no stop appears', () => {
    const f = new StopSequenceFilter(['END'])
    expect(streamThrough(f, ['Once ', 'upon ', 'a time']).join('')).toBe('Once upon a time')
    expect(f.stopped).toBe(false)
  })

  it('cuts at a stop that spans several pieces and never shows any part of it', () => {
    const f = new StopSequenceFilter(['<|end|>'])
    const shown = streamThrough(f, ['Hello', ' <', '|e', 'nd', '|> after'])
    expect(shown.join('')).toBe('Hello ')
    expect(shown.some((s) => s.includes('<'))).toBe(false)
    expect(f.stopped).toBe(true)
  })

  it('releases held text when the partial match turns out to be ordinary text', () => {
    const f = new StopSequenceFilter(['STOP'])
    expect(f.push('a ST')).toBe('a ')
    expect(f.push('AR')).toBe('STAR')
    expect(f.flush()).toBe('')
  })

  it('flushes a trailing partial match when generation ends', () => {
    const f = new StopSequenceFilter(['STOP'])
    expect(f.push('the ST')).toBe('the ')
    expect(f.flush()).toBe('ST')
  })

  it('stops at the earliest of several stops and ignores everything after', () => {
    const f = new StopSequenceFilter(['world', 'lo'])
    expect(f.push('hello world')).toBe('hel')
    expect(f.push('more')).toBe('')
  })

  it('handles a stop inside a single piece and a stop at the very start', () => {
    expect(new StopSequenceFilter(['\n']).push('line one\nline two')).toBe('line one')
    expect(new StopSequenceFilter(['x']).push('x')).toBe('')
  })
})
