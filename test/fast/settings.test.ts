import { mkdtempSync, writeFileSync } from 'node:fs'
import { homedir, tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { resolveSettings } from '../../main/server/settings.ts'

function dataDirWith(settings?: object): string {
  const dir = mkdtempSync(join(tmpdir(), 'hearth-settings-'))
  if (settings) writeFileSync(join(dir, 'settings.json'), JSON.stringify(settings))
  return dir
}

describe('resolveSettings', () => {
  it('binds to 127.0.0.1:8181 with auth on by default', () => {
    const { settings } = resolveSettings([], { HEARTH_DATA_DIR: dataDirWith() }, 8)
    expect(settings).toMatchObject({ host: '127.0.0.1', port: 8181, auth: true, apiKeys: [], threads: 7 })
    expect(resolveSettings([], {}, 2).settings.dataDir).toBe(join(homedir(), '.hearth'))
  })

  it('takes flags over environment over the settings file', () => {
    const dataDir = dataDirWith({ port: 9001, host: '127.0.0.2', threads: 3, api_keys: ['file-key-123'] })
    const fromFile = resolveSettings(['--data-dir', dataDir], {}, 4).settings
    expect(fromFile).toMatchObject({ port: 9001, host: '127.0.0.2', threads: 3, apiKeys: ['file-key-123'] })
    const fromEnv = resolveSettings(['--data-dir', dataDir], { HEARTH_PORT: '9002', HEARTH_API_KEY: 'env-key-1234,env-key-5678' }, 4).settings
    expect(fromEnv).toMatchObject({ port: 9002, apiKeys: ['env-key-1234', 'env-key-5678'] })
    const fromFlags = resolveSettings(
      ['--data-dir', dataDir, '--port', '0', '--api-key', 'flag-key-1234', '--api-key', 'flag-key-5678', '--no-auth'],
      { HEARTH_PORT: '9002' },
      4,
    ).settings
    expect(fromFlags).toMatchObject({ port: 0, apiKeys: ['flag-key-1234', 'flag-key-5678'], auth: false })
  })

  it('speech: skipping silence and the longest audio, from flags, environment or the file', () => {
    const defaults = resolveSettings([], { HEARTH_DATA_DIR: dataDirWith() }, 2).settings
    expect(defaults).toMatchObject({ vad: false, maxAudioSeconds: 3 * 60 * 60 })
    const fromFile = resolveSettings([], { HEARTH_DATA_DIR: dataDirWith({ vad: true, max_audio_minutes: 30 }) }, 2).settings
    expect(fromFile).toMatchObject({ vad: true, maxAudioSeconds: 1800 })
    const fromEnv = resolveSettings([], { HEARTH_DATA_DIR: dataDirWith(), HEARTH_VAD: '1', HEARTH_MAX_AUDIO_MINUTES: '1.5' }, 2).settings
    expect(fromEnv).toMatchObject({ vad: true, maxAudioSeconds: 90 })
    expect(resolveSettings(['--vad', '--max-audio-minutes', '10'], { HEARTH_DATA_DIR: dataDirWith() }, 2).settings).toMatchObject({
      vad: true,
      maxAudioSeconds: 600,
    })
    expect(() => resolveSettings(['--max-audio-minutes', '0'], { HEARTH_DATA_DIR: dataDirWith() }, 2)).toThrow(/--max-audio-minutes must be a positive number/)
  })

  it('retrieval: both ways by default, one alone from the environment or the file, a bad one refused by name', () => {
    expect(resolveSettings([], { HEARTH_DATA_DIR: dataDirWith() }, 2).settings.retrieval).toBe('hybrid')
    expect(resolveSettings([], { HEARTH_DATA_DIR: dataDirWith({ retrieval: 'keywords' }) }, 2).settings.retrieval).toBe('keywords')
    expect(resolveSettings([], { HEARTH_DATA_DIR: dataDirWith({ retrieval: 'keywords' }), HEARTH_RETRIEVAL: 'embeddings' }, 2).settings.retrieval).toBe(
      'embeddings',
    )
    expect(() => resolveSettings([], { HEARTH_DATA_DIR: dataDirWith(), HEARTH_RETRIEVAL: 'magic' }, 2)).toThrow(
      /HEARTH_RETRIEVAL must be one of hybrid, embeddings, keywords/,
    )
    expect(() => resolveSettings([], { HEARTH_DATA_DIR: dataDirWith({ retrieval: 'magic' }) }, 2)).toThrow(/"retrieval"/)
  })

  it("serves what Ollama serves on Ollama's own port where it is free, unless turned off; OLLAMA_HOST's port moves it", () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'hearth-settings-ollama-'))
    const port = (argv: string[], env: NodeJS.ProcessEnv = {}) => {
      const { settings } = resolveSettings(['--data-dir', dataDir, ...argv], env, 2)
      return [settings.ollamaPort, settings.ollamaPortIfFree ?? false]
    }
    expect(port([])).toEqual([11434, true])
    expect(port(['--ollama-port', 'off'])).toEqual([undefined, false])
    expect(port([], { HEARTH_OLLAMA_PORT: 'off' })).toEqual([undefined, false])
    expect(port(['--ollama-port', '11500'])).toEqual([11500, false])
    expect(port([], { OLLAMA_HOST: '127.0.0.1:11435' })).toEqual([11435, false])
    expect(port([], { OLLAMA_HOST: '0.0.0.0' })).toEqual([11434, false])
    expect(port([], { OLLAMA_HOST: 'http://localhost:9999' })).toEqual([9999, false])
    writeFileSync(join(dataDir, 'settings.json'), JSON.stringify({ ollama_port: null }))
    expect(port([], { OLLAMA_HOST: '127.0.0.1:11435' })).toEqual([undefined, false])
  })

  it('reads the OLLAMA_* settings a person already has, under what Hearth sets itself', () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'hearth-settings-ollama-env-'))
    const env = {
      OLLAMA_ORIGINS: 'chrome-extension://*, moz-extension://*',
      OLLAMA_KEEP_ALIVE: '1h30m',
      OLLAMA_CONTEXT_LENGTH: '8192',
      OLLAMA_NUM_PARALLEL: '3',
      OLLAMA_MAX_QUEUE: '5',
    }
    const { settings } = resolveSettings(['--data-dir', dataDir], env, 2)
    expect(settings).toMatchObject({
      ollamaOrigins: ['chrome-extension://*', 'moz-extension://*'],
      ollamaKeepAliveMs: 5_400_000,
      defaultContextLength: 8192,
      parallel: 3,
      maxQueuePerModel: 5,
    })
    expect(resolveSettings(['--data-dir', dataDir], { OLLAMA_KEEP_ALIVE: '-1' }, 2).settings.ollamaKeepAliveMs).toBe(Infinity)
    expect(resolveSettings(['--data-dir', dataDir, '--parallel', '2'], env, 2).settings.parallel).toBe(2)
    expect(() => resolveSettings(['--data-dir', dataDir], { OLLAMA_KEEP_ALIVE: 'soon' }, 2)).toThrow(/OLLAMA_KEEP_ALIVE/)
    expect(() => resolveSettings(['--data-dir', dataDir], { OLLAMA_CONTEXT_LENGTH: 'big' }, 2)).toThrow(/OLLAMA_CONTEXT_LENGTH/)
  })

  it('refuses bad values with a message that names them', () => {
    const env = { HEARTH_DATA_DIR: dataDirWith() }
    expect(() => resolveSettings(['--port', '70000'], env, 2)).toThrow(/--port must be an integer/)
    expect(() => resolveSettings(['--threads', 'many'], env, 2)).toThrow(/--threads/)
    expect(() => resolveSettings(['--bogus'], env, 2)).toThrow(/Unknown option/)
    expect(() => resolveSettings(['--api-key', 'short'], env, 2)).toThrow(/at least 8/)
    const broken = dataDirWith()
    writeFileSync(join(broken, 'settings.json'), '{ nope')
    expect(() => resolveSettings(['--data-dir', broken], {}, 2)).toThrow(/not valid JSON/)
    expect(() => resolveSettings(['--data-dir', dataDirWith({ port: 'x' })], {}, 2)).toThrow(/"port"/)
  })
})
