#!/usr/bin/env python3
"""Convert a CTranslate2 Whisper model (faster-whisper layout: model.bin + config.json
[+ vocabulary.txt]) into whisper.cpp's legacy ggml model file (ggml-*.bin).

numpy only: no torch, no ctranslate2, no transformers.

Output layout (whisper.cpp models/convert-pt-to-ggml.py, src/whisper.cpp whisper_model_load):
  u32 magic 0x67676d6c
  i32 x 11 hparams: n_vocab n_audio_ctx n_audio_state n_audio_head n_audio_layer
                    n_text_ctx n_text_state n_text_head n_text_layer n_mels ftype
  mel filters: i32 n_mel, i32 n_fft(=201), f32[n_mel*n_fft]
  vocab: i32 count, then for each text token (rank order) i32 len + raw bytes
  tensors: i32 n_dims, i32 name_len, i32 ttype (0=F32,1=F16), i32 ne[n_dims] (reversed numpy
           shape), name bytes, raw data
F16 for >=2-D weights (incl. conv weights and token embedding); F32 for 1-D tensors,
conv biases (reshaped to [n,1]) and both positional embeddings, as whisper.cpp's converter does.

Usage (test/support/real-models/fetch.ts runs it, then check.py):
  convert.py MODEL_DIR OUT.bin
"""
import argparse
import hashlib
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ct2_reader import CT2Model  # noqa: E402
from mel_filters import mel_filters  # noqa: E402

GGML_MAGIC = 0x67676D6C
EOT = "<|endoftext|>"


# ---------------------------------------------------------------- vocabulary
def bytes_to_unicode():
    """GPT-2's byte <-> unicode table (openai/gpt-2 src/encoder.py)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


_BYTE_DECODER = {v: k for k, v in bytes_to_unicode().items()}


def vocab_from_ct2_txt(path):
    """CTranslate2 vocabulary.txt: one token per line, GPT-2 byte-level unicode form.
    Text tokens are those before '<|endoftext|>'."""
    with open(path, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if EOT not in lines:
        raise ValueError("%s: no %s token" % (path, EOT))
    n_text = lines.index(EOT)
    return [bytes(_BYTE_DECODER[c] for c in tok) for tok in lines[:n_text]], len(lines)


# ---------------------------------------------------------------- model mapping
def _layer_count(m, prefix):
    n = 0
    while m.has("%s/layer_%d/ffn/linear_0/weight" % (prefix, n)):
        n += 1
    return n


def _scalar(m, name, default=None):
    if not m.has(name):
        return default
    return m.get(name).item()


def check_spec(m):
    """Refuse anything whisper.cpp's graph cannot represent."""
    if m.spec_name != "WhisperSpec":
        raise ValueError("not a Whisper model: spec %r" % m.spec_name)
    problems = []
    if m.has("decoder/scale_embeddings"):
        se = _scalar(m, "decoder/scale_embeddings")
        # bool (int8): True means multiply by sqrt(d_model); a float is the factor itself.
        ok = (se == 0) if m.raw_dtype["decoder/scale_embeddings"] == "int8" else (se == 1.0)
        if not ok:
            problems.append("decoder/scale_embeddings=%r" % se)
    if _scalar(m, "decoder/pre_norm", 1) != 1:
        problems.append("decoder not pre-norm")
    if _scalar(m, "decoder/activation", 3) != 3:
        problems.append("decoder activation %r != GELU(3)" % _scalar(m, "decoder/activation"))
    if _scalar(m, "decoder/alibi", 0) != 0:
        problems.append("alibi")
    for n in list(m.variables) + list(m.aliases):
        if n.endswith("queries_scale") or "layernorm_embedding" in n or n.endswith("relative_position_keys"):
            problems.append("unexpected variable %s" % n)
    if m.has("decoder/projection/bias"):
        problems.append("decoder/projection has a bias (whisper.cpp has none)")
    if m.has("decoder/projection/weight"):
        tied = m.aliases.get("decoder/projection/weight") == "decoder/embeddings/weight" or np.array_equal(
            m.get("decoder/projection/weight"), m.get("decoder/embeddings/weight"))
        if not tied:
            problems.append("output projection not tied to the token embedding")
    if problems:
        raise ValueError("unsupported CTranslate2 Whisper model: " + "; ".join(problems))


def hparams_of(m):
    conv1 = m.get("encoder/conv1/weight")
    emb = m.get("decoder/embeddings/weight")
    return {
        "n_vocab": emb.shape[0],
        "n_audio_ctx": m.get("encoder/position_encodings/encodings").shape[0],
        "n_audio_state": conv1.shape[0],
        "n_audio_head": int(_scalar(m, "encoder/num_heads")),
        "n_audio_layer": _layer_count(m, "encoder"),
        "n_text_ctx": m.get("decoder/position_encodings/encodings").shape[0],
        "n_text_state": emb.shape[1],
        "n_text_head": int(_scalar(m, "decoder/num_heads")),
        "n_text_layer": _layer_count(m, "decoder"),
        "n_mels": conv1.shape[1],
    }


def _split(a, parts, idx):
    n = a.shape[0] // parts
    return a[idx * n:(idx + 1) * n]


def mapped_tensors(m, hp):
    """Yield (ggml_name, numpy array float32, source description) in OpenAI state_dict order.
    Fusions undone (CTranslate2 converters/transformers.py BartLoader.set_attention):
      self-attention  linear_0 = [q; k; v] (bias [bq; 0; bv]), linear_1 = out
      cross-attention linear_0 = q, linear_1 = [k; v] (bias [0; bv]), linear_2 = out
    No value scaling is applied: CTranslate2 scales queries at run time (no queries_scale saved)."""
    f = m.as_float32
    d_a, d_t = hp["n_audio_state"], hp["n_text_state"]

    def attn_self(src, dst, d):
        w, b = f(src + "/linear_0/weight"), f(src + "/linear_0/bias")
        assert w.shape == (3 * d, d) and b.shape == (3 * d,), (src, w.shape, b.shape)
        kb = _split(b, 3, 1)
        if np.any(kb != 0):
            raise ValueError("%s: key bias slice is not zero (max %g); whisper.cpp has no key bias"
                             % (src, np.abs(kb).max()))
        yield dst + ".attn.query.weight", _split(w, 3, 0), src + "/linear_0/weight[0:d]"
        yield dst + ".attn.query.bias", _split(b, 3, 0), src + "/linear_0/bias[0:d]"
        yield dst + ".attn.key.weight", _split(w, 3, 1), src + "/linear_0/weight[d:2d]"
        yield dst + ".attn.value.weight", _split(w, 3, 2), src + "/linear_0/weight[2d:3d]"
        yield dst + ".attn.value.bias", _split(b, 3, 2), src + "/linear_0/bias[2d:3d]"
        yield dst + ".attn.out.weight", f(src + "/linear_1/weight"), src + "/linear_1/weight"
        yield dst + ".attn.out.bias", f(src + "/linear_1/bias"), src + "/linear_1/bias"
        yield dst + ".attn_ln.weight", f(src + "/layer_norm/gamma"), src + "/layer_norm/gamma"
        yield dst + ".attn_ln.bias", f(src + "/layer_norm/beta"), src + "/layer_norm/beta"

    def attn_cross(src, dst, d):
        wkv, bkv = f(src + "/linear_1/weight"), f(src + "/linear_1/bias")
        assert wkv.shape == (2 * d, d) and bkv.shape == (2 * d,), (src, wkv.shape)
        kb = _split(bkv, 2, 0)
        if np.any(kb != 0):
            raise ValueError("%s: cross key bias slice is not zero" % src)
        yield dst + ".cross_attn.query.weight", f(src + "/linear_0/weight"), src + "/linear_0/weight"
        yield dst + ".cross_attn.query.bias", f(src + "/linear_0/bias"), src + "/linear_0/bias"
        yield dst + ".cross_attn.key.weight", _split(wkv, 2, 0), src + "/linear_1/weight[0:d]"
        yield dst + ".cross_attn.value.weight", _split(wkv, 2, 1), src + "/linear_1/weight[d:2d]"
        yield dst + ".cross_attn.value.bias", _split(bkv, 2, 1), src + "/linear_1/bias[d:2d]"
        yield dst + ".cross_attn.out.weight", f(src + "/linear_2/weight"), src + "/linear_2/weight"
        yield dst + ".cross_attn.out.bias", f(src + "/linear_2/bias"), src + "/linear_2/bias"
        yield dst + ".cross_attn_ln.weight", f(src + "/layer_norm/gamma"), src + "/layer_norm/gamma"
        yield dst + ".cross_attn_ln.bias", f(src + "/layer_norm/beta"), src + "/layer_norm/beta"

    def mlp(src, dst):
        yield dst + ".mlp.0.weight", f(src + "/linear_0/weight"), src + "/linear_0/weight"
        yield dst + ".mlp.0.bias", f(src + "/linear_0/bias"), src + "/linear_0/bias"
        yield dst + ".mlp.2.weight", f(src + "/linear_1/weight"), src + "/linear_1/weight"
        yield dst + ".mlp.2.bias", f(src + "/linear_1/bias"), src + "/linear_1/bias"
        yield dst + ".mlp_ln.weight", f(src + "/layer_norm/gamma"), src + "/layer_norm/gamma"
        yield dst + ".mlp_ln.bias", f(src + "/layer_norm/beta"), src + "/layer_norm/beta"

    yield "encoder.positional_embedding", f("encoder/position_encodings/encodings"), "encoder/position_encodings/encodings"
    for i in (1, 2):
        yield "encoder.conv%d.weight" % i, f("encoder/conv%d/weight" % i), "encoder/conv%d/weight" % i
        yield "encoder.conv%d.bias" % i, f("encoder/conv%d/bias" % i).reshape(-1, 1), "encoder/conv%d/bias (reshaped [n,1])" % i
    for i in range(hp["n_audio_layer"]):
        yield from attn_self("encoder/layer_%d/self_attention" % i, "encoder.blocks.%d" % i, d_a)
        yield from mlp("encoder/layer_%d/ffn" % i, "encoder.blocks.%d" % i)
    yield "encoder.ln_post.weight", f("encoder/layer_norm/gamma"), "encoder/layer_norm/gamma"
    yield "encoder.ln_post.bias", f("encoder/layer_norm/beta"), "encoder/layer_norm/beta"
    yield "decoder.positional_embedding", f("decoder/position_encodings/encodings"), "decoder/position_encodings/encodings"
    yield "decoder.token_embedding.weight", f("decoder/embeddings/weight"), "decoder/embeddings/weight"
    for i in range(hp["n_text_layer"]):
        yield from attn_self("decoder/layer_%d/self_attention" % i, "decoder.blocks.%d" % i, d_t)
        yield from attn_cross("decoder/layer_%d/attention" % i, "decoder.blocks.%d" % i, d_t)
        yield from mlp("decoder/layer_%d/ffn" % i, "decoder.blocks.%d" % i)
    yield "decoder.ln.weight", f("decoder/layer_norm/gamma"), "decoder/layer_norm/gamma"
    yield "decoder.ln.bias", f("decoder/layer_norm/beta"), "decoder/layer_norm/beta"


F32_NAMES = {"encoder.conv1.bias", "encoder.conv2.bias", "encoder.positional_embedding", "decoder.positional_embedding"}


def ggml_type_for(name, arr, use_f16):
    """convert-pt-to-ggml.py rule: F32 if n_dims < 2 or a conv bias / positional embedding."""
    if not use_f16 or arr.ndim < 2 or name in F32_NAMES:
        return 0
    return 1


# ---------------------------------------------------------------- main
def load_vocab(model_dir, hp, log=print):
    """The text tokens from the model's own vocabulary.txt, as raw bytes in rank order."""
    multilingual = hp["n_vocab"] >= 51865
    expected_text = 50257 if multilingual else 50256
    tokens, total = vocab_from_ct2_txt(os.path.join(model_dir, "vocabulary.txt"))
    if total != hp["n_vocab"]:
        raise ValueError("vocabulary.txt has %d entries, the model %d" % (total, hp["n_vocab"]))
    if len(tokens) != expected_text:
        raise ValueError("expected %d text tokens for a %s model, got %d"
                         % (expected_text, "multilingual" if multilingual else "English-only", len(tokens)))
    log("vocabulary: %d text tokens (%s)" % (len(tokens), "multilingual" if multilingual else "English-only"))
    return tokens


def convert(model_dir, out_path, use_f16=True, log=print):
    m = CT2Model(os.path.join(model_dir, "model.bin"))
    log("CTranslate2 binary v%d, %s rev %d, %d variables, %d aliases"
        % (m.binary_version, m.spec_name, m.spec_revision, len(m.variables), len(m.aliases)))
    check_spec(m)
    quant = sorted({m.raw_dtype[v] for v in m.variables if m.raw_dtype[v] in ("int8", "int16") and m.variables[v].ndim >= 2})
    if quant:
        raise ValueError("%s-quantized CTranslate2 weights are not converted: take the float16 model" % "/".join(quant))
    hp = hparams_of(m)
    hp["ftype"] = 1 if use_f16 else 0
    log("hparams: %s" % hp)
    tokens = load_vocab(model_dir, hp, log)
    filters = mel_filters(sr=16000, n_fft=400, n_mels=hp["n_mels"])

    used = set()
    tmp = out_path + ".part"
    with open(tmp, "wb") as fo:
        fo.write(struct.pack("<I", GGML_MAGIC))
        for k in ("n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer", "n_text_ctx",
                  "n_text_state", "n_text_head", "n_text_layer", "n_mels", "ftype"):
            fo.write(struct.pack("<i", hp[k]))
        fo.write(struct.pack("<ii", *filters.shape))
        fo.write(filters.astype("<f4").tobytes())
        fo.write(struct.pack("<i", len(tokens)))
        for t in tokens:
            fo.write(struct.pack("<i", len(t)))
            fo.write(t)
        n = 0
        for name, arr, src in mapped_tensors(m, hp):
            used.add(src.split("[")[0].split(" ")[0])
            ttype = ggml_type_for(name, arr, use_f16)
            data = np.ascontiguousarray(arr, dtype="<f2" if ttype == 1 else "<f4")
            nb = name.encode("utf-8")
            fo.write(struct.pack("<iii", data.ndim, len(nb), ttype))
            fo.write(struct.pack("<%di" % data.ndim, *reversed(data.shape)))
            fo.write(nb)
            fo.write(data.tobytes())
            n += 1
    os.replace(tmp, out_path)
    meta = {"encoder/num_heads", "decoder/num_heads", "decoder/scale_embeddings", "decoder/pre_norm",
            "decoder/activation", "decoder/alibi", "decoder/alignment_heads", "decoder/alignment_layer",
            "decoder/start_from_zero_embedding"}
    unused = [v for v in m.variables if v not in used and v not in meta and not v.endswith("_scale")]
    log("wrote %d tensors to %s (%d bytes)" % (n, out_path, os.path.getsize(out_path)))
    if unused:
        raise ValueError("source variables not written: %s" % unused)
    h = hashlib.sha256()
    with open(out_path, "rb") as fi:
        for chunk in iter(lambda: fi.read(1 << 20), b""):
            h.update(chunk)
    log("sha256 %s" % h.hexdigest())
    return hp


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", help="directory with model.bin (CTranslate2 WhisperSpec)")
    ap.add_argument("out", help="output ggml-*.bin")
    ap.add_argument("--f32", action="store_true", help="write all tensors as F32 (ftype 0)")
    a = ap.parse_args()
    convert(a.model_dir, a.out, use_f16=not a.f32)


if __name__ == "__main__":
    main()
