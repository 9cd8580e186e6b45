/**
 * Builds small audio (and not-audio) files in memory for tests: WAV layouts the fixtures do not
 * cover, an AIFF (which only the ffmpeg fallback reads), an MPEG-2 program stream, a PNG.
 */

export interface WavOptions {
  sampleRate: number
  channels?: number
  encoding: 'int' | 'float'
  bitsPerSample: 8 | 16 | 24 | 32 | 64
  /** Write 0xFFFFFFFF as the data size, as tools streaming to a pipe do. */
  unknownDataSize?: boolean
}

/** A WAV file holding `samples` (mono, or interleaved when channels > 1). */
export function wavFile(samples: Float32Array, options: WavOptions): Uint8Array {
  const { sampleRate, channels = 1, encoding, bitsPerSample } = options
  const bytesPerSample = bitsPerSample / 8
  const dataLength = samples.length * bytesPerSample
  const bytes = new Uint8Array(44 + dataLength)
  const view = new DataView(bytes.buffer)
  writeAscii(bytes, 0, 'RIFF')
  view.setUint32(4, 36 + dataLength, true)
  writeAscii(bytes, 8, 'WAVEfmt ')
  view.setUint32(16, 16, true)
  view.setUint16(20, encoding === 'float' ? 3 : 1, true)
  view.setUint16(22, channels, true)
  view.setUint32(24, sampleRate, true)
  view.setUint32(28, sampleRate * channels * bytesPerSample, true)
  view.setUint16(32, channels * bytesPerSample, true)
  view.setUint16(34, bitsPerSample, true)
  writeAscii(bytes, 36, 'data')
  view.setUint32(40, options.unknownDataSize ? 0xffff_ffff : dataLength, true)
  samples.forEach((sample, i) => {
    const at = 44 + i * bytesPerSample
    if (encoding === 'float') {
      if (bitsPerSample === 64) view.setFloat64(at, sample, true)
      else view.setFloat32(at, sample, true)
    } else if (bitsPerSample === 16) view.setInt16(at, Math.round(clamp(sample) * 32_767), true)
    else throw new Error(`wavFile: ${bitsPerSample}-bit integers are not needed by the tests`)
  })
  return bytes
}

/** A 16-bit mono AIFF: a real audio format that the JavaScript path does not read. */
export function aiffFile(samples: Float32Array, sampleRate: number): Uint8Array {
  const dataLength = samples.length * 2
  const bytes = new Uint8Array(54 + dataLength)
  const view = new DataView(bytes.buffer)
  writeAscii(bytes, 0, 'FORM')
  view.setUint32(4, 46 + dataLength)
  writeAscii(bytes, 8, 'AIFFCOMM')
  view.setUint32(16, 18)
  view.setUint16(20, 1) // channels
  view.setUint32(22, samples.length) // frames
  view.setUint16(26, 16) // bits
  writeExtended80(view, 28, sampleRate)
  writeAscii(bytes, 38, 'SSND')
  view.setUint32(42, 8 + dataLength)
  // offset and block size stay 0
  samples.forEach((sample, i) => view.setInt16(54 + i * 2, Math.round(clamp(sample) * 32_767)))
  return bytes
}

/**
 * Wraps an MPEG audio elementary stream in an MPEG-2 program stream (MPEG-2 pack headers and
 * PES headers with a PTS), the layout DVDs and most .mpg files use; the fixture is MPEG-1.
 */
export function mpeg2ProgramStream(audio: Uint8Array, payloadPerPacket = 2000): Uint8Array {
  const parts: Uint8Array[] = []
  for (let at = 0; at < audio.length; at += payloadPerPacket) {
    const payload = audio.subarray(at, at + payloadPerPacket)
    // Pack header: start code, '01' + SCR (all zero here, marker bits set), mux rate, no stuffing.
    parts.push(Uint8Array.of(0, 0, 1, 0xba, 0x44, 0, 0x04, 0, 0x04, 0x01, 0x01, 0x89, 0xc3, 0xf8))
    const header = Uint8Array.of(0x80, 0x80, 5, 0x21, 0, 1, 0, 1) // '10' marker, PTS present, 5 header bytes
    const length = header.length + payload.length
    parts.push(Uint8Array.of(0, 0, 1, 0xc0, length >> 8, length & 0xff), header, payload)
  }
  parts.push(Uint8Array.of(0, 0, 1, 0xb9))
  return concat(parts)
}

/**
 * The most audio per byte an upload can carry: Ogg Opus whose packets are two bytes each, six
 * empty 20 ms frames (120 ms of silence, which the decoder fills in). 25 MB of it is about 280
 * hours of sound, 60 GB as 16 kHz float samples: what a server must not try to hold.
 */
export function oggOpusSilence(seconds: number): Uint8Array {
  const PACKET = Uint8Array.of((31 << 3) | 3, 6) // CELT fullband 20 ms, code 3 (CBR), 6 frames of 0 bytes
  const SAMPLES_PER_PACKET = 6 * 960 // at Opus's 48 kHz
  const head = new Uint8Array(19)
  writeAscii(head, 0, 'OpusHead')
  const headView = new DataView(head.buffer)
  head[8] = 1 // version
  head[9] = 1 // mono
  headView.setUint16(10, 312, true) // pre-skip
  headView.setUint32(12, 16_000, true) // the rate the audio was made at
  const tags = new Uint8Array(8 + 4 + 6 + 4)
  writeAscii(tags, 0, 'OpusTags')
  new DataView(tags.buffer).setUint32(8, 6, true)
  writeAscii(tags, 12, 'hearth')
  const pages: Uint8Array[] = [oggPage([head], 0, 0x02, 0n), oggPage([tags], 1, 0, 0n)]
  const packets = Math.ceil((seconds * 48_000) / SAMPLES_PER_PACKET)
  let granule = 0n
  for (let done = 0, sequence = 2; done < packets; sequence++) {
    const count = Math.min(255, packets - done)
    done += count
    granule += BigInt(count * SAMPLES_PER_PACKET)
    pages.push(
      oggPage(
        Array.from({ length: count }, () => PACKET),
        sequence,
        done === packets ? 0x04 : 0,
        granule,
      ),
    )
  }
  return concat(pages)
}

/** One Ogg page holding whole packets (each under 255 bytes) of stream 1. */
function oggPage(packets: Uint8Array[], sequence: number, flags: number, granule: bigint): Uint8Array {
  const lacing = packets.flatMap((p) => (p.length < 255 ? [p.length] : [255, p.length - 255]))
  const header = new Uint8Array(27 + lacing.length)
  const view = new DataView(header.buffer)
  writeAscii(header, 0, 'OggS')
  header[5] = flags
  view.setBigUint64(6, granule, true)
  view.setUint32(14, 1, true) // stream serial number
  view.setUint32(18, sequence, true)
  header[26] = lacing.length
  header.set(lacing, 27)
  const page = concat([header, ...packets])
  new DataView(page.buffer).setUint32(22, oggCrc(page), true)
  return page
}

const OGG_CRC_TABLE = Array.from({ length: 256 }, (_, i) => {
  let r = i << 24
  for (let k = 0; k < 8; k++) r = r & 0x80000000 ? (r << 1) ^ 0x04c11db7 : r << 1
  return r >>> 0
})

function oggCrc(bytes: Uint8Array): number {
  let crc = 0
  for (const byte of bytes) crc = ((crc << 8) ^ OGG_CRC_TABLE[((crc >>> 24) ^ byte) & 0xff]!) >>> 0
  return crc
}

/** A valid 1×1 PNG. */
export function pngFile(): Uint8Array {
  return Uint8Array.from(Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64'))
}

export function concat(parts: readonly Uint8Array[]): Uint8Array {
  const bytes = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0))
  let at = 0
  for (const part of parts) {
    bytes.set(part, at)
    at += part.length
  }
  return bytes
}

function writeAscii(bytes: Uint8Array, at: number, text: string): void {
  for (let i = 0; i < text.length; i++) bytes[at + i] = text.charCodeAt(i)
}

/** IEEE 754 80-bit extended float, which AIFF uses for its sample rate. */
function writeExtended80(view: DataView, at: number, value: number): void {
  const exponent = Math.floor(Math.log2(value))
  const mantissa = value / 2 ** exponent // in [1, 2)
  view.setUint16(at, 16_383 + exponent)
  const high = Math.floor(mantissa * 2 ** 31)
  view.setUint32(at + 2, high)
  view.setUint32(at + 6, Math.floor((mantissa * 2 ** 31 - high) * 2 ** 32))
}

function clamp(sample: number): number {
  return Math.max(-1, Math.min(1, sample))
}
