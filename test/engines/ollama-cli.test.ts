/**
 * The `ollama` command's whole CLI (Ollama 0.34.3, built from its own source:
 * test/support/ollama-program.ts) against Hearth's Ollama port, keyless, on real llama.cpp engines:
 * each command asserted on what a person sees. `list`; `show` and its `--modelfile`, `--parameters`,
 * `--system`, `--template`, `--license`; `run` with a prompt and interactively on a terminal
 * (`/set parameter`, `/set system`, `/show`, `/bye`; the transcript is kept in
 * test/artifacts/ollama-cli/); `ps`; `stop`; `create` FROM a model by name with PARAMETER, SYSTEM,
 * MESSAGE and LICENSE, FROM a GGUF file, and with ADAPTER (which the command itself refuses since
 * Ollama 0.30, so the LoRA goes through Ollama's Python client, as a program would send it); `cp`;
 * `rm`; `push`, `signin` and `signout`. Then OpenAI's and Anthropic's own clients on the same port
 * with no key or Ollama's "ollama". `pull` is tested with the registry (ollama-pull.test.ts).
 *
 * The model is stories260K (trained, 2048 tokens of context), its answers capped at 32 tokens in
 * models.json so no run writes long; what reached the engine is read from the request log.
 */
import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import type { RequestRecord } from '../../main/server/http/request-history.ts'
import { pythonClients } from '../support/agent-programs.ts'
import { ollamaProgram, runOllama, type OllamaRunResult } from '../support/ollama-program.ts'
import { PROJECT_ROOT, startTestServer, type TestServer } from '../support/server-process.ts'
import { sharedFixture } from '../support/shared-fixtures.ts'
import { cannotRun, describeIf, itIf } from '../support/skips.ts'
import { writeTinyBert, writeTinyLora } from '../support/tiny-models.ts'
import { llamaBuild } from '../support/upstream-servers.ts'

const stories = sharedFixture('models/stories260K-chatml.gguf')
if (!llamaBuild) cannotRun('llama.cpp is not built on this machine (npm run build:engines); the ollama CLI suite cannot run')
if (!ollamaProgram()) cannotRun('the ollama command is not built (the engines setup builds it from the Go module proxy); the ollama CLI suite cannot run')
const python = pythonClients()
if (!python)
  cannotRun("the Python clients' virtualenv is not installed (the engines setup installs it); the LoRA adapter cannot be sent through Ollama's Python client")

const ARTIFACTS = join(PROJECT_ROOT, 'test/artifacts/ollama-cli')

/** What a terminal shows, without its cursor and colour codes, its spinners' redraws taken out. */
function onScreen(text: string): string {
  return text
    .replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)/g, '')
    .replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '')
    .replace(/[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] ?/g, '')
    .replace(/\r\n/g, '\n')
    .split('\n')
    .map((line) => line.split('\r').at(-1)!.trimEnd())
    .join('\n')
}

/** stories260K's prompt with the persona's system prompt and opening conversation before it. */
const PERSONA = {
  system: 'You are a pirate. Answer as one.',
  messages: [
    { role: 'user', content: 'Who are you?' },
    { role: 'assistant', content: 'A pirate, arr.' },
  ],
}

describeIf(
  llamaBuild && stories && ollamaProgram(),
  'needs llama.cpp built here (npm run build:engines), the shared fixtures (../shared/fixtures) and the ollama command (the engines setup builds it)',
)("the ollama command's CLI against Hearth's Ollama port", () => {
  let server: TestServer
  let modelsDir: string
  let work: string

  beforeAll(async () => {
    modelsDir = mkdtempSync(join(tmpdir(), 'hearth-ollama-cli-'))
    work = mkdtempSync(join(tmpdir(), 'hearth-ollama-cli-work-'))
    copyFileSync(stories!, join(modelsDir, 'tiny.gguf'))
    writeTinyBert(join(modelsDir, 'tiny-embed.gguf'))
    // Answers of at most 32 tokens: `ollama run` asks for no limit, and stories260K writes to the end of its context.
    writeFileSync(join(modelsDir, 'models.json'), JSON.stringify({ models: [{ id: 'tiny', file: 'tiny.gguf', max_completion_tokens: 32 }] }))
    mkdirSync(ARTIFACTS, { recursive: true })
    server = await startTestServer({ modelsDir, args: ['--ollama-port', '0'] })
  })

  afterAll(async () => {
    await server?.stop()
  })

  /** `ollama …` as a person types it in a script: OLLAMA_HOST is the Ollama port; the screen's text. */
  async function ollama(
    args: string[],
    options: { cwd?: string; terminal?: boolean; input?: string; timeoutMs?: number } = {},
  ): Promise<OllamaRunResult & { screen: string }> {
    const result = await runOllama(args, {
      host: server.ollamaUrl!,
      cwd: options.cwd ?? work,
      timeoutMs: options.timeoutMs ?? 60_000,
      ...(options.terminal ? { terminal: true } : {}),
      ...(options.input !== undefined ? { input: options.input } : {}),
    })
    return { ...result, screen: onScreen(`${result.stdout}\n${result.stderr}`) }
  }

  /** The requests Hearth answered since `since` (its own port's log, which both ports write to). */
  async function requestsSince(since: number): Promise<RequestRecord[]> {
    const res = await fetch(`${server.url}/api/requests`, { headers: { authorization: `Bearer ${server.apiKey}` } })
    return ((await res.json()) as { requests: RequestRecord[] }).requests.filter((r) => Date.parse(r.time) >= since)
  }

  /** The prompt's tokens for these messages in the base model's own template, as `/api/chat` counts them. */
  async function promptTokens(messages: Array<{ role: string; content: string }>): Promise<number> {
    const res = await fetch(`${server.ollamaUrl}/api/chat`, {
      method: 'POST',
      body: JSON.stringify({ model: 'tiny', messages, stream: false, options: { num_predict: 1 } }),
    })
    expect(res.status).toBe(200)
    return ((await res.json()) as { prompt_eval_count: number }).prompt_eval_count
  }

  const verboseCount = (screen: string, what: string) => Number(new RegExp(`^${what}:\\s+(\\d+) token`, 'm').exec(screen)?.[1])

  describe('a model as it is', () => {
    itIf(ollamaProgram(), 'needs the ollama command')('list: every model under its Ollama name, with its ID, size and age', async () => {
      const listed = await ollama(['list'])
      expect(listed.code, listed.screen).toBe(0)
      expect(listed.screen).toMatch(/^NAME\s+ID\s+SIZE\s+MODIFIED/)
      expect(listed.screen).toMatch(/^tiny:latest\s+[0-9a-f]{12}\s+1\.2 MB\s+\S/m)
      expect(listed.screen).toMatch(/^tiny-embed:latest\s+[0-9a-f]{12}\s/m)
    })

    itIf(ollamaProgram(), 'needs the ollama command')('show: the model card, and --modelfile, --parameters, --system, --template, --license', async () => {
      const card = await ollama(['show', 'tiny'])
      expect(card.code, card.screen).toBe(0)
      expect(card.screen).toMatch(/architecture\s+llama/)
      expect(card.screen).toMatch(/context length\s+2048/)
      expect(card.screen).toMatch(/embedding length\s+64/)
      expect(card.screen).toMatch(/Capabilities\s+completion/)
      const modelfile = await ollama(['show', '--modelfile', 'tiny'])
      expect(modelfile.stdout).toContain('# Modelfile generated by "ollama show"')
      expect(modelfile.stdout).toContain(`FROM ${join(modelsDir, 'tiny.gguf')}`)
      expect(modelfile.stdout).toContain("TEMPLATE {% for message in messages %}{{'<|im_start|>'")
      expect((await ollama(['show', '--template', 'tiny'])).stdout).toContain("{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
      // A model without a Modelfile of its own has no parameters, system prompt or license: nothing to print.
      for (const flag of ['--parameters', '--system', '--license']) {
        const shown = await ollama(['show', flag, 'tiny'])
        expect(shown.code, `${flag}: ${shown.screen}`).toBe(0)
        expect(shown.stdout.trim(), flag).toBe('')
      }
      const embedder = await ollama(['show', 'tiny-embed'])
      expect(embedder.screen).toMatch(/Capabilities\s+embedding/)
    })

    itIf(ollamaProgram(), 'needs the ollama command')('run with a prompt: answers once and exits', async () => {
      const ran = await ollama(['run', '--verbose', 'tiny', 'Once upon a time'])
      expect(ran.code, ran.screen).toBe(0)
      expect(ran.stdout.trim().length).toBeGreaterThan(0)
      // --verbose's statistics are Hearth's counts: the prompt in the model's template, the answer within its limit.
      expect(verboseCount(ran.screen, 'prompt eval count')).toBe(await promptTokens([{ role: 'user', content: 'Once upon a time' }]))
      expect(verboseCount(ran.screen, 'eval count')).toBeLessThanOrEqual(32)
      expect(ran.screen).toMatch(/eval rate:\s+[\d.]+ tokens\/s/)
    })

    itIf(ollamaProgram(), 'needs the ollama command')('ps lists the running model; stop unloads it', async () => {
      await ollama(['run', 'tiny', 'Hi'])
      const running = await ollama(['ps'])
      expect(running.code, running.screen).toBe(0)
      expect(running.screen).toMatch(/^NAME\s+ID\s+SIZE\s+PROCESSOR\s+CONTEXT\s+UNTIL/)
      expect(running.screen).toMatch(/^tiny:latest\s+[0-9a-f]{12}\s+[\d.]+ [MG]B\s+100% CPU\s+2048\s+\d+ minutes from now/m)
      const stopped = await ollama(['stop', 'tiny'])
      expect(stopped.code, stopped.screen).toBe(0)
      expect((await ollama(['ps'])).screen).not.toContain('tiny:latest')
    })

    itIf(ollamaProgram(), 'needs the ollama command')('a model it does not have: show, run, stop and rm say so', async () => {
      for (const [args, words] of [
        [['show', 'nothing'], "model 'nothing' not found"],
        [['rm', 'nothing'], "model 'nothing' not found"],
        [['stop', 'nothing'], 'couldn\'t find model "nothing" to stop'],
      ] as const) {
        const said = await ollama([...args])
        expect(said.code, args.join(' ')).not.toBe(0)
        expect(said.screen, args.join(' ')).toContain(words)
      }
      // `run` pulls a model it lacks: whatever the pull says, it ends in an error.
      expect((await ollama(['run', 'nothing', 'hi'])).code).not.toBe(0)
    })
  })

  describe('a Modelfile FROM a model by name', () => {
    itIf(ollamaProgram(), 'needs the ollama command')(
      'create with PARAMETER num_ctx, temperature, stop, SYSTEM, MESSAGE and LICENSE: listed, and shown back',
      async () => {
        const dir = join(work, 'persona')
        mkdirSync(dir)
        writeFileSync(
          join(dir, 'Modelfile'),
          [
            'FROM tiny',
            'PARAMETER num_ctx 256',
            'PARAMETER temperature 0',
            'PARAMETER stop "<|im_end|>"',
            'PARAMETER stop Lily',
            'PARAMETER num_predict 24',
            `SYSTEM """${PERSONA.system}"""`,
            ...PERSONA.messages.map((m) => `MESSAGE ${m.role} ${m.content}`),
            'LICENSE """MIT License',
            'Copyright (c) the tests"""',
            '',
          ].join('\n'),
        )
        const created = await ollama(['create', 'persona', '-f', 'Modelfile'], { cwd: dir })
        expect(created.code, created.screen).toBe(0)
        expect(created.screen).toContain('success')
        expect((await ollama(['list'])).screen).toMatch(/^persona:latest\s+[0-9a-f]{12}\s+1\.2 MB\s/m)
        // No copy of the weights: the folder still holds one model file.
        expect(
          readdirSync(modelsDir)
            .filter((f) => f.endsWith('.gguf'))
            .sort(),
        ).toEqual(['tiny-embed.gguf', 'tiny.gguf'])

        const card = await ollama(['show', 'persona'])
        expect(card.screen).toMatch(/context length\s+256/)
        expect(card.screen).toMatch(/Parameters\s+num_ctx\s+256\s+num_predict\s+24\s+stop\s+"<\|im_end\|>"\s+stop\s+"Lily"\s+temperature\s+0/)
        expect(card.screen).toMatch(/System\s+You are a pirate\. Answer as one\./)
        expect(card.screen).toMatch(/License\s+MIT License\s+Copyright \(c\) the tests/)
        expect((await ollama(['show', '--system', 'persona'])).stdout).toBe(PERSONA.system)
        expect((await ollama(['show', '--license', 'persona'])).stdout.trimEnd()).toBe('MIT License\nCopyright (c) the tests')
        expect((await ollama(['show', '--parameters', 'persona'])).stdout.split('\n').map((l) => l.replace(/\s+/g, ' ').trim())).toEqual(
          expect.arrayContaining(['num_ctx 256', 'num_predict 24', 'stop "<|im_end|>"', 'stop "Lily"', 'temperature 0']),
        )
        const modelfile = (await ollama(['show', '--modelfile', 'persona'])).stdout
        expect(modelfile).toContain('# FROM persona:latest')
        for (const line of [
          'SYSTEM You are a pirate. Answer as one.',
          'PARAMETER num_ctx 256',
          'PARAMETER stop Lily',
          'PARAMETER temperature 0',
          'LICENSE "MIT License\nCopyright (c) the tests"',
          'MESSAGE user Who are you?',
          'MESSAGE assistant A pirate, arr.',
        ]) {
          expect(modelfile).toContain(line)
        }
      },
    )

    itIf(ollamaProgram(), 'needs the ollama command')(
      'run the derived model: its system prompt and messages reach the engine, its parameters hold',
      async () => {
        const since = Date.now()
        const first = await ollama(['run', '--verbose', 'persona', 'Hello'])
        expect(first.code, first.screen).toBe(0)
        // The prompt the engine read is the base's template over SYSTEM, the MESSAGEs and the prompt, token for token.
        const expected = await promptTokens([{ role: 'system', content: PERSONA.system }, ...PERSONA.messages, { role: 'user', content: 'Hello' }])
        expect(verboseCount(first.screen, 'prompt eval count')).toBe(expected)
        expect(expected).toBeGreaterThan((await promptTokens([{ role: 'user', content: 'Hello' }])) + 20)
        const record = (await requestsSince(since)).find((r) => r.path === '/api/generate' && r.model === 'persona')
        expect(record).toMatchObject({ status: 200, prompt_tokens: expected })
        // num_predict 24, temperature 0 (the same answer twice), and the stop word never written.
        expect(verboseCount(first.screen, 'eval count')).toBeLessThanOrEqual(24)
        const second = await ollama(['run', 'persona', 'Hello'])
        expect(second.stdout).toBe(first.stdout)
        expect(first.stdout).not.toContain('Lily')
        // The base is as it was.
        expect((await ollama(['show', '--system', 'tiny'])).stdout).toBe('')
      },
    )

    itIf(ollamaProgram(), 'needs the ollama command')(
      'run interactively: /set parameter, /set system, /show parameters, /show modelfile, a chat, /bye',
      async () => {
        const since = Date.now()
        const session = await ollama(['run', 'persona'], {
          terminal: true,
          timeoutMs: 90_000,
          input: [
            '/set parameter temperature 0',
            '/set system You are a sailor.',
            '/show parameters',
            '/show system',
            '/show modelfile',
            'Hello there',
            '/bye',
            '',
          ].join('\n'),
        })
        const transcript = onScreen(session.stdout)
        writeFileSync(join(ARTIFACTS, 'interactive.txt'), transcript)
        expect(session.code, transcript).toBe(0)
        expect(session.timedOut).toBe(false)
        // The Modelfile's opening conversation, shown as the session's history.
        expect(transcript).toContain('>>> Who are you?')
        expect(transcript).toContain('A pirate, arr.')
        expect(transcript).toContain("Set parameter 'temperature' to '0'")
        expect(transcript).toContain('Set system message.')
        expect(transcript).toMatch(
          /Model defined parameters:\s+num_ctx\s+256\s+num_predict\s+24\s+stop\s+"<\|im_end\|>"\s+stop\s+"Lily"\s+temperature\s+0\s+User defined parameters:\s+temperature\s+0/,
        )
        expect(transcript).toMatch(/\/show system\s+You are a sailor\./)
        expect(transcript).toContain('# FROM persona:latest')
        expect(transcript).toContain('MESSAGE assistant A pirate, arr.')
        // The chat: answered, and the session's system prompt went in place of the model's, before its messages.
        const chat = (await requestsSince(since)).filter((r) => r.path === '/api/chat' && r.model === 'persona')
        expect(chat).toHaveLength(1)
        expect(chat[0]).toMatchObject({ status: 200 })
        expect(chat[0]!.prompt_tokens).toBe(
          await promptTokens([{ role: 'system', content: 'You are a sailor.' }, ...PERSONA.messages, { role: 'user', content: 'Hello there' }]),
        )
        const answer = transcript.split('Hello there').at(-1)!.split('>>>')[0]!.trim()
        expect(answer.length, transcript).toBeGreaterThan(0)
      },
      120_000,
    )

    itIf(ollamaProgram() && python, "needs the ollama command and Ollama's Python client")(
      "ADAPTER: the command refuses it itself; sent by Ollama's Python client, llama-server applies the LoRA",
      async () => {
        const dir = join(work, 'adapter')
        mkdirSync(dir)
        // A LoRA of stories260K's own shapes: 64 wide, 5 layers.
        writeTinyLora(join(dir, 'lora.gguf'), { embd: 64, layers: 5 })
        writeFileSync(join(dir, 'Modelfile'), 'FROM tiny\nADAPTER ./lora.gguf\n')
        const since = Date.now()
        const refused = await ollama(['create', 'adapted', '-f', 'Modelfile'], { cwd: dir })
        expect(refused.code).not.toBe(0)
        expect(refused.screen).toContain('LoRA adapters are no longer supported')
        expect((await requestsSince(since)).filter((r) => r.path === '/api/create')).toEqual([])

        // The same model without the adapter, made by the command, to compare with.
        writeFileSync(join(dir, 'Modelfile.plain'), 'FROM tiny\nPARAMETER temperature 0\nPARAMETER num_predict 16\n')
        expect((await ollama(['create', 'plain', '-f', 'Modelfile.plain'], { cwd: dir })).code).toBe(0)
        const made = execFileSync(
          python!,
          [
            '-c',
            [
              'import sys',
              'from ollama import Client',
              'client = Client(host=sys.argv[1])',
              'digest = client.create_blob(sys.argv[2])',
              "print(client.create(model='adapted', from_='tiny', adapters={'lora.gguf': digest}, parameters={'temperature': 0, 'num_predict': 16}).status)",
            ].join('\n'),
            server.ollamaUrl!,
            join(dir, 'lora.gguf'),
          ],
          { encoding: 'utf8', timeout: 60_000 },
        )
        expect(made.trim()).toBe('success')
        expect((await ollama(['show', '--modelfile', 'adapted'])).stdout).toMatch(/^ADAPTER \S+\.gguf$/m)

        const plain = await ollama(['run', 'plain', 'Once upon a time'])
        const plainAgain = await ollama(['run', 'plain', 'Once upon a time'])
        const adapted = await ollama(['run', 'adapted', 'Once upon a time'])
        expect(plain.code, plain.screen).toBe(0)
        expect(adapted.code, adapted.screen).toBe(0)
        // Greedy answers: the same without the adapter every time, another with it (llama-server ran --lora).
        expect(plainAgain.stdout).toBe(plain.stdout)
        expect(adapted.stdout.trim().length).toBeGreaterThan(0)
        expect(adapted.stdout).not.toBe(plain.stdout)
      },
      120_000,
    )

    itIf(ollamaProgram(), 'needs the ollama command')(
      'create FROM a GGUF file (uploaded as a blob) with SYSTEM and PARAMETER: listed, shown and run',
      async () => {
        const dir = join(work, 'from-file')
        mkdirSync(dir)
        copyFileSync(stories!, join(dir, 'made.gguf'))
        writeFileSync(join(dir, 'Modelfile'), 'FROM ./made.gguf\nSYSTEM Be brief.\nPARAMETER num_predict 8\n')
        const created = await ollama(['create', 'made', '-f', 'Modelfile'], { cwd: dir })
        expect(created.code, created.screen).toBe(0)
        expect(created.screen).toMatch(/copying file sha256:[0-9a-f]{64} 100%/)
        expect(created.screen).toContain('success')
        expect((await ollama(['list'])).screen).toMatch(/^made:latest\s/m)
        expect((await ollama(['show', '--system', 'made'])).stdout).toBe('Be brief.')
        expect(readdirSync(modelsDir).filter((f) => /^made-[0-9a-f]{12}\.gguf$/.test(f))).toHaveLength(1)
        const ran = await ollama(['run', '--verbose', 'made', 'Hi'])
        expect(ran.code, ran.screen).toBe(0)
        expect(verboseCount(ran.screen, 'eval count')).toBeLessThanOrEqual(8)
      },
    )

    itIf(ollamaProgram(), 'needs the ollama command')('cp: a second name, with the same Modelfile', async () => {
      const copied = await ollama(['cp', 'persona', 'persona-copy'])
      expect(copied.code, copied.screen).toBe(0)
      expect(copied.screen).toContain("copied 'persona' to 'persona-copy'")
      expect((await ollama(['show', '--system', 'persona-copy'])).stdout).toBe(PERSONA.system)
      expect((await ollama(['show', 'persona-copy'])).screen).toMatch(/context length\s+256/)
    })

    itIf(ollamaProgram(), 'needs the ollama command')('rm: the derived model alone; the base stays, and still runs', async () => {
      const removed = await ollama(['rm', 'persona-copy'])
      expect(removed.code, removed.screen).toBe(0)
      expect(removed.screen).toContain("deleted 'persona-copy'")
      let listed = (await ollama(['list'])).screen
      expect(listed).not.toContain('persona-copy')
      expect(listed).toContain('persona:latest')
      expect((await ollama(['rm', 'persona'])).code).toBe(0)
      listed = (await ollama(['list'])).screen
      expect(listed).not.toMatch(/^persona/m)
      expect(listed).toMatch(/^tiny:latest\s/m)
      expect(existsSync(join(modelsDir, 'tiny.gguf'))).toBe(true)
      const ran = await ollama(['run', 'tiny', 'Once upon a time'])
      expect(ran.code, ran.screen).toBe(0)
      expect(ran.stdout.trim().length).toBeGreaterThan(0)
      expect((await ollama(['show', '--system', 'tiny'])).stdout).toBe('')
    })

    itIf(ollamaProgram(), 'needs the ollama command')('push, signin and signout: refused, saying why', async () => {
      for (const args of [['push', 'tiny'], ['signin'], ['signout']]) {
        const said = await ollama(args)
        expect(said.code, args.join(' ')).not.toBe(0)
        expect(said.screen, args.join(' ')).toContain('Hearth signs in to no ollama.com account')
      }
    })
  })

  describe("OpenAI's and Anthropic's clients on the Ollama port, with no key or Ollama's", () => {
    const base = () => `${server.ollamaUrl}/v1`

    it('openai: chat whole and streamed, embeddings, the model list; no key at all', async () => {
      // As Ollama's docs set it: the key is required by the client and ignored by the server.
      const openai = new OpenAI({ baseURL: base(), apiKey: 'ollama', maxRetries: 0 })
      const answer = await openai.chat.completions.create({
        model: 'tiny',
        messages: [{ role: 'user', content: 'Once upon a time' }],
        max_tokens: 12,
        temperature: 0,
      })
      expect(answer.choices[0]!.message.content!.length).toBeGreaterThan(0)
      expect(answer.usage).toMatchObject({ completion_tokens: 12 })
      let streamed = ''
      for await (const chunk of await openai.chat.completions.create({
        model: 'tiny:latest',
        messages: [{ role: 'user', content: 'Once upon a time' }],
        max_tokens: 12,
        temperature: 0,
        stream: true,
      })) {
        streamed += chunk.choices[0]?.delta.content ?? ''
      }
      expect(streamed).toBe(answer.choices[0]!.message.content)
      const embedded = await openai.embeddings.create({ model: 'tiny-embed', input: ['one', 'two'] })
      expect(embedded.data).toHaveLength(2)
      expect(embedded.data[0]!.embedding.length).toBeGreaterThan(0)
      const ids = []
      for await (const model of openai.models.list()) ids.push(model.id)
      expect(ids).toEqual(expect.arrayContaining(['tiny', 'tiny-embed']))
      // No Authorization header at all.
      const bare = await fetch(`${base()}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tiny', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 }),
      })
      expect(bare.status).toBe(200)
      expect((await fetch(`${base()}/models`)).status).toBe(200)
    })

    it("anthropic: messages whole and streamed, at the port's root as ANTHROPIC_BASE_URL names it", async () => {
      for (const anthropic of [
        new Anthropic({ baseURL: server.ollamaUrl!, apiKey: 'ollama', maxRetries: 0 }),
        new Anthropic({ baseURL: server.ollamaUrl!, apiKey: null, authToken: 'ollama', maxRetries: 0 }),
      ]) {
        const message = await anthropic.messages.create({ model: 'tiny', max_tokens: 12, messages: [{ role: 'user', content: 'Once upon a time' }] })
        expect(message).toMatchObject({ type: 'message', role: 'assistant', stop_reason: 'max_tokens', usage: { output_tokens: 12 } })
        expect(message.content.map((b) => (b.type === 'text' ? b.text : '')).join('').length).toBeGreaterThan(0)
        const stream = anthropic.messages.stream({ model: 'tiny:latest', max_tokens: 12, messages: [{ role: 'user', content: 'Once upon a time' }] })
        let streamed = ''
        stream.on('text', (t) => (streamed += t))
        const final = await stream.finalMessage()
        expect(final).toMatchObject({ stop_reason: 'max_tokens', usage: { output_tokens: 12 } })
        expect(streamed.length).toBeGreaterThan(0)
      }
    })
  })
})
