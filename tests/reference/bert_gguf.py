#!/usr/bin/env python3
"""Converts a Hugging Face BERT sentence-transformers directory (e.g.
all-MiniLM-L6-v2) into a GGUF laid out as llama.cpp's convert_hf_to_gguf.py
writes BERT models, for the tests of Rill's BERT GGUF loading:

- tensor names from the `gguf` package's own BERT map (gguf.get_tensor_name_map,
  llama.cpp's tensor_mapping.py), 1-D tensors (norms, biases) and
  token_types in F32, matrices in --outtype (f32, f16 or q8_0 through
  gguf.quants);
- metadata through GGUFWriter's helpers: bert.* sizes, layer_norm_epsilon,
  causal_attention false, pooling_type from the sentence-transformers Pooling
  module (mean or cls);
- the WordPiece vocabulary as llama.cpp stores it: word-start pieces get the
  U+2581 "phantom space", "##" continuations lose their prefix, [BRACKETED]
  tokens stay; added special tokens are CONTROL; tokenizer.ggml.model "bert",
  pre "bert-bge" (the pre-tokenizer llama.cpp names bert-base-uncased
  vocabularies by), and the [UNK]/[SEP]/[PAD]/[CLS]/[MASK] ids under the
  keys llama.cpp's own ggml-vocab-bert-bge.gguf has.

  bert_gguf.py <hf_dir> <out.gguf> [--outtype f16] [--pooling_type N]

--pooling_type writes bert.pooling_type = N (llama.cpp's numbering: 1 mean,
2 cls, 3 last, 4 rank) instead of the directory's own.
"""
import argparse
import json
import os
import struct

import numpy as np

import gguf
from gguf.constants import GGMLQuantizationType, MODEL_ARCH, MODEL_ARCH_NAMES, TokenType


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            start, end = info["data_offsets"]
            f.seek(base + start)
            a = np.frombuffer(f.read(end - start), dtype=dtypes[info["dtype"]])
            out[name] = a.reshape(info["shape"])
        return out


def pooling_type(hf_dir):
    modules = os.path.join(hf_dir, "modules.json")
    if not os.path.exists(modules):
        return None
    for m in json.load(open(modules)):
        if m["type"].endswith("Pooling"):
            cfg = json.load(open(os.path.join(hf_dir, m["path"], "config.json")))
            if cfg.get("pooling_mode_cls_token"):
                return gguf.PoolingType.CLS
            if cfg.get("pooling_mode_mean_tokens"):
                return gguf.PoolingType.MEAN
    return None


def phantom(token):
    if token.startswith("[") and token.endswith("]"):
        return token
    if token.startswith("##"):
        return token[2:]
    return "\u2581" + token


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_dir")
    ap.add_argument("out")
    ap.add_argument("--outtype", choices=["f32", "f16", "q8_0"], default="f16")
    ap.add_argument("--pooling_type", type=int)
    a = ap.parse_args()

    config = json.load(open(os.path.join(a.hf_dir, "config.json")))
    tok = json.load(open(os.path.join(a.hf_dir, "tokenizer.json")))
    layers = config["num_hidden_layers"]
    arch = MODEL_ARCH_NAMES[MODEL_ARCH.BERT]
    w = gguf.GGUFWriter(a.out, arch)
    w.add_name(os.path.basename(os.path.normpath(a.hf_dir)))
    w.add_context_length(config["max_position_embeddings"])
    w.add_embedding_length(config["hidden_size"])
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_block_count(layers)
    w.add_head_count(config["num_attention_heads"])
    w.add_layer_norm_eps(config.get("layer_norm_eps", 1e-12))
    w.add_causal_attention(False)
    pool = pooling_type(a.hf_dir) if a.pooling_type is None else a.pooling_type
    if pool is not None:
        w.add_uint32(f"{arch}.pooling_type", int(pool))

    vocab = tok["model"]["vocab"]
    tokens = [None] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    special = {t["content"]: t["id"] for t in tok.get("added_tokens", []) if t.get("special")}
    types = [TokenType.CONTROL if t in special else TokenType.NORMAL for t in tokens]
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("bert-bge")
    w.add_token_list([phantom(t) for t in tokens])
    w.add_token_types(types)
    w.add_token_type_count(config.get("type_vocab_size", 2))
    # The special ids llama.cpp's BERT GGUFs carry (its ggml-vocab-bert-bge.gguf:
    # unknown, separator, padding, cls, mask; no bos/eos).
    for name, key in (("[UNK]", "unknown"), ("[SEP]", "seperator"), ("[PAD]", "padding"),
                      ("[CLS]", "cls"), ("[MASK]", "mask")):
        if name in vocab:
            w.add_uint32(f"tokenizer.ggml.{key}_token_id", vocab[name])

    names = gguf.get_tensor_name_map(MODEL_ARCH.BERT, layers)
    qtype = {"f32": GGMLQuantizationType.F32, "f16": GGMLQuantizationType.F16,
             "q8_0": GGMLQuantizationType.Q8_0}[a.outtype]
    for hf_name, data in read_safetensors(os.path.join(a.hf_dir, "model.safetensors")).items():
        name = hf_name[5:] if hf_name.startswith("bert.") else hf_name
        if name.endswith("position_ids") or name.startswith("pooler."):
            continue
        gguf_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise SystemExit(f"{hf_name}: no GGUF name")
        data = data.astype(np.float32)
        t = qtype
        if data.ndim == 1 or gguf_name.startswith("token_types"):
            t = GGMLQuantizationType.F32
        if t == GGMLQuantizationType.Q8_0 and data.shape[-1] % 32 != 0:
            t = GGMLQuantizationType.F16
        if t == GGMLQuantizationType.F32:
            w.add_tensor(gguf_name, data)
        elif t == GGMLQuantizationType.F16:
            w.add_tensor(gguf_name, data.astype(np.float16))
        else:
            w.add_tensor(gguf_name, gguf.quants.quantize(data, t), raw_dtype=t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
