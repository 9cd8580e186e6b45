/**
 * How Hearth picks a llama-server slot for a chat request (engines/llama-server/
 * slot-affinity.ts): a conversation comes back to the slot that holds it, and side requests and
 * other conversations take the slot that is cheapest to give up.
 */
import { describe, expect, it } from 'vitest'
import { piecesOf, SlotAffinity, SWAP_SHARE } from '../../engines/llama-server/slot-affinity.ts'
import { WrittenChatBody } from '../../engines/llama-server/written-chat-body.ts'

type Body = { messages: readonly unknown[]; tools?: unknown }
/** A chat body's prompt as the engine's slot choice reads it: its text, and that text in pieces. */
const promptText = (body: Body) => new WrittenChatBody(body).promptText
const promptPieces = (body: Body) => piecesOf(promptText(body))

const SYSTEM = { role: 'system', content: 'You are a coding agent. '.repeat(200) }
const tools = [{ type: 'function', function: { name: 'read', parameters: { type: 'object' } } }]
const conversation = (...turns: string[]) =>
  promptPieces({ tools, messages: [SYSTEM, ...turns.map((t, i) => ({ role: i % 2 ? 'assistant' : 'user', content: t }))] })
const title = promptPieces({
  messages: [
    { role: 'system', content: 'Write a title of five words.' },
    { role: 'user', content: 'Fix the bug' },
  ],
})

/** Runs a request through the chooser: takes a slot, then releases it holding the prompt. */
function serve(affinity: SlotAffinity, pieces: ReturnType<typeof promptPieces>, key?: string): number | undefined {
  const slot = affinity.take(pieces, key)
  if (slot !== undefined) affinity.release(slot, pieces, key)
  return slot
}

describe('slot affinity', () => {
  it('brings a conversation back to the slot that holds its start', () => {
    const affinity = new SlotAffinity(2)
    const slot = serve(affinity, conversation('Fix the bug'), 'session-a')
    expect(serve(affinity, title)).not.toBe(slot)
    expect(serve(affinity, conversation('Fix the bug', 'Reading the file', 'Here it is'), 'session-a')).toBe(slot)
  })

  it("gives a side request of the same session a slot of its own, not the session's", () => {
    const affinity = new SlotAffinity(2)
    const main = serve(affinity, conversation('Fix the bug', 'ok', 'and the test'), 'session-a')
    expect(serve(affinity, title, 'session-a')).not.toBe(main)
    expect(serve(affinity, title, 'session-a')).not.toBe(main) // the title's own slot again
    expect(serve(affinity, conversation('Fix the bug', 'ok', 'and the test', 'done', 'thanks'), 'session-a')).toBe(main)
  })

  it('keeps a long conversation when a sub-agent shares only its system prompt, and each finds its slot again', () => {
    const affinity = new SlotAffinity(2)
    const history = (task: string) => [task, 'file contents '.repeat(400), 'and the next one']
    const main = serve(affinity, conversation(...history('Main task')), 'session')
    const sub = serve(affinity, conversation('Explore the tests'), 'session')
    expect(sub).not.toBe(main)
    expect(serve(affinity, conversation(...history('Main task'), 'ok', 'go on'), 'session')).toBe(main)
    expect(serve(affinity, conversation('Explore the tests', 'found three', 'which?'), 'session')).toBe(sub)
  })

  it('lets a short conversation that shares the system prompt reuse it rather than compute it again', () => {
    const affinity = new SlotAffinity(2)
    const first = serve(affinity, conversation('Task A'), 'a')
    expect(serve(affinity, conversation('Task B'), 'b')).toBe(first)
  })

  it("finds the shared start inside one long message, as the engine's token cache does", () => {
    const affinity = new SlotAffinity(2)
    const words = 'the quick brown fox jumps over the lazy dog '.repeat(100)
    const first = serve(affinity, promptPieces({ messages: [{ role: 'user', content: `${words} first` }] }))
    expect(serve(affinity, promptPieces({ messages: [{ role: 'user', content: `${words} second` }] }))).toBe(first)
  })

  it('tells short prompts apart to the character: four streams at once each come back to their own slot', () => {
    const affinity = new SlotAffinity(4)
    // Each shorter than a piece: by pieces alone the four slots look alike, and the least recently used wins.
    const prompt = (stream: number, run: number) => promptText({ messages: [{ role: 'user', content: `stream ${stream} run ${run}` }] })
    /** The streams' requests all taken before any is over, as when they run at once. */
    const serveAtOnce = (streams: number[], run: number) => {
      const taken = streams.map((k) => ({ text: prompt(k, run), slot: affinity.take(piecesOf(prompt(k, run)), undefined, prompt(k, run)) }))
      for (const { text, slot } of taken) affinity.release(slot!, piecesOf(text), undefined, text)
      return taken.map((t) => t.slot)
    }
    const slots = serveAtOnce([0, 1, 2, 3], 0)
    expect(new Set(slots).size).toBe(4)
    // The next run, in another order: slot 0 is the least recently used, but stream 3's slot is the one holding "stream 3".
    expect(serveAtOnce([3, 2, 1, 0], 1)).toEqual([slots[3], slots[2], slots[1], slots[0]])
  })

  it('gives up a conversation that went stale before one that just paused', () => {
    let now = 0
    const affinity = new SlotAffinity(2, () => now)
    const old = serve(affinity, conversation('Old task', 'long answer '.repeat(500)), 'old')
    now = 6 * 60_000
    const recent = serve(affinity, title, 'recent')
    expect(recent).not.toBe(old)
    now = 15 * 60_000
    // The old conversation, idle for 15 minutes, costs nothing to give up; the title of 9 minutes ago does.
    expect(serve(affinity, promptPieces({ messages: [{ role: 'user', content: 'Something else entirely' }] }))).toBe(old)
  })

  it('leaves the choice to llama-server when every slot is busy, and knows its slots again after a restart', () => {
    const affinity = new SlotAffinity(1)
    expect(affinity.take(title, undefined)).toBe(0)
    expect(affinity.take(title, undefined)).toBeUndefined()
    affinity.release(0, conversation('Saved task'), 'saved')
    const restarted = new SlotAffinity(2)
    const held = new SlotAffinity(2)
    held.release(1, conversation('Saved task'), 'saved')
    restarted.restore(held.snapshot(), (slot) => slot === 1)
    expect(restarted.take(conversation('Saved task', 'ok', 'go on'), 'saved')).toBe(1)
  })

  describe('parking a conversation pushed out of its slot', () => {
    const files = ['a.bin', 'b.bin', 'c.bin']
    const session = (task: string, ...more: string[]) => conversation(task, `contents of ${task} `.repeat(300), ...more)

    it('parks the conversation a request pushes out, and loads it back when it returns to another slot', () => {
      const affinity = new SlotAffinity(2)
      const a = serve(affinity, session('Task A'), 'a')!
      const b = serve(affinity, session('Task B'), 'b')!
      // A third conversation shares only the system prompt with either slot.
      const c = affinity.take(session('Task C'), 'c')!
      const pushedOut = c === a ? 'a' : 'b'
      expect(affinity.swapFor(c, session('Task C'))).toEqual({ park: true, unpark: undefined, byEngine: false })
      expect(affinity.parked(c, files[0]!)).toEqual([])
      affinity.release(c, session('Task C'), 'c')
      // The conversation pushed out comes back to whichever slot is free: its parked prompt is loaded there.
      const back = pushedOut === 'a' ? session('Task A', 'ok', 'go on') : session('Task B', 'ok', 'go on')
      const slot = affinity.take(back, pushedOut)!
      const swap = affinity.swapFor(slot, back)
      expect(swap.unpark?.file).toBe(files[0])
      expect(swap.park).toBe(true) // what that slot held is parked in its turn
      affinity.unparked(slot, swap.unpark!, true)
      expect(affinity.swapFor(slot, back)).toEqual({ park: false, unpark: undefined, byEngine: false })
      expect([a, b]).toContain(slot)
    })

    it('on a CPU parks a tail a GPU would compute again: a twentieth of a long prompt', () => {
      const long = { role: 'system', content: 'You are a coding agent. '.repeat(4000) } // about 96k characters
      const agent = (task: string) => promptPieces({ tools, messages: [long, { role: 'user', content: `${task} `.repeat(1000) }] })
      for (const [share, parks] of [
        [SWAP_SHARE.cpu, true],
        [SWAP_SHARE.gpu, false],
      ] as const) {
        const affinity = new SlotAffinity(1, Date.now, share)
        serve(affinity, agent('alpha'), 'a')
        expect(affinity.swapFor(0, agent('beta')).park).toBe(parks)
      }
    })

    it('parks nothing for a request that continues the slot, or for a slot holding little', () => {
      const affinity = new SlotAffinity(1, Date.now, SWAP_SHARE.gpu, false)
      serve(affinity, session('Task A'), 'a')
      expect(affinity.swapFor(0, session('Task A', 'ok', 'go on'))).toEqual({ park: false, unpark: undefined, byEngine: false })
      serve(affinity, title)
      expect(affinity.swapFor(0, session('Task B'))).toEqual({ park: false, unpark: undefined, byEngine: false })
    })

    it('does not load a parked prompt that shares little more than the slot already does', () => {
      const affinity = new SlotAffinity(1)
      serve(affinity, conversation('Task A', 'short answer'), 'a')
      affinity.parked(0, files[0]!)
      serve(affinity, conversation('Task B'), 'b')
      expect(affinity.swapFor(0, conversation('Task A', 'short answer', 'more')).unpark).toBeUndefined()
    })

    it('keeps one parked prompt per conversation, the longest, and forgets one that failed to load', () => {
      const affinity = new SlotAffinity(1)
      serve(affinity, session('Task A'), 'a')
      affinity.parked(0, files[0]!)
      serve(affinity, session('Task A', 'ok', 'more '.repeat(300)), 'a')
      expect(affinity.parked(0, files[1]!)).toEqual([files[0]])
      serve(affinity, session('Task B'), 'b')
      const swap = affinity.swapFor(0, session('Task A', 'ok', 'more '.repeat(300), 'next'))
      expect(swap.unpark?.file).toBe(files[1])
      affinity.unparked(0, swap.unpark!, false)
      expect(affinity.swapFor(0, session('Task A', 'ok', 'more '.repeat(300), 'next')).unpark).toBeUndefined()
    })

    describe('where llama-server keeps prompts in its RAM cache', () => {
      // Two projects: their prompts share nothing, so llama-server swaps them in memory by itself.
      const project = (name: string, ...turns: string[]) =>
        promptPieces({
          tools,
          messages: [
            { role: 'system', content: `You work on ${name}. `.repeat(300) },
            ...turns.map((t, i) => ({ role: i % 2 ? 'assistant' : 'user', content: t })),
          ],
        })

      it('leaves the swap to llama-server and parks nothing on disk, then knows the conversation is back', () => {
        const affinity = new SlotAffinity(1)
        serve(affinity, project('harbor', 'Fix the bug'), 'a')
        const other = project('quill', 'Write the docs')
        expect(affinity.swapFor(0, other)).toEqual({ park: false, unpark: undefined, byEngine: true })
        void affinity.swappedByEngine(0, other)
        affinity.release(0, other, 'b')
        // The first project comes back: llama-server loads it from memory, swapping the second out.
        const back = project('harbor', 'Fix the bug', 'done', 'and the test')
        expect(affinity.swapFor(0, back)).toEqual({ park: false, unpark: undefined, byEngine: true })
        void affinity.swappedByEngine(0, back)
        affinity.release(0, back, 'a')
        expect(affinity.snapshot().parked).toEqual([])
      })

      it('has a returning conversation wait until llama-server has started the request that moved it to its cache', () => {
        let now = 0
        const affinity = new SlotAffinity(2, () => now++)
        const harbor = project('harbor', 'Fix the bug')
        expect(affinity.take(harbor, 'a')).toBe(0)
        affinity.release(0, harbor, 'a')
        expect(affinity.take(project('quills', 'Write the docs'), 'b')).toBe(1)
        affinity.release(1, project('quills', 'Write the docs'), 'b')
        // A third project takes harbor's slot (the least recently used); llama-server moves harbor
        // to its cache when it starts that request.
        const lumen = project('lumens', 'Draw the chart')
        expect(affinity.take(lumen, 'c')).toBe(0)
        const lumenStarted = Promise.resolve()
        expect(affinity.swappedByEngine(0, lumen, lumenStarted)).toBeUndefined()
        // Harbor comes back while lumen runs: the other slot, and the wait for lumen's start.
        const back = project('harbor', 'Fix the bug', 'done', 'and the test')
        expect(affinity.take(back, 'a')).toBe(1)
        expect(affinity.swapFor(1, back).byEngine).toBe(true)
        expect(affinity.swappedByEngine(1, back, Promise.resolve())).toBe(lumenStarted)
      })

      it('parks on disk what llama-server keeps in the slot: a conversation that shares its system prompt with the request', () => {
        const affinity = new SlotAffinity(1)
        serve(affinity, session('Task A'), 'a')
        expect(affinity.swapFor(0, session('Task B'))).toEqual({ park: true, unpark: undefined, byEngine: false })
      })

      it('loads a parked file rather than wait on a RAM cache that does not hold the conversation', () => {
        const affinity = new SlotAffinity(1)
        serve(affinity, session('Task A'), 'a')
        affinity.parked(0, files[0]!) // pushed out by a sibling, parked on disk
        serve(affinity, session('Task B'), 'b')
        const unrelated = project('quill', 'Write the docs')
        void affinity.swappedByEngine(0, unrelated)
        affinity.release(0, unrelated, 'c')
        // Task A returns to a slot it shares nothing with: its file holds it, llama-server's cache does not.
        const swap = affinity.swapFor(0, session('Task A', 'ok'))
        expect(swap.unpark?.file).toBe(files[0])
        expect(swap.byEngine).toBe(false)
      })

      it('reads the prompt in the order templates write it: the system prompt before the tools', () => {
        // One agent's large tools in two projects: the engine sees the system prompts differ first.
        const agentTools = [{ type: 'function', function: { name: 'read', description: 'Reads a file. '.repeat(3000), parameters: { type: 'object' } } }]
        const inProject = (name: string, ...turns: string[]) =>
          promptPieces({
            tools: agentTools,
            messages: [{ role: 'system', content: `You work on ${name}.` }, ...turns.map((t) => ({ role: 'user', content: t }))],
          })
        expect(inProject('harbor', 'Fix it')[0]!.hash).not.toBe(inProject('quills', 'Fix it')[0]!.hash)
        const affinity = new SlotAffinity(1)
        serve(affinity, inProject('harbor', 'Fix the bug'), 'a')
        expect(affinity.swapFor(0, inProject('quills', 'Write the docs')).byEngine).toBe(true)
      })

      it('parks on disk what a request shares nothing with when llama-server has no RAM cache', () => {
        const affinity = new SlotAffinity(1, Date.now, SWAP_SHARE.cpu, false)
        serve(affinity, project('harbor', 'Fix the bug', 'long answer '.repeat(200)), 'a')
        expect(affinity.swapFor(0, project('quill', 'Write the docs'))).toEqual({ park: true, unpark: undefined, byEngine: false })
      })
    })

    it('keeps its parked prompts across a restart where their files are still there', () => {
      const held = new SlotAffinity(1)
      serve(held, session('Task A'), 'a')
      held.parked(0, files[0]!)
      serve(held, session('Task B'), 'b')
      held.parked(0, files[1]!)
      const restarted = new SlotAffinity(1)
      restarted.restore(
        held.snapshot(),
        () => true,
        (file) => file === files[0],
      )
      expect(restarted.swapFor(0, session('Task A', 'ok')).unpark?.file).toBe(files[0])
    })
  })
})
