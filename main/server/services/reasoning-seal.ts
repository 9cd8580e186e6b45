/**
 * A model's thinking, sealed so a client can carry it and send it back: Anthropic's thinking
 * `signature` (with `display: "omitted"` the thinking text itself is not sent) and the Responses
 * API's `encrypted_content` (`include: ["reasoning.encrypted_content"]` with `store: false`).
 * AES-256-GCM under a key kept in the data folder: only this server can open what it sealed, and
 * anything else (another model's signature, a tampered text) opens to nothing, never to an error.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'

const PREFIX = 'hearth1.'
const IV_BYTES = 12
const TAG_BYTES = 16
const KEY_BYTES = 32
/** Binds the sealed text to its purpose: a sealed reasoning opens as nothing else. */
const PURPOSE = Buffer.from('hearth reasoning')

export class ReasoningSeal {
  private constructor(private readonly key: Buffer) {}

  private static readonly byFile = new Map<string, ReasoningSeal>()

  /** The seal whose key lives in `keyFile` (made on first use); one per file in this process. */
  static forKeyFile(keyFile: string): ReasoningSeal {
    let seal = ReasoningSeal.byFile.get(keyFile)
    if (!seal) {
      seal = new ReasoningSeal(loadOrCreateKey(keyFile))
      ReasoningSeal.byFile.set(keyFile, seal)
    }
    return seal
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
  try {
    const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64')
    if (key.length === KEY_BYTES) return key
  } catch {
    // none yet: made below
  }
  const key = randomBytes(KEY_BYTES)
  mkdirSync(dirname(file), { recursive: true })
  writeFileSync(file, key.toString('base64'), { mode: 0o600 })
  return key
}
