/**
 * docs/agents.md's setups are the ones `npm run launch` gives each agent, word for word: the block
 * after `<!-- launch: <agent> -->` is its command line, the one after `<!-- launch: <agent> file:
 * <name> -->` a config file (a file in a folder named with dots), each compared with what the launch writes and runs
 * for an example server (http://127.0.0.1:8181, the key `$KEY`, qwen2.5-coder-7b with 32,768
 * tokens of context and 8,192 of output), its config files under ~/.hearth/agents. The launches
 * themselves run against a real server, agent by agent, in agents.test.ts: a snippet that drifts
 * from what the agent accepts fails one or the other.
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { AGENTS, type AgentSetup } from '../../main/cli/agent-setups.ts'
import { PROJECT_ROOT } from '../support/server-process.ts'

const DOC = readFileSync(join(PROJECT_ROOT, 'docs/agents.md'), 'utf8')
const CONFIG_DIR = '~/.hearth/agents'

/** The fenced blocks after each `<!-- launch: id -->` (the command) or `<!-- launch: id file: name -->` (a config file) marker. */
function documented(id: string): Map<string, string> {
  const blocks = new Map<string, string>()
  for (const m of DOC.matchAll(new RegExp(`<!-- launch: ${id}(?: file: ([\\w.-]+))? -->\\n+\`\`\`\\w*\\n([\\s\\S]*?)\`\`\``, 'g'))) {
    blocks.set(m[1] ?? 'command', m[2]!.trimEnd())
  }
  return blocks
}

/** What the launch gives the agent, as the docs write it: each config file by name, and the command line. */
function rendered(agent: AgentSetup): Map<string, string> {
  const dir = mkdtempSync(join(tmpdir(), `hearth-docs-${agent.id}-`))
  const launch = agent.launch({
    url: 'http://127.0.0.1:8181',
    key: '$KEY',
    model: 'qwen2.5-coder-7b',
    contextLength: 32768,
    maxCompletionTokens: 8192,
    configDir: dir,
  })
  const files = readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => /\.(json|ya?ml)$/.test(f))
    .sort()
  const contents = new Map(files.map((f) => [f, readFileSync(join(dir, f), 'utf8').trimEnd()]))
  const shown = (value: string) => {
    // A variable that holds a written file is shown reading it; paths inside Hearth's data folder as in the docs.
    const file = [...contents].find(([, content]) => content === value.trimEnd())?.[0]
    if (file) return `"$(cat ${CONFIG_DIR}/${file})"`
    const text = value.replaceAll(dir, CONFIG_DIR)
    return text.startsWith('$') || /^[\w./:@~=,-]+$/.test(text) ? text : `'${text}'`
  }
  // One line per variable, then the program with each flag beside its value.
  const args: string[] = []
  for (const arg of launch.args.map(shown)) {
    if (args.length > 0 && args.at(-1)!.startsWith('-') && !args.at(-1)!.includes(' ') && !arg.startsWith('-')) args[args.length - 1] += ` ${arg}`
    else args.push(arg)
  }
  const command = [
    ...launch.unset.map((name) => `env -u ${name}`),
    ...Object.entries(launch.env).map(([name, value]) => `${name}=${shown(value)}`),
    [agent.program, ...args].join(' \\\n    '),
  ].join(' \\\n  ')
  const blocks = new Map([...contents].map(([f, content]) => [f.replaceAll('/', '.'), content.replaceAll(dir, CONFIG_DIR)]))
  blocks.set('command', command)
  return blocks
}

describe('docs/agents.md', () => {
  it.each(AGENTS.map((a) => [a.id, a] as const))('shows %s set up as npm run launch sets it up', (id, agent) => {
    expect(documented(id), `the blocks after <!-- launch: ${id} … --> in docs/agents.md`).toEqual(rendered(agent))
  })

  it('marks every agent npm run launch knows, and no other', () => {
    const marked = [...DOC.matchAll(/<!-- launch: ([\w-]+) -->/g)].map((m) => m[1])
    expect(new Set(marked)).toEqual(new Set(AGENTS.map((a) => a.id)))
  })
})
