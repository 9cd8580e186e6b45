/**
 * Run by test/fast/audio-decode.test.ts as `tsx decode-in-worker-under-tsx.ts <file>`: proves the decode
 * worker starts when the parent process is the tsx CLI (as `npm run serve` is), not just vitest.
 */
import { decodeAudioInWorker } from '../../media/audio/decode-audio.ts'

const path = process.argv[2]
if (!path) throw new Error('usage: decode-in-worker-under-tsx.ts <audio file>')
const audio = await decodeAudioInWorker(path, { ffmpegPath: null })
console.log(JSON.stringify({ durationSeconds: audio.durationSeconds, sampleRate: audio.sampleRate, decodedBy: audio.decodedBy }))
