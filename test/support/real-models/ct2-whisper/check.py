#!/usr/bin/env python3
"""Re-read a ggml whisper file written by convert_ct2_whisper.py and check it against the
CTranslate2 source, independently of the converter's mapping code.

  check.py MODEL_DIR GGML.bin [--report FILE]

Checks:
  * every tensor whisper.cpp (src/whisper.cpp whisper_model_load / whisper-arch.h) creates is
    present, with its ggml shape ne[] and type (F16 weights, F32 biases/norms/pos-emb), no extra
    tensor, count = 11 + 15*n_audio_layer + 24*n_text_layer
  * every tensor equals the source variable after undoing CTranslate2's fusions (max |diff|,
    and bit equality where the source is F16)
  * hparams, the mel block (numpy's slaney filters, checked once bit-identical to librosa 0.11 and to
    whisper's own mel_filters.npz), the vocabulary block (the model's vocabulary.txt)
Exit status 1 on any failure.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ct2_reader import CT2Model  # noqa: E402
from ggml_reader import GGMLWhisper  # noqa: E402

FAIL = []


def check(cond, msg):
    print(("  ok   " if cond else "  FAIL ") + msg)
    if not cond:
        FAIL.append(msg)


def expected_tensors(hp):
    """name -> (ggml ne tuple, ggml type) as created in whisper_model_load (wtype=vtype=F16 for ftype 1)."""
    W = 1 if hp["ftype"] == 1 else 0
    F32 = 0
    a, t = hp["n_audio_state"], hp["n_text_state"]
    e = {
        "encoder.positional_embedding": ((a, hp["n_audio_ctx"]), F32),
        "encoder.conv1.weight": ((3, hp["n_mels"], a), W),
        "encoder.conv1.bias": ((1, a), F32),
        "encoder.conv2.weight": ((3, a, a), W),
        "encoder.conv2.bias": ((1, a), F32),
        "encoder.ln_post.weight": ((a,), F32),
        "encoder.ln_post.bias": ((a,), F32),
        "decoder.positional_embedding": ((t, hp["n_text_ctx"]), F32),
        "decoder.token_embedding.weight": ((t, hp["n_vocab"]), W),
        "decoder.ln.weight": ((t,), F32),
        "decoder.ln.bias": ((t,), F32),
    }

    def block(p, d, cross):
        r = {
            p + ".mlp_ln.weight": ((d,), F32), p + ".mlp_ln.bias": ((d,), F32),
            p + ".mlp.0.weight": ((d, 4 * d), W), p + ".mlp.0.bias": ((4 * d,), F32),
            p + ".mlp.2.weight": ((4 * d, d), W), p + ".mlp.2.bias": ((d,), F32),
        }
        for at in ["attn"] + (["cross_attn"] if cross else []):
            r.update({
                p + ".%s_ln.weight" % at: ((d,), F32), p + ".%s_ln.bias" % at: ((d,), F32),
                p + ".%s.query.weight" % at: ((d, d), W), p + ".%s.query.bias" % at: ((d,), F32),
                p + ".%s.key.weight" % at: ((d, d), W),
                p + ".%s.value.weight" % at: ((d, d), W), p + ".%s.value.bias" % at: ((d,), F32),
                p + ".%s.out.weight" % at: ((d, d), W), p + ".%s.out.bias" % at: ((d,), F32),
            })
        return r

    for i in range(hp["n_audio_layer"]):
        e.update(block("encoder.blocks.%d" % i, a, False))
    for i in range(hp["n_text_layer"]):
        e.update(block("decoder.blocks.%d" % i, t, True))
    return e


def source_for(m, name):
    """Independent inverse mapping: ggml name -> (numpy array, description)."""
    def rows(var, k, parts):
        v = m.get(var)
        n = v.shape[0] // parts
        return v[k * n:(k + 1) * n], "%s[%d:%d]" % (var, k * n, (k + 1) * n)

    simple = {
        "encoder.positional_embedding": "encoder/position_encodings/encodings",
        "decoder.positional_embedding": "decoder/position_encodings/encodings",
        "decoder.token_embedding.weight": "decoder/embeddings/weight",
        "encoder.conv1.weight": "encoder/conv1/weight", "encoder.conv2.weight": "encoder/conv2/weight",
        "encoder.conv1.bias": "encoder/conv1/bias", "encoder.conv2.bias": "encoder/conv2/bias",
        "encoder.ln_post.weight": "encoder/layer_norm/gamma", "encoder.ln_post.bias": "encoder/layer_norm/beta",
        "decoder.ln.weight": "decoder/layer_norm/gamma", "decoder.ln.bias": "decoder/layer_norm/beta",
    }
    if name in simple:
        v = m.get(simple[name])
        if name.endswith("conv1.bias") or name.endswith("conv2.bias"):
            v = v.reshape(-1, 1)
        return v, simple[name]
    parts = name.split(".")
    side, layer, rest = parts[0], parts[2], parts[3:]
    base = "%s/layer_%s" % (side, layer)
    ln = {"weight": "gamma", "bias": "beta"}
    if rest[0] in ("mlp_ln", "attn_ln", "cross_attn_ln"):
        sub = {"mlp_ln": "ffn", "attn_ln": "self_attention", "cross_attn_ln": "attention"}[rest[0]]
        var = "%s/%s/layer_norm/%s" % (base, sub, ln[rest[1]])
        return m.get(var), var
    if rest[0] == "mlp":
        var = "%s/ffn/linear_%d/%s" % (base, {"0": 0, "2": 1}[rest[1]], rest[2])
        return m.get(var), var
    proj, kind = rest[1], rest[2]
    if rest[0] == "attn":
        if proj == "out":
            var = "%s/self_attention/linear_1/%s" % (base, kind)
            return m.get(var), var
        return rows("%s/self_attention/linear_0/%s" % (base, kind), {"query": 0, "key": 1, "value": 2}[proj], 3)
    if rest[0] == "cross_attn":
        if proj == "query":
            var = "%s/attention/linear_0/%s" % (base, kind)
            return m.get(var), var
        if proj == "out":
            var = "%s/attention/linear_2/%s" % (base, kind)
            return m.get(var), var
        return rows("%s/attention/linear_1/%s" % (base, kind), {"key": 0, "value": 1}[proj], 2)
    raise KeyError(name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("ggml")
    ap.add_argument("--report", help="write per-tensor table here")
    a = ap.parse_args()

    m = CT2Model(os.path.join(a.model_dir, "model.bin"))
    g = GGMLWhisper(a.ggml)
    hp = g.hparams
    print("== %s\n   size %d, hparams %s" % (a.ggml, g.size, hp))

    print("-- hparams vs CTranslate2 source")
    emb = m.get("decoder/embeddings/weight")
    conv1 = m.get("encoder/conv1/weight")
    import re
    nl = lambda p: len({k.split("/")[1] for k in m.variables if re.match(p + r"/layer_\d+/", k)})
    want = dict(n_vocab=emb.shape[0], n_audio_ctx=m.get("encoder/position_encodings/encodings").shape[0],
                n_audio_state=conv1.shape[0], n_audio_head=int(m.get("encoder/num_heads")),
                n_audio_layer=nl("encoder"), n_text_ctx=m.get("decoder/position_encodings/encodings").shape[0],
                n_text_state=emb.shape[1], n_text_head=int(m.get("decoder/num_heads")),
                n_text_layer=nl("decoder"), n_mels=conv1.shape[1])
    for k, v in want.items():
        check(hp[k] == v, "%s = %d (source %d)" % (k, hp[k], v))
    check(hp["ftype"] in (0, 1), "ftype = %d" % hp["ftype"])

    print("-- tensor inventory vs whisper.cpp whisper_model_load")
    exp = expected_tensors(hp)
    n_expected = 11 + 15 * hp["n_audio_layer"] + 24 * hp["n_text_layer"]
    check(len(exp) == n_expected, "expected-table size %d == 11+15*La+24*Lt = %d" % (len(exp), n_expected))
    missing = [n for n in exp if n not in g.tensors]
    extra = [n for n in g.tensors if n not in exp]
    check(not missing, "no missing tensors %s" % missing[:5])
    check(not extra, "no unknown tensors (whisper.cpp rejects them) %s" % extra[:5])
    check(len(g.order) == len(set(g.order)) == n_expected, "tensor count %d, unique" % len(g.order))
    bad_shape = [(n, g.tensors[n][0], exp[n][0]) for n in exp if n in g.tensors and g.tensors[n][0] != exp[n][0]]
    bad_type = [(n, g.tensors[n][1], exp[n][1]) for n in exp if n in g.tensors and g.tensors[n][1] != exp[n][1]]
    check(not bad_shape, "all shapes (ggml ne) match %s" % bad_shape[:3])
    check(not bad_type, "all types match (F16 weights, F32 biases/norms/pos-emb/conv-bias) %s" % bad_type[:3])

    print("-- values vs CTranslate2 variables (after undoing fusions)")
    rows = []
    worst = 0.0
    not_bitexact = []
    for n in g.order:
        arr = g.tensors[n][2]
        src, desc = source_for(m, n)
        src32 = src.astype(np.float32) if src.dtype != np.int8 else None
        if src32 is None:
            raise SystemExit("int8 sources: compare against dequantised values not implemented here")
        if arr.shape != src32.shape:
            check(False, "%s shape %s vs source %s %s" % (n, arr.shape, desc, src32.shape))
            continue
        d = float(np.abs(arr.astype(np.float32) - src32).max())
        worst = max(worst, d)
        bit = (src.dtype == np.float16 and arr.dtype == np.float16 and np.array_equal(
            arr.view(np.uint16), np.ascontiguousarray(src).view(np.uint16))) or (
            src.dtype == np.float16 and arr.dtype == np.float32 and np.array_equal(arr, src32))
        if not bit:
            not_bitexact.append(n)
        rows.append("%-42s %-18s %-4s <- %-52s max|diff|=%g%s" % (
            n, str(g.tensors[n][0]), "F16" if g.tensors[n][1] else "F32", desc, d, "" if bit else "  (not bit-exact)"))
    check(worst == 0.0, "max |diff| over all %d tensors = %g" % (len(rows), worst))
    check(not not_bitexact, "every tensor bit-exact to its F16 source %s" % not_bitexact[:3])
    # fused slices that are dropped must be zero
    zs = []
    for i in range(hp["n_audio_layer"]):
        b = m.get("encoder/layer_%d/self_attention/linear_0/bias" % i); d = b.shape[0] // 3
        zs.append(float(np.abs(b[d:2 * d].astype(np.float32)).max()))
    for i in range(hp["n_text_layer"]):
        b = m.get("decoder/layer_%d/self_attention/linear_0/bias" % i); d = b.shape[0] // 3
        zs.append(float(np.abs(b[d:2 * d].astype(np.float32)).max()))
        b = m.get("decoder/layer_%d/attention/linear_1/bias" % i); d = b.shape[0] // 2
        zs.append(float(np.abs(b[:d].astype(np.float32)).max()))
    check(max(zs) == 0.0, "dropped key-bias slices are all zero (%d slices)" % len(zs))
    ali = m.aliases.get("decoder/projection/weight")
    check(ali == "decoder/embeddings/weight", "decoder/projection/weight is an alias of the embeddings (tied): %s" % ali)
    check(not any(k.endswith("queries_scale") for k in m.variables), "no queries_scale variable (no pre-scaled queries)")
    if a.report:
        with open(a.report, "w") as f:
            f.write("\n".join(rows) + "\n")
        print("   per-tensor table -> %s" % a.report)

    print("-- mel filter block")
    from mel_filters import mel_filters
    mel = mel_filters(n_mels=hp["n_mels"])
    check(g.filters.shape == (hp["n_mels"], 201), "shape %s" % (g.filters.shape,))
    check(g.filters.tobytes() == mel.astype("<f4").tobytes(), "bit-identical to numpy slaney mel (max|diff| %g)"
          % np.abs(g.filters - mel).max())

    print("-- vocabulary block")
    n_text = 50257 if hp["n_vocab"] >= 51865 else 50256
    check(len(g.tokens) == n_text, "%d text tokens (%s)" % (len(g.tokens), "multilingual" if n_text == 50257 else "English-only"))
    vt = os.path.join(a.model_dir, "vocabulary.txt")
    if os.path.exists(vt):
        from convert import vocab_from_ct2_txt
        toks, _ = vocab_from_ct2_txt(vt)
        check(g.tokens == toks, "equal to %s decoded with GPT-2 byte decoder" % vt)
    print("== %s" % ("ALL CHECKS PASSED" if not FAIL else "%d FAILURES" % len(FAIL)))
    sys.exit(1 if FAIL else 0)


if __name__ == "__main__":
    main()
