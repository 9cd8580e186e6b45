/** Remembered approvals, and the add-server form's body. */
import { describe, expect, it } from 'vitest'
import { MemoryStorage } from '../support/memory-storage.ts'
import { ApprovalMemory, EMPTY_SERVER_FORM, serverBody } from '../../renderer/src/lib/services/mcp-tools.ts'

describe('ApprovalMemory', () => {
  it('remembers "always allow" per server and tool, across instances (reloads)', () => {
    const storage = new MemoryStorage()
    new ApprovalMemory(storage).allow('test', 'add')
    const later = new ApprovalMemory(storage)
    expect(later.toolsOf('test')).toEqual(['add'])
    expect(later.toolsOf('tes')).toEqual([])
    expect(later.allowed('test', 'add')).toBe(true)
    expect(later.allowed('test', 'secret_word')).toBe(false)
    expect(later.allowed('other', 'add')).toBe(false)
    later.forget('test')
    expect(later.allowed('test', 'add')).toBe(false)
  })

  it('treats a damaged entry as nothing allowed', () => {
    const storage = new MemoryStorage()
    storage.setItem('hearth.tools.alwaysAllow', '{oops')
    expect(new ApprovalMemory(storage).allowed('a', 'b')).toBe(false)
  })
})

describe('serverBody', () => {
  it('reads a stdio server: args per line, env KEY=VALUE', () => {
    const body = serverBody({
      ...EMPTY_SERVER_FORM,
      name: 'files',
      command: 'npx',
      args: '-y\n @scope/server \n\n/home/me',
      env: 'A=1\nTOKEN=x=y',
      timeout: '30',
    })
    expect(body).toEqual({ name: 'files', command: 'npx', args: ['-y', '@scope/server', '/home/me'], env: { A: '1', TOKEN: 'x=y' }, timeout: 30 })
  })

  it('reads an http server: headers "Name: value"', () => {
    const body = serverBody({ ...EMPTY_SERVER_FORM, name: 'web', transport: 'http', url: 'http://127.0.0.1:9000/mcp', headers: 'Authorization: Bearer a:b' })
    expect(body).toEqual({ name: 'web', url: 'http://127.0.0.1:9000/mcp', headers: { Authorization: 'Bearer a:b' } })
  })

  it('says which field is wrong', () => {
    expect(() => serverBody({ ...EMPTY_SERVER_FORM, name: 'bad name', command: 'x' })).toThrow(/^Name/)
    expect(() => serverBody({ ...EMPTY_SERVER_FORM, name: 'a' })).toThrow(/^Command/)
    expect(() => serverBody({ ...EMPTY_SERVER_FORM, name: 'a', command: 'x', env: 'NOEQUALS' })).toThrow(/^Environment: "NOEQUALS"/)
    expect(() => serverBody({ ...EMPTY_SERVER_FORM, name: 'a', transport: 'http', url: 'ftp://x' })).toThrow(/^URL/)
    expect(() => serverBody({ ...EMPTY_SERVER_FORM, name: 'a', command: 'x', timeout: '-1' })).toThrow(/^Timeout/)
  })
})
