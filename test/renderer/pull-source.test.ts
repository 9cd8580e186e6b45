/** The Models page's download field, said back in words: Ollama names, hf.co names, files. */
import { describe, expect, it } from 'vitest'
import { describePullSource } from '../../renderer/src/lib/services/pull-source.ts'

describe('describePullSource', () => {
  it('words an Ollama name, with the registry it comes from; only a name with a host may take plain http', () => {
    expect(describePullSource('qwen3:0.6b')).toEqual({ kind: 'name', description: "qwen3:0.6b from Ollama's library", host: undefined })
    expect(describePullSource(' qwen3 ')).toMatchObject({ description: "qwen3:latest from Ollama's library" })
    expect(describePullSource('user/model:tag')).toMatchObject({ kind: 'name', description: "user/model:tag from Ollama's library", host: undefined })
    expect(describePullSource('registry.ollama.ai/library/llama3.2:3b')).toMatchObject({ description: "llama3.2:3b from Ollama's library", host: undefined })
    expect(describePullSource('127.0.0.1:5000/library/tiny:1')).toEqual({
      kind: 'name',
      description: '127.0.0.1:5000/library/tiny:1 from registry 127.0.0.1:5000',
      host: '127.0.0.1:5000',
    })
    expect(describePullSource('http://localhost:5000/team/model')).toMatchObject({
      kind: 'name',
      host: 'localhost:5000',
      description: 'localhost:5000/team/model:latest from registry localhost:5000',
    })
  })

  it('words files and tells an hf.co name to name its file', () => {
    expect(describePullSource('hf://ggml-org/x/y.gguf')).toMatchObject({ kind: 'file', description: 'a file on Hugging Face' })
    expect(describePullSource('https://huggingface.co/o/r/resolve/main/x.gguf')).toMatchObject({ kind: 'file', description: 'a file on Hugging Face' })
    expect(describePullSource('http://127.0.0.1:4000/files/model.gguf')).toMatchObject({ kind: 'file', description: 'a file from 127.0.0.1:4000' })
    expect(describePullSource('hf.co/ggml-org/gemma-3-4b-it-GGUF:Q4_K_M')).toMatchObject({
      kind: 'repository',
      description: expect.stringContaining('hf://owner/repo/file.gguf'),
    })
  })

  it('says nothing of what it cannot read: the server explains', () => {
    for (const text of ['', '   ', 'a/b/c/d:1', 'qwen3:', 'ftp://host/x.gguf', 'a//b']) expect(describePullSource(text), text).toBeUndefined()
  })
})
