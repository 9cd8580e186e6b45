/** What the page's HTTP client reads off a response besides its body: the server's notices. */
import { describe, expect, it } from 'vitest'
import { noticesOf } from '../../renderer/src/lib/services/api-client.ts'

describe("the server's notices", () => {
  it("reads the texts of Hearth's Warning header, quotes and backslashes unescaped, and nothing from others", () => {
    const headers = new Headers({ warning: '299 hearth "No embedding model: found by \\"words\\" alone", 299 hearth "a\\\\b", 199 other "x"' })
    expect(noticesOf(headers)).toEqual(['No embedding model: found by "words" alone', 'a\\b'])
    expect(noticesOf(new Headers())).toEqual([])
  })
})
