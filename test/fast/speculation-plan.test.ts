/**
 * How Hearth sets up speculative decoding for a model, without an engine (issue 65; the engines
 * themselves: test/engines/speculation.test.ts): on by default for chat models, what models.json turns off,
 * which draft model a folder pairs (same vocabulary, at most a quarter of the size), MTP heads
 * read from the file, and llama-server's arguments, paced or not.
 */
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { loadSpecFor, speculationOf } from '../../engines/load-spec.ts'
import { llamaServerArgs } from '../../engines/llama-server/llama-server-args.ts'
import { DRAFT_PACING, NGRAM_DRAFT, speculationArgs } from '../../engines/llama-server/speculation-args.ts'
import { ModelFolder } from '../../models/catalog/model-folder.ts'
import type { ModelRecord } from '../../models/catalog/model-record.ts'
import { writeTinyBert, writeTinyLlama } from '../support/tiny-models.ts'

const DEFAULTS = { threads: 1, gpuLayers: 0, parallel: 1 }

describe('the speculation plan', () => {
  const chat = { id: 'm', kind: 'chat', path: '/m.gguf', catalogEntry: undefined } as unknown as ModelRecord

  it('is on by default for a chat model: n-gram drafting, a paired draft model, MTP heads', () => {
    expect(speculationOf(chat)).toEqual({ ngram: true })
    expect(speculationOf({ ...chat, draftPath: '/d.gguf', mtpLayers: 1 })).toEqual({ ngram: true, draftPath: '/d.gguf', mtp: true })
    expect(speculationOf({ ...chat, kind: 'embedding' })).toBeUndefined()
  })

  it('is off where models.json says "speculative": false, n-gram only for "ngram"', () => {
    expect(speculationOf({ ...chat, draftPath: '/d.gguf', catalogEntry: { file: 'm.gguf', speculative: false } })).toBeUndefined()
    expect(speculationOf({ ...chat, draftPath: '/d.gguf', catalogEntry: { file: 'm.gguf', speculative: 'ngram' } })).toEqual({ ngram: true, requested: true })
  })

  it("gives llama-server the measured n-gram drafting and patch llama-22's pacing", () => {
    const args = llamaServerArgs(loadSpecFor(chat, DEFAULTS))
    expect(args.join(' ')).toContain(
      `--spec-type ngram-simple,ngram-mod --spec-ngram-simple-size-n ${NGRAM_DRAFT.simple.sizeN} --spec-ngram-simple-size-m ${NGRAM_DRAFT.simple.sizeM}`,
    )
    expect(args.join(' ')).toContain(`--spec-ngram-mod-n-match ${NGRAM_DRAFT.mod.nMatch}`)
    expect(args.join(' ')).toContain(`--spec-draft-start ${DRAFT_PACING.draftStart} --spec-pause-below ${DRAFT_PACING.pauseBelow}`)
    expect(speculationArgs({ ngram: true, draftPath: '/d.gguf', mtp: true }, -1).join(' ')).toContain(
      '--spec-type ngram-simple,ngram-mod,draft-simple,draft-mtp --spec-ngram-simple-size-n',
    )
  })

  it('asks a build without pacing (made before patch llama-22) only for what models.json asks', () => {
    expect(speculationArgs({ ngram: true }, 0, false)).toEqual([])
    const asked = speculationArgs({ ngram: true, requested: true }, 0, false)
    expect(asked).toContain('--spec-type')
    expect(asked).not.toContain('--spec-pause-below')
  })
})

describe('draft models from the folder', () => {
  it('pairs the largest model of the same vocabulary at most a quarter of the size; never one of another vocabulary, nor a larger one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hearth-draft-pairing-'))
    writeTinyLlama(join(dir, 'big.gguf'), { embd: 256, layers: 8, ff: 1024 })
    writeTinyLlama(join(dir, 'small.gguf'), { embd: 32, layers: 1, ff: 64 })
    writeTinyLlama(join(dir, 'smaller.gguf'), { embd: 16, layers: 1, ff: 32 })
    writeTinyBert(join(dir, 'encoder.gguf'))
    const { models } = await new ModelFolder(dir).scan()
    const byId = new Map(models.map((m) => [m.id, m]))
    expect(byId.get('big')!.vocabularyHash).toBe(byId.get('small')!.vocabularyHash)
    expect(byId.get('big')!.draftPath).toBe(join(dir, 'small.gguf'))
    expect(byId.get('small')!.draftPath).toBeUndefined()
    expect(byId.get('encoder')!.draftPath).toBeUndefined()
    expect(llamaServerArgs(loadSpecFor(byId.get('big')!, DEFAULTS)).join(' ')).toContain(`--model-draft ${join(dir, 'small.gguf')}`)
  })

  it('leaves a model alone whose models.json entry turns speculation off or names its own draft', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hearth-draft-pairing-'))
    writeTinyLlama(join(dir, 'big.gguf'), { embd: 256, layers: 8, ff: 1024 })
    writeTinyLlama(join(dir, 'small.gguf'), { embd: 32, layers: 1, ff: 64 })
    writeFileSync(join(dir, 'models.json'), JSON.stringify({ models: [{ id: 'off', file: 'big.gguf', speculative: false }] }))
    const { models } = await new ModelFolder(dir).scan()
    const off = models.find((m) => m.id === 'off')!
    expect(off.draftPath).toBeUndefined()
    expect(llamaServerArgs(loadSpecFor(off, DEFAULTS))).not.toContain('--spec-type')
  })
})
