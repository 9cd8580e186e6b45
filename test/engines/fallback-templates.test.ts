// A GGUF without a chat template gets its family's format, read from the file: its architecture and
// the turn markers its vocabulary holds. (Gemma's, end to end, in real-chat.test.ts.)
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { llamaServerArgs } from '../../engines/llama-server/llama-server-args.ts'
import { loadSpecFor } from '../../engines/load-spec.ts'
import { fallbackTemplateSource } from '../../models/catalog/fallback-templates.ts'
import { ModelFolder } from '../../models/catalog/model-folder.ts'
import { readModelFileHeader } from '../../models/catalog/model-file-header.ts'
import { kv, writeGguf } from '../../models/writers/gguf-writer.ts'

const dir = mkdtempSync(join(tmpdir(), 'hearth-fallback-templates-'))

/** A header-only GGUF: what the folder scan reads (the engine is not asked to load it). */
function headerOnly(name: string, architecture: string, specialTokens: string[], template?: string): string {
  const path = join(dir, `${name}.gguf`)
  // Filler first, so the markers sit past the reader's first window as in a real 256k vocabulary.
  const filler = Array.from({ length: 40_000 }, (_, i) => `piece${i}`)
  writeGguf(path, {
    metadata: [
      kv.str('general.architecture', architecture),
      kv.u32(`${architecture}.context_length`, 512),
      kv.str('tokenizer.ggml.model', 'gpt2'),
      kv.strs('tokenizer.ggml.tokens', [...filler, ...specialTokens]),
      ...(template ? [kv.str('tokenizer.chat_template', template)] : []),
    ],
    tensors: [],
  })
  return path
}

describe('the chat template a GGUF without one gets', () => {
  it.each([
    ['gemma3', ['<start_of_turn>', '<end_of_turn>'], 'gemma'],
    ['llama', ['<|start_header_id|>', '<|end_header_id|>', '<|eot_id|>'], 'llama3'],
    ['phi3', ['<|user|>', '<|assistant|>', '<|end|>'], 'phi3'],
    ['qwen2', ['<|im_start|>', '<|im_end|>'], 'chatml'],
    // Gemma's markers in another architecture's file are not enough to call it Gemma.
    ['llama', ['<start_of_turn>', '<end_of_turn>'], 'chatml'],
    ['gemma3', [], 'chatml'],
  ])('%s with %j: %s', async (architecture, tokens, expected) => {
    const header = await readModelFileHeader(headerOnly(`${architecture}-${expected}-${tokens.length}`, architecture, tokens))
    expect(header).toMatchObject({ format: 'gguf', chatTemplate: undefined, fallbackTemplate: expected })
  })

  it('is not chosen where the file has a template of its own', async () => {
    const header = await readModelFileHeader(headerOnly('own', 'gemma3', ['<start_of_turn>', '<end_of_turn>'], '{{ messages[0].content }}'))
    expect(header).toMatchObject({ chatTemplate: '{{ messages[0].content }}', fallbackTemplate: undefined })
  })

  it("reaches llama-server's command line, and ChatML is left to llama.cpp's own default", async () => {
    const folder = new ModelFolder(dir)
    const models = new Map((await folder.scan()).models.map((m) => [m.id, m]))
    const gemma = models.get('gemma3-gemma-2')!
    expect(gemma.templateGuessed).toBe('gemma')
    const args = llamaServerArgs(loadSpecFor(gemma, { threads: 1, gpuLayers: 0, parallel: 1 }))
    expect(args[args.indexOf('--chat-template') + 1]).toBe(fallbackTemplateSource('gemma'))
    expect(fallbackTemplateSource('gemma')).toContain('<start_of_turn>')
    const qwen = models.get('qwen2-chatml-2')!
    expect(qwen.templateGuessed).toBe('chatml')
    expect(llamaServerArgs(loadSpecFor(qwen, { threads: 1, gpuLayers: 0, parallel: 1 }))).not.toContain('--chat-template')
  })
})
