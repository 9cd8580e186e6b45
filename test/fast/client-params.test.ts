/** ClientParams: a converted request's 400s name the fields the client wrote. */
import { describe, expect, it } from 'vitest'
import { ClientParams } from '../../main/server/protocols/client-params.ts'
import { ApiError, invalidRequest } from '../../main/server/services/api-error.ts'
import { InvalidImageError } from '../../media/images/invalid-image-error.ts'

describe('ClientParams', () => {
  const params = new ClientParams()
  params.set('max_tokens', 'max_output_tokens')
  params.set('messages[1]', 'input[0]')
  params.set('messages[1].content[2].image_url.url', 'input[0].content[2].image_url')
  params.set('messages[10]', 'input[7]')

  it('takes the longest known prefix and keeps the rest of the path', () => {
    expect(params.of('messages[1].content[2].image_url.url')).toBe('input[0].content[2].image_url')
    expect(params.of('messages[1].content[0]')).toBe('input[0].content[0]')
    expect(params.of('messages[1]')).toBe('input[0]')
    expect(params.of('messages[10].tool_call_id')).toBe('input[7].tool_call_id')
    expect(params.of('max_tokens')).toBe('max_output_tokens')
  })

  it('matches whole fields only, and leaves what it does not know', () => {
    expect(params.of('messages[11].content')).toBe('messages[11].content')
    expect(params.of('max_tokens_x')).toBe('max_tokens_x')
    expect(params.of('temperature')).toBe('temperature')
  })

  it('renames any error that names a field, keeping its status and code, and leaves the rest as they were', () => {
    const image = new InvalidImageError('corrupt', 'The image could not be read')
    image.param = 'messages[1].content[2].image_url.url'
    expect((params.renamed(image) as ApiError).body()).toEqual({
      error: { message: 'The image could not be read', type: 'invalid_request_error', param: 'input[0].content[2].image_url', code: 'invalid_image' },
    })
    const elsewhere = invalidRequest('Too hot', 'temperature')
    expect(params.renamed(elsewhere)).toBe(elsewhere)
    const plain = new Error('boom')
    expect(params.renamed(plain)).toBe(plain)
  })
})
