/**
 * A model's thinking, sealed so a client can carry it and send it back: Anthropic's thinking
 * `signature` (with `display: "omitted"` the thinking text itself is not sent) and the Responses
 * API's `encrypted_content` (`include: ["reasoning.encrypted_content"]` with `store: false`).
 * AES-256-GCM under a key kept in the data folder: only this server can open what it sealed, and
 * anything else (another model's signature, a tampered text) opens to nothing, never to an error.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import { closeSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { StartupError } from './startup-error.ts'

/** Where the key lives in the data folder. */
export const REASONING_KEY_FILE = 'reasoning-key'

const PREFIX = 'hearth1.'
const IV_BYTES = 12
const TAG_BYTES = 16
const KEY_BYTES = 32
/** Binds the sealed text to its purpose: a sealed reasoning opens as nothing else. */
const PURPOSE = Buffer.from('hearth reasoning')

/** A key file that is there but is not a key: the server does not start rather than replace it. */
export class ReasoningKeyError extends StartupError {
  override name = 'ReasoningKeyError'
}

export class ReasoningSeal {
  private constructor(private readonly key: Buffer) {}

  /**
   * The seal whose key lives in `keyFile`, made there on first start. Built once per server
   * (server.ts) and handed to the routes on its context. A file that holds no key of the right
   * length is never replaced: a new key would silently break every signature clients hold, so
   * this throws, naming the file.
   */
  static load(keyFile: string): ReasoningSeal {
    return new ReasoningSeal(loadOrCreateKey(keyFile))
  }

  seal(reasoning: string): string {
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv('aes-256-gcm', this.key, iv)
    cipher.setAAD(PURPOSE)
    const body = Buffer.concat([cipher.update(reasoning, 'utf8'), cipher.final()])
    return PREFIX + Buffer.concat([iv, body, cipher.getAuthTag()]).toString('base64url')
  }

  /** The reasoning a sealed text holds; undefined for anything this server did not seal. */
  open(sealed: string | null | undefined): string | undefined {
    if (typeof sealed !== 'string' || !sealed.startsWith(PREFIX)) return undefined
    const bytes = Buffer.from(sealed.slice(PREFIX.length), 'base64url')
    if (bytes.length < IV_BYTES + TAG_BYTES) return undefined
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key, bytes.subarray(0, IV_BYTES))
      decipher.setAAD(PURPOSE)
      decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES))
      return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES, bytes.length - TAG_BYTES)), decipher.final()]).toString('utf8')
    } catch {
      return undefined
    }
  }
}

function loadOrCreateKey(file: string): Buffer {
  const existing = readKey(file)
  if (existing instanceof Buffer) return existing
  const key = randomBytes(KEY_BYTES)
  mkdirSync(dirname(file), { recursive: true })
  const temporary = join(dirname(file), `.reasoning-key.${randomBytes(4).toString('hex')}.tmp`)
  const fd = openSync(temporary, 'wx', 0o600)
  try {
    writeSync(fd, key.toString('base64'))
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  try {
    // An empty file (a first write cut off) never sealed anything: it is replaced. Otherwise the
    // key is linked to its name, which fails where the name exists, so a key another server wrote
    // meanwhile wins rather than being replaced; either way the name never holds half a key.
    if (existing === 'empty') renameSync(temporary, file)
    else linkSync(temporary, file)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e
    const theirs = readKey(file)
    if (theirs instanceof Buffer) return theirs
  } finally {
    rmSync(temporary, { force: true })
  }
  return key
}

/** The key in the file, 'absent' or 'empty'; throws where the file holds something that is not a key. */
function readKey(file: string): Buffer | 'absent' | 'empty' {
  let text: string
  try {
    text = readFileSync(file, 'utf8').trim()
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return 'absent'
    throw new ReasoningKeyError(
      `cannot read the reasoning key ${file} (${code ?? (e as Error).message}); Hearth needs it to open the thinking clients send back`,
    )
  }
  if (text === '') return 'empty'
  const key = Buffer.from(text, 'base64')
  if (key.length === KEY_BYTES && key.toString('base64') === text) return key
  throw new ReasoningKeyError(
    `${file} does not hold a reasoning key (${KEY_BYTES} bytes in base64; it holds ${key.length} bytes). ` +
      'Hearth will not replace it, since a new key makes every thinking signature clients hold unreadable. ' +
      'Restore the file from a backup, or delete it to start with a new key.',
  )
}
