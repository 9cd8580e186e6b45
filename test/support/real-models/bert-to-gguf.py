"""
A BERT (WordPiece) sentence-embedding model, as Hugging Face files, to an F16 GGUF: what the pinned
llama.cpp's convert_hf_to_gguf.py writes for `BertModel` (conversion/bert.py and base.py), without
torch or transformers. Those two import torch at the top, and PyPI's Linux torch brings gigabytes
of CUDA libraries; this uses the pinned gguf-py (names, metadata, special tokens, writer), numpy
and `tokenizers`.

    python bert-to-gguf.py MODEL_DIR OUT.gguf LLAMA_CPP_SOURCE
"""
import ast
import json
import logging
import sys
from hashlib import sha256
from pathlib import Path

model_dir, out_path, llama_source = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
sys.path.insert(0, str(llama_source / "gguf-py"))

import gguf  # noqa: E402
import numpy as np  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

# gguf-py warns that it has no key for the CLS token (the official converter too): nothing is lost.
logging.getLogger("gguf.vocab").setLevel(logging.ERROR)

ARCH = gguf.MODEL_ARCH.BERT
# Tensors the converter leaves in F32 whatever the output type (prepare_tensors).
F32_KINDS = (gguf.MODEL_TENSOR.POS_EMBD, gguf.MODEL_TENSOR.TOKEN_TYPES)
NUMPY_DTYPES = {"F32": np.float32, "F16": np.float16}


def pre_tokenizer_name(tokenizer: Tokenizer) -> str:
    """The converter names the pre-tokenizer by hashing how it encodes a test text; we read its table."""
    source = ast.parse((llama_source / "conversion/base.py").read_text(encoding="utf-8"))
    function = next(n for n in ast.walk(source) if isinstance(n, ast.FunctionDef) and n.name == "get_vocab_base_pre")
    text = next(n.value.value for n in ast.walk(function) if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "chktxt")
    digest = sha256(str(tokenizer.encode(text).ids).encode()).hexdigest()
    for node in ast.walk(function):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and getattr(node.test.comparators[0], "value", None) == digest:
            return node.body[0].value.value
    raise SystemExit(f"the pinned converter does not know this pre-tokenizer ({digest})")


def add_tensors(writer: gguf.GGUFWriter, blocks: int) -> None:
    names = gguf.get_tensor_name_map(ARCH, blocks)
    with gguf.utility.SafetensorsLocal(model_dir / "model.safetensors") as tensors:
        for name, tensor in tensors.items():
            name = name.removeprefix("bert.")
            # The pooler and the masked-LM head are training-only; llama.cpp pools by itself.
            if name in ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias") or name.startswith("cls."):
                continue
            new_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
            if new_name is None:
                raise SystemExit(f"cannot map tensor {name}")
            data = tensor.mmap_bytes().view(NUMPY_DTYPES[tensor.dtype]).reshape(tensor.shape).astype(np.float32)
            keep_f32 = data.ndim <= 1 or new_name.endswith("_norm.weight") or not new_name.endswith(".weight") \
                or any(new_name == gguf.TENSOR_NAMES[kind] + ".weight" for kind in F32_KINDS)
            qtype = gguf.GGMLQuantizationType.F32 if keep_f32 else gguf.GGMLQuantizationType.F16
            writer.add_tensor(new_name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)


def add_parameters(writer: gguf.GGUFWriter, config: dict) -> None:
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_layer_norm_eps(config["layer_norm_eps"])
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_causal_attention(False)
    pooling = sentence_transformers_pooling()
    if pooling is not None:
        writer.add_pooling_type(pooling)


def sentence_transformers_pooling():
    modules = model_dir / "modules.json"
    if not modules.is_file():
        return None
    for module in json.loads(modules.read_text(encoding="utf-8")):
        if module["type"].endswith("Pooling"):
            pooling = json.loads((model_dir / module["path"] / "config.json").read_text(encoding="utf-8"))
            if pooling.get("pooling_mode_mean_tokens"):
                return gguf.PoolingType.MEAN
            if pooling.get("pooling_mode_cls_token"):
                return gguf.PoolingType.CLS
            raise SystemExit("only mean and CLS pooling are supported")
    return None


def add_vocab(writer: gguf.GGUFWriter, config: dict) -> None:
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    # transformers' encode() neither truncates nor pads unless asked, whatever tokenizer.json says.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    by_id = {i: token for token, i in vocab.items()}
    added = tokenizer.get_added_tokens_decoder()
    if not all(token.special for token in added.values()):
        # The converter treats those apart (USER_DEFINED, re-normalized); no model here has any.
        raise SystemExit("added tokens that are not special are not supported")
    tokens: list[str] = []
    types: list[int] = []
    for i in range(config["vocab_size"]):
        token = by_id.get(i)
        if token is None:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        elif i in added:
            tokens.append(token)
            types.append(gguf.TokenType.CONTROL)
        else:
            # llama.cpp's WordPiece marks word starts with "▁" instead of marking pieces with "##".
            tokens.append(token[2:] if token.startswith("##") else "\u2581" + token)
            types.append(gguf.TokenType.NORMAL)
    writer.add_token_type_count(config.get("type_vocab_size", 1))
    writer.add_tokenizer_model("bert")
    writer.add_tokenizer_pre(pre_tokenizer_name(tokenizer))
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    gguf.SpecialVocab(model_dir, n_vocab=len(tokens)).add_to_gguf(writer)


def main() -> None:
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    if config.get("architectures") != ["BertModel"]:
        raise SystemExit(f"not a BertModel: {config.get('architectures')}")
    writer = gguf.GGUFWriter(path=None, arch=gguf.MODEL_ARCH_NAMES[ARCH])
    add_tensors(writer, config["num_hidden_layers"])
    # The same order of keys as the converter: type, model card, parameters, vocabulary.
    total, shared, expert, experts = writer.get_total_parameter_count()
    metadata = gguf.Metadata.load(None, model_dir, None, total)
    metadata.name = metadata.name or model_dir.name
    metadata.size_label = metadata.size_label or gguf.size_label(total, shared, expert, experts)
    writer.add_type(gguf.GGUFType.MODEL)
    metadata.set_gguf_meta_model(writer)
    add_parameters(writer, config)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    add_vocab(writer, config)
    writer.write_header_to_file(path=out_path)
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


main()
