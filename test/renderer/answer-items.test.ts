/** An answer's items when it ends short: every call gets an outcome, so none is left unanswered or run again. */
import { describe, expect, it } from 'vitest'
import { finishCalls, STOPPED_TEXT, type AnswerItem } from '../../renderer/src/lib/services/answer-items.ts'
import type { McpCallItem } from '../../main/server/wire-types.ts'

const asks = (id: string): AnswerItem => ({ type: 'mcp_approval_request', id, server_label: 'test', name: 'add', arguments: '{}' })
const answers = (id: string, approve: boolean): AnswerItem => ({ type: 'mcp_approval_response', approval_request_id: id, approve })
const ran = (id: string, status: McpCallItem['status'], approval: string | null = null): McpCallItem => ({
  type: 'mcp_call',
  id,
  server_label: 'test',
  name: 'add',
  arguments: '{}',
  output: status === 'completed' ? '5' : null,
  error: null,
  approval_request_id: approval,
  status,
})

describe('finishCalls', () => {
  it('leaves an answer whose calls all ended as it is', () => {
    const items = [
      asks('mcpr_1'),
      answers('mcpr_1', false),
      asks('mcpr_2'),
      answers('mcpr_2', true),
      ran('mcp_2', 'completed', 'mcpr_2'),
      ran('mcp_3', 'failed'),
    ]
    const before = structuredClone(items)
    expect(finishCalls(items, STOPPED_TEXT)).toEqual([])
    expect(items).toEqual(before)
  })

  it('ends a call cut off while it ran, and one approved or still waiting that never ran, saying why', () => {
    const items = [ran('mcp_1', 'in_progress'), asks('mcpr_2'), answers('mcpr_2', true), asks('mcpr_3')]
    const finished = finishCalls(items, STOPPED_TEXT)
    const stopped = { output: null, error: STOPPED_TEXT, status: 'incomplete' }
    expect(items).toEqual([
      { ...ran('mcp_1', 'in_progress'), ...stopped },
      asks('mcpr_2'),
      answers('mcpr_2', true),
      asks('mcpr_3'),
      { ...ran('mcp_mcpr_2', 'incomplete', 'mcpr_2'), ...stopped },
      { ...ran('mcp_mcpr_3', 'incomplete', 'mcpr_3'), ...stopped },
    ])
    expect(finished.map((c) => c.approval_request_id ?? c.id)).toEqual(['mcp_1', 'mcpr_2', 'mcpr_3'])
  })
})
