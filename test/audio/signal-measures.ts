/** Measurements for comparing decodes of the same speech made through different codecs. */

export function rms(samples: Float32Array): number {
  let sum = 0
  for (const sample of samples) sum += sample * sample
  return Math.sqrt(sum / Math.max(1, samples.length))
}

export function peak(samples: Float32Array): number {
  let max = 0
  for (const sample of samples) max = Math.max(max, Math.abs(sample))
  return max
}

/** Log energy per frame (20 ms at 16 kHz): the loudness contour that survives lossy codecs. */
export function energyEnvelope(samples: Float32Array, frameLength = 320): Float64Array {
  const frames = Math.floor(samples.length / frameLength)
  const envelope = new Float64Array(frames)
  for (let frame = 0; frame < frames; frame++) {
    let sum = 0
    for (let i = frame * frameLength; i < (frame + 1) * frameLength; i++) sum += samples[i]! * samples[i]!
    envelope[frame] = Math.log10(sum / frameLength + 1e-8)
  }
  return envelope
}

/** Pearson correlation of a and b, with b shifted by `lag` elements; over the overlap. */
export function correlationAtLag(a: ArrayLike<number>, b: ArrayLike<number>, lag: number): number {
  const start = Math.max(0, -lag)
  const end = Math.min(a.length, b.length - lag)
  const count = end - start
  if (count < 2) return 0
  let meanA = 0
  let meanB = 0
  for (let i = start; i < end; i++) {
    meanA += a[i]!
    meanB += b[i + lag]!
  }
  meanA /= count
  meanB /= count
  let covariance = 0
  let varianceA = 0
  let varianceB = 0
  for (let i = start; i < end; i++) {
    const da = a[i]! - meanA
    const db = b[i + lag]! - meanB
    covariance += da * db
    varianceA += da * da
    varianceB += db * db
  }
  return covariance / Math.sqrt(varianceA * varianceB)
}

/** The best correlation over lags -maxLag..maxLag (codecs add a little delay), and that lag. */
export function bestCorrelation(a: ArrayLike<number>, b: ArrayLike<number>, maxLag: number): { correlation: number; lag: number } {
  let best = { correlation: -Infinity, lag: 0 }
  for (let lag = -maxLag; lag <= maxLag; lag++) {
    const correlation = correlationAtLag(a, b, lag)
    if (correlation > best.correlation) best = { correlation, lag }
  }
  return best
}
