#!/usr/bin/env python3
"""Independent numpy reference forward pass for Llama-family and GPT-2 models.

Why this exists: the C++ engine needs a ground truth that shares no code with
it. This file re-derives every step from the published model definitions
(HF transformers' Llama/Qwen2/GPT-2 and llama.cpp's GGUF conventions) using
nothing but numpy, the `gguf` package (to parse GGUF and dequantize blocks)
and a hand-written safetensors reader (so BF16 works without torch).

Everything is computed in float64 by default so that the reference is the
"truth" a float32 C++ implementation is compared against.

Conventions kept internally (the "canonical" form):
  * tensors are named as llama.cpp names them in GGUF (token_embd.weight,
    blk.N.attn_q.weight, ...), whichever file format they came from;
  * every linear weight is a numpy array [out, in] (y = x @ W.T + b);
  * `Config.rope_pairing` says which elements RoPE rotates together:
      'adjacent' -> (x[2i], x[2i+1])      GGUF llama (q/k rows permuted by the
                                           llama.cpp converter)
      'half'     -> (x[i], x[i + d/2])    HF checkpoints, and GGUF qwen2 (NEOX)

CLI:
  python reference_model.py --model PATH --tokens 1,2,3 [--greedy N] --out logits.npy
writes float32 logits [n_tokens, vocab] for every prompt position (see
README.md for the .npy / .bin + .json sidecar formats) and prints a JSON
summary (including the greedy continuation) on stdout.
"""

import argparse
import dataclasses
import json
import math
import os
import re
import sys
import time
from typing import Dict, List, Optional

import numpy as np


# ----------------------------------------------------------------------------
# Configuration
# ----------------------------------------------------------------------------

@dataclasses.dataclass
class Config:
    arch: str                 # 'llama' (also used for qwen2) or 'gpt2'
    vocab_size: int
    hidden: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn: int
    norm_eps: float
    max_pos: int
    rope_theta: float = 10000.0
    rope_dim: int = 0         # 0 -> head_dim
    rope_pairing: str = 'adjacent'
    # None, {'type': 'linear', 'factor': f} or
    # {'type': 'llama3', 'factor', 'low_freq_factor', 'high_freq_factor',
    #  'original_max_position_embeddings'}
    rope_scaling: Optional[dict] = None
    source_arch: str = ''     # arch string as found in the file (for display)
    # Sliding-window attention: a windowed layer's query at position p sees
    # keys at positions > p - sliding_window (HF's sliding mask). 0: none.
    sliding_window: int = 0
    # Per layer: True where the window applies (None: every layer).
    sliding_layers: Optional[List[bool]] = None
    # Gemma 2 (HF Gemma2ForCausalLM): embeddings times sqrt(hidden); RMSNorm
    # weights applied as (1 + w) (norm_offset 1; llama.cpp's GGUF stores
    # w + 1 already, offset 0); GeGLU with tanh GELU; post-attention and
    # post-MLP norms (post_attention_norm / post_ffw_norm tensors); attention
    # scores scaled by attn_scale and soft-capped (cap * tanh(s / cap))
    # before the mask; final logits soft-capped.
    embed_scale: float = 1.0
    norm_offset: float = 0.0
    act: str = 'silu'          # 'silu' (SwiGLU) or 'gelu_tanh' (GeGLU)
    attn_scale: float = 0.0    # 0: 1 / sqrt(head_dim)
    attn_softcap: float = 0.0  # 0: none
    final_softcap: float = 0.0
    # Mixture of experts (Mixtral, Qwen2-MoE, Qwen3-MoE): a layer with a
    # router (blk.N.ffn_gate_inp.weight [experts, hidden]) takes a softmax
    # over the experts, keeps the n_experts_used largest probabilities
    # (renormalized to sum 1 when moe_norm) and sums those experts' SwiGLU
    # MLPs (blk.N.ffn_{gate,up,down}_exps.weight, [experts, out, in])
    # weighted by them; Qwen2-MoE adds a shared expert scaled by
    # sigmoid(blk.N.ffn_gate_inp_shexp.weight . x). Layers without a router
    # have the dense MLP.
    n_experts_used: int = 0
    moe_norm: bool = False
    # Gemma 3 (HF Gemma3ForCausalLM): the layers flagged here (the sliding
    # ones) rotate with local_rope_theta / local_rope_scaling, the others with
    # rope_theta / rope_scaling. None: one RoPE for all layers.
    local_rope_layers: Optional[List[bool]] = None
    local_rope_theta: float = 10000.0
    local_rope_scaling: Optional[dict] = None

    def uses_local_rope(self, layer):
        return bool(self.local_rope_layers and self.local_rope_layers[layer])

    def layer_window(self, layer):
        if not self.sliding_window:
            return 0
        if self.sliding_layers is None or self.sliding_layers[layer]:
            return self.sliding_window
        return 0


# ----------------------------------------------------------------------------
# Loading: GGUF
# ----------------------------------------------------------------------------

def _gguf_field(reader, key, default=None):
    field = reader.fields.get(key)
    if field is None:
        return default
    return field.contents()


def _swa_layers(pattern, n_layers, default_period):
    """Which layers slide, as llama.cpp's load_swa_pattern reads
    `<arch>.attention.sliding_window_pattern`: one flag per layer, or a period
    n (layer i slides unless i % n == n - 1; 0: every layer). Absent: the
    architecture's period."""
    if pattern is None:
        pattern = default_period
    if isinstance(pattern, (list, tuple, np.ndarray)):
        if len(pattern) != n_layers:
            raise ValueError(f'sliding_window_pattern has {len(pattern)} entries, '
                             f'expected {n_layers}')
        return [bool(v) for v in pattern]
    n = int(pattern)
    return [n == 0 or i % n < n - 1 for i in range(n_layers)]


def load_gguf(path: str, dtype=np.float64):
    """Reads a GGUF file; every tensor is dequantized with gguf.quants.

    GGUF lists shapes ne[0]-first (ne[0] = row length); GGUFReader hands back
    row-major numpy arrays, i.e. shape reversed, so a linear weight with
    ne = [in, out] arrives as [out, in] -- exactly our canonical layout.
    """
    import gguf  # imported lazily so HF-only use does not need it

    reader = gguf.GGUFReader(path)
    arch = _gguf_field(reader, 'general.architecture')
    if arch not in ('llama', 'qwen2', 'qwen3', 'gemma2', 'gemma3', 'phi3', 'gpt2', 'qwen2moe',
                    'qwen3moe'):
        raise ValueError(f'unsupported GGUF architecture {arch!r}')

    def key(name, default=None):
        return _gguf_field(reader, f'{arch}.{name}', default)

    weights = {}
    for t in reader.tensors:
        ne = [int(x) for x in t.shape]
        arr = gguf.quants.dequantize(t.data, t.tensor_type)
        arr = np.asarray(arr).reshape(tuple(reversed(ne)))
        weights[t.name] = arr.astype(dtype)

    hidden = int(key('embedding_length'))
    n_heads = int(key('attention.head_count'))
    n_kv = key('attention.head_count_kv', n_heads)
    head_dim = int(key('attention.key_length', hidden // n_heads))
    vocab = key('vocab_size')
    if vocab is None:
        vocab = weights['token_embd.weight'].shape[0]
    if arch == 'gpt2':
        eps = float(key('attention.layer_norm_epsilon', 1e-5))
    else:
        eps = float(key('attention.layer_norm_rms_epsilon', 1e-5))

    scaling = None
    scaling_type = key('rope.scaling.type')
    if scaling_type in ('linear',):
        scaling = {'type': 'linear', 'factor': float(key('rope.scaling.factor'))}
    elif scaling_type not in (None, 'none'):
        raise ValueError(f'unsupported GGUF rope scaling {scaling_type!r}')
    # llama3-style scaling is carried by the rope_freqs.weight tensor (the
    # per-frequency divisors), which the forward pass picks up directly.

    cfg = Config(
        arch='gpt2' if arch == 'gpt2' else 'llama',
        source_arch=arch,
        vocab_size=int(vocab),
        hidden=hidden,
        n_layers=int(key('block_count')),
        n_heads=n_heads,
        n_kv_heads=int(n_kv),
        head_dim=head_dim,
        ffn=int(key('feed_forward_length')),
        norm_eps=eps,
        max_pos=int(key('context_length', 2048)),
        rope_theta=float(key('rope.freq_base', 10000.0)),
        rope_dim=int(key('rope.dimension_count', head_dim)),
        # llama.cpp permutes llama q/k rows for adjacent-pair rope; qwen2 is
        # stored unpermuted and run with NEOX (half) rotation.
        rope_pairing='adjacent' if arch == 'llama' else 'half',
        rope_scaling=scaling,
        sliding_window=int(key('attention.sliding_window', 0) or 0),
    )
    if key('expert_count', 0):
        # llama.cpp: Mixtral (llama) and Qwen3-MoE renormalize the top k,
        # Qwen2-MoE does not.
        cfg.n_experts_used = int(key('expert_used_count'))
        cfg.moe_norm = bool(key('expert_weights_norm', arch != 'qwen2moe'))
    if arch == 'gemma2':
        # llama.cpp's converter stores the norms as w + 1 (offset 0 here),
        # every other layer slides (from layer 0; or as
        # attention.sliding_window_pattern says), and scales queries by
        # 1/sqrt(head_dim) (by 1/sqrt(hidden/heads) for the 46-layer 27B).
        cfg.embed_scale = float(np.float32(math.sqrt(hidden)))
        cfg.act = 'gelu_tanh'
        cfg.sliding_layers = _swa_layers(key('attention.sliding_window_pattern'),
                                         cfg.n_layers, 2)
        cfg.attn_scale = (hidden / n_heads if cfg.n_layers == 46 else head_dim) ** -0.5
        cfg.attn_softcap = float(key('attn_logit_softcapping', 0.0) or 0.0)
        cfg.final_softcap = float(key('final_logit_softcapping', 0.0) or 0.0)
    if arch == 'gemma3':
        # As llama.cpp runs Gemma 3: five sliding layers then a global one
        # unless attention.sliding_window_pattern says otherwise;
        # the sliding ones rotate with base 10000 unscaled, the global ones
        # with rope.freq_base and the file's scaling; norms stored as w + 1;
        # queries scaled by 1/sqrt(head_dim) (1/sqrt(hidden/heads) for the
        # 62-layer 27B); no soft-caps unless the file sets them.
        cfg.embed_scale = float(np.float32(math.sqrt(hidden)))
        cfg.act = 'gelu_tanh'
        cfg.sliding_window = int(key('attention.sliding_window', 4096))
        cfg.sliding_layers = _swa_layers(key('attention.sliding_window_pattern'),
                                         cfg.n_layers, 6)
        cfg.local_rope_layers = list(cfg.sliding_layers)
        cfg.local_rope_theta = 10000.0
        cfg.attn_scale = (hidden / n_heads if cfg.n_layers == 62 else head_dim) ** -0.5
        cfg.attn_softcap = float(key('attn_logit_softcapping', 0.0) or 0.0)
        cfg.final_softcap = float(key('final_logit_softcapping', 0.0) or 0.0)
    if arch == 'phi3':
        # llama.cpp's converter: gate and up fused in ffn_up, LongRoPE as
        # rope_factors_long/short tensors + rope.scaling.attn_factor.
        _split_phi3(weights, n_heads, cfg.n_kv_heads, head_dim, cfg.ffn)
        if 'rope_factors_long.weight' in weights:
            cfg.rope_scaling = _longrope(
                weights.pop('rope_factors_short.weight'), weights.pop('rope_factors_long.weight'),
                cfg.max_pos, int(key('rope.scaling.original_context_length')),
                attention_factor=key('rope.scaling.attn_factor'))
    vocab_strings = _gguf_field(reader, 'tokenizer.ggml.tokens')
    return Model(cfg, weights), vocab_strings


# ----------------------------------------------------------------------------
# Loading: Hugging Face directory (config.json + safetensors)
# ----------------------------------------------------------------------------

_ST_DTYPES = {'F32': np.float32, 'F16': np.float16, 'F64': np.float64,
              'BF16': 'bf16', 'I32': np.int32, 'I64': np.int64, 'U8': np.uint8}


def read_safetensors(path: str) -> Dict[str, np.ndarray]:
    """Minimal safetensors reader (8-byte LE header size, JSON header, data).

    Written by hand because numpy has no bfloat16: BF16 values are the top 16
    bits of a float32, so widening is a uint16 view shifted left by 16.
    """
    with open(path, 'rb') as f:
        n = int.from_bytes(f.read(8), 'little')
        header = json.loads(f.read(n))
        base = 8 + n
    data = np.memmap(path, dtype=np.uint8, mode='r')
    out = {}
    for name, info in header.items():
        if name == '__metadata__':
            continue
        begin, end = info['data_offsets']
        raw = data[base + begin: base + end]
        dt = _ST_DTYPES[info['dtype']]
        if dt == 'bf16':
            arr = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            arr = raw.view(dt)
        out[name] = np.array(arr.reshape(info['shape']))
    return out


# Gemma 2 names its norms differently: post_attention_layernorm is applied to
# the attention output (Llama's name for the pre-MLP norm).
_GEMMA_NORMS = {'post_attention_layernorm.weight': 'post_attention_norm.weight',
                'pre_feedforward_layernorm.weight': 'ffn_norm.weight',
                'post_feedforward_layernorm.weight': 'post_ffw_norm.weight'}


def _hf_gemma_name(name: str) -> Optional[str]:
    m = re.fullmatch(r'model\.layers\.(\d+)\.(.+)', name)
    if m and m.group(2) in _GEMMA_NORMS:
        return f'blk.{m.group(1)}.{_GEMMA_NORMS[m.group(2)]}'
    return _hf_llama_name(name)


# Mixture-of-experts tensors: the router, expert E's matrices (stacked into
# [experts, out, in] by load_hf) and Qwen2-MoE's shared expert.
_HF_MOE = {'block_sparse_moe.gate.weight': 'ffn_gate_inp.weight',
           'mlp.gate.weight': 'ffn_gate_inp.weight',
           'mlp.shared_expert_gate.weight': 'ffn_gate_inp_shexp.weight',
           'mlp.shared_expert.gate_proj.weight': 'ffn_gate_shexp.weight',
           'mlp.shared_expert.up_proj.weight': 'ffn_up_shexp.weight',
           'mlp.shared_expert.down_proj.weight': 'ffn_down_shexp.weight'}
_HF_EXPERT = {'w1': 'ffn_gate_exps', 'w3': 'ffn_up_exps', 'w2': 'ffn_down_exps',
              'gate_proj': 'ffn_gate_exps', 'up_proj': 'ffn_up_exps',
              'down_proj': 'ffn_down_exps'}


def _hf_moe_name(name: str):
    """(canonical name, expert index or None) of an HF MoE tensor, or None."""
    m = re.fullmatch(r'model\.layers\.(\d+)\.(.+)', name)
    if not m:
        return None
    if m.group(2) in _HF_MOE:
        return f'blk.{m.group(1)}.{_HF_MOE[m.group(2)]}', None
    e = re.fullmatch(r'(?:block_sparse_moe|mlp)\.experts\.(\d+)\.(\w+)\.weight', m.group(2))
    if e and e.group(2) in _HF_EXPERT:
        return f'blk.{m.group(1)}.{_HF_EXPERT[e.group(2)]}.weight', int(e.group(1))
    return None


def _hf_llama_name(name: str) -> Optional[str]:
    fixed = {'model.embed_tokens.weight': 'token_embd.weight',
             'model.norm.weight': 'output_norm.weight',
             'lm_head.weight': 'output.weight'}
    if name in fixed:
        return fixed[name]
    m = re.fullmatch(r'model\.layers\.(\d+)\.(.+)', name)
    if not m:
        return None
    sub = {'input_layernorm.weight': 'attn_norm.weight',
           'post_attention_layernorm.weight': 'ffn_norm.weight',
           'self_attn.q_proj.weight': 'attn_q.weight',
           'self_attn.q_proj.bias': 'attn_q.bias',
           'self_attn.k_proj.weight': 'attn_k.weight',
           'self_attn.k_proj.bias': 'attn_k.bias',
           'self_attn.v_proj.weight': 'attn_v.weight',
           'self_attn.v_proj.bias': 'attn_v.bias',
           'self_attn.o_proj.weight': 'attn_output.weight',
           'self_attn.o_proj.bias': 'attn_output.bias',
           # Qwen3: RMSNorm over each query / key head before RoPE.
           'self_attn.q_norm.weight': 'attn_q_norm.weight',
           'self_attn.k_norm.weight': 'attn_k_norm.weight',
           'mlp.gate_proj.weight': 'ffn_gate.weight',
           'mlp.up_proj.weight': 'ffn_up.weight',
           'mlp.down_proj.weight': 'ffn_down.weight',
           # Phi-3's fused projections (split by _split_phi3).
           'self_attn.qkv_proj.weight': 'attn_qkv.weight',
           'mlp.gate_up_proj.weight': 'ffn_up.weight'}.get(m.group(2))
    if sub is None:
        return None  # e.g. rotary_emb.inv_freq buffers
    return f'blk.{m.group(1)}.{sub}'


# GPT-2 HF Conv1D weights are stored [in, out]; these need a transpose.
_GPT2_CONV1D = ('attn_qkv.weight', 'attn_output.weight', 'ffn_up.weight',
                'ffn_down.weight')


def _hf_gpt2_name(name: str) -> Optional[str]:
    if name.startswith('transformer.'):
        name = name[len('transformer.'):]
    fixed = {'wte.weight': 'token_embd.weight',
             'wpe.weight': 'position_embd.weight',
             'ln_f.weight': 'output_norm.weight',
             'ln_f.bias': 'output_norm.bias',
             'lm_head.weight': 'output.weight'}
    if name in fixed:
        return fixed[name]
    m = re.fullmatch(r'h\.(\d+)\.(.+)\.(weight|bias)', name)
    if not m:
        return None
    sub = {'ln_1': 'attn_norm', 'attn.c_attn': 'attn_qkv',
           'attn.c_proj': 'attn_output', 'ln_2': 'ffn_norm',
           'mlp.c_fc': 'ffn_up', 'mlp.c_proj': 'ffn_down'}.get(m.group(2))
    if sub is None:
        return None  # attn.bias / attn.masked_bias are causal-mask buffers
    return f'blk.{m.group(1)}.{sub}.{m.group(3)}'


# Gemma3TextConfig's defaults: real Gemma 3 configs (a gemma3 text_config
# above all) leave out the keys that have them.
_GEMMA3_DEFAULTS = dict(
    vocab_size=262208, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
    num_attention_heads=8, num_key_value_heads=4, head_dim=256,
    max_position_embeddings=131072, rms_norm_eps=1e-6, query_pre_attn_scalar=256,
    sliding_window=4096, rope_theta=1e6, rope_local_base_freq=1e4,
    tie_word_embeddings=True, hidden_activation='gelu_pytorch_tanh')


def _gemma3_text_config(hf):
    """A gemma3 / gemma3_text config.json as Gemma3TextConfig reads it."""
    out = dict(_GEMMA3_DEFAULTS)
    out.update({k: v for k, v in hf.items() if k not in ('text_config', 'vision_config')})
    out.update(hf.get('text_config') or {})
    out['model_type'] = 'gemma3_text'
    return out


def _unnest_gemma3_name(name):
    """Gemma3ForConditionalGeneration's text tensors under plain Llama names."""
    for prefix in ('language_model.model.', 'model.language_model.'):
        if name.startswith(prefix):
            return 'model.' + name[len(prefix):]
    return 'lm_head.weight' if name == 'language_model.lm_head.weight' else name


def _hf_rope(rs):
    """Rill's scaling dict from an HF rope_scaling / rope_parameters entry."""
    if not rs:
        return None
    kind = rs.get('rope_type', rs.get('type'))
    if kind == 'linear':
        return {'type': 'linear', 'factor': float(rs['factor'])}
    if kind == 'llama3':
        return {'type': 'llama3', 'factor': float(rs['factor']),
                'low_freq_factor': float(rs['low_freq_factor']),
                'high_freq_factor': float(rs['high_freq_factor']),
                'original_max_position_embeddings':
                    float(rs['original_max_position_embeddings'])}
    if kind not in ('default', None):
        raise ValueError(f'unsupported rope_scaling {rs}')
    return None


def _longrope(short, long, max_pos, original, factor=None, attention_factor=None):
    """Rill's LongRoPE dict. transformers switches between the short and
    long factors per forward call (from the longest position), which leaves
    cached keys rotated with the other set; Rill and this reference use one
    set per model: the long factors when the model's context exceeds the
    pre-training one. Both agree whenever the sequence is longer than
    `original` (the tests' prompts are)."""
    if factor is None:
        factor = max_pos / original
    if attention_factor is None:
        attention_factor = (1.0 if factor <= 1.0 else
                            math.sqrt(1 + math.log(factor) / math.log(original)))
    return {'type': 'longrope', 'ext': long if max_pos > original else short,
            'mscale': float(attention_factor)}


def _split_phi3(weights, n_heads, n_kv, head_dim, ffn):
    """Phi-3's fused qkv and gate_up projections as separate q/k/v, gate/up
    (row ranges: q, k, v; gate, up)."""
    for name in [n for n in weights if n.endswith('attn_qkv.weight')]:
        w = weights.pop(name)
        p = name[:-len('attn_qkv.weight')]
        q, kv = n_heads * head_dim, n_kv * head_dim
        weights[p + 'attn_q.weight'] = w[:q]
        weights[p + 'attn_k.weight'] = w[q:q + kv]
        weights[p + 'attn_v.weight'] = w[q + kv:]
    for name in [n for n in weights if n.endswith('ffn_up.weight')]:
        if weights[name].shape[0] == 2 * ffn:
            w = weights.pop(name)
            p = name[:-len('ffn_up.weight')]
            weights[p + 'ffn_gate.weight'] = w[:ffn]
            weights[p + 'ffn_up.weight'] = w[ffn:]


def load_hf(path: str, dtype=np.float64):
    with open(os.path.join(path, 'config.json')) as f:
        hf = json.load(f)
    if hf.get('model_type') in ('gemma3', 'gemma3_text'):
        hf = _gemma3_text_config(hf)
    index = os.path.join(path, 'model.safetensors.index.json')
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)['weight_map'].values()))
    else:
        files = ['model.safetensors']
    raw = {}
    for fn in files:
        raw.update(read_safetensors(os.path.join(path, fn)))

    model_type = hf.get('model_type', '')
    archs = hf.get('architectures', [])
    is_gpt2 = model_type == 'gpt2' or 'GPT2LMHeadModel' in archs
    weights = {}
    experts = {}  # canonical name -> {expert index: [out, in]}
    for name, arr in raw.items():
        is_gemma = model_type in ('gemma2', 'gemma3_text')
        if model_type == 'gemma3_text':
            name = _unnest_gemma3_name(name)
        canon = (_hf_gpt2_name(name) if is_gpt2 else
                 _hf_gemma_name(name) if is_gemma else _hf_llama_name(name))
        fused = re.fullmatch(r'model\.layers\.(\d+)\.mlp\.experts\.(gate_up_proj|down_proj)', name)
        if fused and model_type in ('mixtral', 'qwen2_moe', 'qwen3_moe'):
            # transformers 5's fused experts: gate_up_proj [experts, 2 ffn,
            # hidden] (gate rows first), down_proj [experts, hidden, ffn].
            p = f'blk.{fused.group(1)}.'
            arr = arr.astype(dtype)
            if fused.group(2) == 'gate_up_proj':
                f = arr.shape[1] // 2
                weights[p + 'ffn_gate_exps.weight'] = arr[:, :f]
                weights[p + 'ffn_up_exps.weight'] = arr[:, f:]
            else:
                weights[p + 'ffn_down_exps.weight'] = arr
            continue
        if canon is None and model_type in ('mixtral', 'qwen2_moe', 'qwen3_moe'):
            moe = _hf_moe_name(name)
            if moe is not None:
                canon, expert = moe
                if expert is not None:
                    experts.setdefault(canon, {})[expert] = arr.astype(dtype)
                    continue
                if canon.endswith('_shexp.weight') and 'gate_inp' in canon:
                    arr = arr.reshape(-1)  # [1, hidden] -> [hidden]
        if canon is None:
            continue
        arr = arr.astype(dtype)
        if is_gpt2 and canon.split('.', 2)[-1] in _GPT2_CONV1D:
            arr = np.ascontiguousarray(arr.T)
        weights[canon] = arr
    for canon, per_expert in experts.items():
        weights[canon] = np.stack([per_expert[e] for e in range(len(per_expert))])

    if is_gpt2:
        hidden = hf['n_embd']
        n_heads = hf['n_head']
        cfg = Config(arch='gpt2', source_arch='gpt2', vocab_size=hf['vocab_size'],
                     hidden=hidden, n_layers=hf['n_layer'], n_heads=n_heads,
                     n_kv_heads=n_heads, head_dim=hidden // n_heads,
                     ffn=hf.get('n_inner') or 4 * hidden,
                     norm_eps=hf.get('layer_norm_epsilon', 1e-5),
                     max_pos=hf['n_positions'])
        if hf.get('activation_function', 'gelu_new') != 'gelu_new':
            raise ValueError('only gelu_new GPT-2 is supported')
    else:
        hidden = hf['hidden_size']
        n_heads = hf['num_attention_heads']
        head_dim = hf.get('head_dim') or hidden // n_heads
        scaling = None
        # transformers 5 writes one `rope_parameters` object (theta, type and
        # scaling together); older versions `rope_theta` + `rope_scaling`.
        params = hf.get('rope_parameters')
        local_theta, local_scaling = float(hf.get('rope_local_base_freq', 10000.0)), None
        if params and any(isinstance(v, dict) for v in params.values()):
            # Gemma 3 in transformers 5: one entry per layer type.
            if model_type != 'gemma3_text':
                raise ValueError('per-layer-type rope_parameters are not supported')
            rope_theta = float(params['full_attention'].get('rope_theta', 1e6))
            rs = params['full_attention']
            local_theta = float(params['sliding_attention'].get('rope_theta', 1e4))
            local_scaling = _hf_rope(params['sliding_attention'])
        elif params:
            rope_theta = float(params.get('rope_theta', 10000.0))
            rs = params
        else:
            rope_theta = float(hf.get('rope_theta', 10000.0))
            rs = hf.get('rope_scaling')
        rope_dim = head_dim
        if model_type == 'phi3':
            partial = float((rs or {}).get('partial_rotary_factor',
                                           hf.get('partial_rotary_factor', 1.0)))
            rope_dim = int(head_dim * partial)
        if rs and rs.get('rope_type', rs.get('type')) in ('longrope', 'su', 'yarn'):
            if model_type != 'phi3':
                raise ValueError('longrope is only supported for phi3')
            original = rs.get('original_max_position_embeddings',
                              hf.get('original_max_position_embeddings', 4096))
            scaling = _longrope(rs['short_factor'], rs['long_factor'],
                                hf['max_position_embeddings'], original, rs.get('factor'),
                                rs.get('attention_factor'))
        else:
            scaling = _hf_rope(rs)
        # Sliding windows as transformers applies them: Mistral on every
        # layer; Qwen2 only with use_sliding_window, from max_window_layers
        # on; an explicit layer_types list wins.
        window = hf.get('sliding_window') or 0
        layers = None
        if model_type in ('qwen2_moe', 'qwen3_moe'):
            if hf.get('use_sliding_window', False):
                raise ValueError('sliding windows on Qwen MoE models are not supported')
            window = 0
        elif model_type in ('qwen2', 'qwen3'):
            if not hf.get('use_sliding_window', False):
                window = 0
            layers = [i >= hf.get('max_window_layers', 28)
                      for i in range(hf['num_hidden_layers'])]
        elif model_type not in ('mistral', 'mixtral', 'phi3', 'gemma2', 'gemma3_text'):
            if window:
                raise ValueError(f'sliding_window on model_type {model_type!r}')
        elif model_type == 'gemma2':
            # transformers: layer i slides when (i + 1) % 2 != 0.
            layers = [(i + 1) % 2 != 0 for i in range(hf['num_hidden_layers'])]
        elif model_type == 'gemma3_text':
            # transformers: without layer_types, layer i slides when
            # (i + 1) % sliding_window_pattern != 0 (pattern 6 by default).
            pattern = hf.get('sliding_window_pattern', 6)
            layers = [(i + 1) % pattern != 0 for i in range(hf['num_hidden_layers'])]
        if hf.get('layer_types'):
            layers = [t == 'sliding_attention' for t in hf['layer_types']]
        cfg = Config(arch='llama', source_arch=model_type or 'llama',
                     vocab_size=hf['vocab_size'], hidden=hidden,
                     n_layers=hf['num_hidden_layers'], n_heads=n_heads,
                     n_kv_heads=hf.get('num_key_value_heads') or n_heads,
                     head_dim=head_dim, ffn=hf['intermediate_size'],
                     norm_eps=hf.get('rms_norm_eps', 1e-6),
                     max_pos=hf.get('max_position_embeddings', 2048),
                     rope_theta=rope_theta,
                     rope_dim=rope_dim, rope_pairing='half',
                     rope_scaling=scaling, sliding_window=int(window),
                     sliding_layers=layers)
        if model_type in ('gemma2', 'gemma3_text'):
            cfg.embed_scale = float(np.float32(math.sqrt(hidden)))
            cfg.norm_offset = 1.0
            cfg.act = 'gelu_tanh'
            cfg.attn_scale = float(hf['query_pre_attn_scalar']) ** -0.5
            cfg.attn_softcap = float(hf.get('attn_logit_softcapping') or 0.0)
            cfg.final_softcap = float(hf.get('final_logit_softcapping') or 0.0)
            if hf.get('use_bidirectional_attention'):
                raise ValueError('bidirectional Gemma 3 is not supported')
        if model_type == 'phi3':
            _split_phi3(weights, n_heads, cfg.n_kv_heads, head_dim, cfg.ffn)
        if model_type == 'gemma3_text':
            cfg.local_rope_layers = list(layers)
            cfg.local_rope_theta = local_theta
            cfg.local_rope_scaling = local_scaling
            if hf.get('hidden_activation', 'gelu_pytorch_tanh') != 'gelu_pytorch_tanh':
                raise ValueError('only gelu_pytorch_tanh Gemma 2 MLPs are supported')
        elif hf.get('hidden_act', 'silu') != 'silu':
            raise ValueError('only silu (SwiGLU) Llama MLPs are supported')
        if model_type == 'mixtral':
            cfg.n_experts_used = hf.get('num_experts_per_tok', 2)
            cfg.moe_norm = True  # MixtralSparseMoeBlock renormalizes the top k
        elif model_type in ('qwen2_moe', 'qwen3_moe'):
            cfg.n_experts_used = hf['num_experts_per_tok']
            cfg.moe_norm = bool(hf.get('norm_topk_prob', False))
            # Dense layers: in mlp_only_layers, or (i + 1) % step != 0. Their
            # weights are the dense MLP's names, so the forward pass tells
            # them apart by the router's absence; check the file agrees.
            step = hf.get('decoder_sparse_step', 1)
            dense = hf.get('mlp_only_layers') or []
            for i in range(cfg.n_layers):
                sparse = i not in dense and (i + 1) % step == 0
                if sparse != (f'blk.{i}.ffn_gate_inp.weight' in weights):
                    raise ValueError(f'layer {i}: router presence disagrees with the config')
    return Model(cfg, weights), None


def load(path: str, dtype=np.float64):
    """Returns (Model, vocab strings or None) for a .gguf file or HF dir."""
    if os.path.isdir(path):
        return load_hf(path, dtype)
    return load_gguf(path, dtype)


# ----------------------------------------------------------------------------
# Building blocks
# ----------------------------------------------------------------------------

def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def layer_norm(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def rope_inv_freq(cfg: Config, freq_factors: Optional[np.ndarray]) -> np.ndarray:
    """inv_freq[i] = base^(-2i/rope_dim), adjusted for llama3 scaling."""
    d = cfg.rope_dim or cfg.head_dim
    inv = cfg.rope_theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    rs = cfg.rope_scaling
    if rs and rs['type'] == 'llama3':
        # Llama-3.1: long wavelengths are slowed by `factor`, short ones kept,
        # and the band between is interpolated smoothly.
        factor = rs['factor']
        lo, hi = rs['low_freq_factor'], rs['high_freq_factor']
        old = rs['original_max_position_embeddings']
        wavelen = 2 * math.pi / inv
        smooth = (old / wavelen - lo) / (hi - lo)
        medium = (1 - smooth) * inv / factor + smooth * inv
        inv = np.where(wavelen > old / lo, inv / factor,
                       np.where(wavelen < old / hi, inv, medium))
    if rs and rs['type'] == 'longrope':
        # LongRoPE (Phi-3): each frequency divided by its factor; one factor
        # set per model (see _longrope).
        inv = inv / np.asarray(rs['ext'], dtype=np.float64)
    if freq_factors is not None:
        # GGUF rope_freqs.weight: llama.cpp divides each frequency by it.
        inv = inv / freq_factors.astype(np.float64)
    return inv


def apply_rope(x, positions, inv_freq, pairing, rope_dim, mscale=1.0):
    """x: [n, heads, head_dim]; rotates the first rope_dim dims; cos and sin
    are multiplied by mscale (LongRoPE's attention factor)."""
    ang = positions[:, None].astype(np.float64) * inv_freq[None, :]  # [n, d/2]
    cos = (np.cos(ang) * mscale)[:, None, :].astype(x.dtype)
    sin = (np.sin(ang) * mscale)[:, None, :].astype(x.dtype)
    out = x.copy()
    r = x[..., :rope_dim]
    if pairing == 'adjacent':
        a, b = r[..., 0::2], r[..., 1::2]
        out[..., 0:rope_dim:2] = a * cos - b * sin
        out[..., 1:rope_dim:2] = a * sin + b * cos
    else:
        h = rope_dim // 2
        a, b = r[..., :h], r[..., h:]
        out[..., :h] = a * cos - b * sin
        out[..., h:rope_dim] = b * cos + a * sin
    return out


def attention(q, k, v, start_pos, window=0, scale=0.0, softcap=0.0):
    """Causal (GQA) attention. q: [n, H, d]; k, v: [T, KV, d] with T = start+n.

    Query i sits at absolute position start_pos + i and may see keys 0..that
    (with window > 0 only the keys at positions > its own - window).
    Query head h reads kv head h // (H / KV), as HF repeat_kv does.
    """
    n, n_heads, d = q.shape
    t, n_kv, _ = k.shape
    group = n_heads // n_kv
    k = np.repeat(k, group, axis=1)
    v = np.repeat(v, group, axis=1)
    scores = np.einsum('qhd,khd->hqk', q, k) * (scale or 1.0 / math.sqrt(d))
    if softcap:
        scores = softcap * np.tanh(scores / softcap)
    qpos = start_pos + np.arange(n)[:, None]
    kpos = np.arange(t)[None, :]
    visible = kpos <= qpos
    if window:
        visible &= kpos > qpos - window
    scores = np.where(visible, scores, -np.inf)
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum('hqk,khd->qhd', p, v).reshape(n, n_heads * d)


def linear(x, weights, name):
    y = x @ weights[name + '.weight'].T
    b = weights.get(name + '.bias')
    return y if b is None else y + b


# ----------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------

class KVCache:
    """Per-layer keys/values ([T, KV, d]) after RoPE; grows by concatenation."""

    def __init__(self, n_layers):
        self.k = [None] * n_layers
        self.v = [None] * n_layers
        self.length = 0

    def extend(self, layer, k, v):
        if self.k[layer] is None:
            self.k[layer], self.v[layer] = k, v
        else:
            self.k[layer] = np.concatenate([self.k[layer], k], axis=0)
            self.v[layer] = np.concatenate([self.v[layer], v], axis=0)
        return self.k[layer], self.v[layer]


class Model:
    def __init__(self, cfg: Config, weights: Dict[str, np.ndarray]):
        self.cfg = cfg
        self.w = weights
        self.inv_freq = (rope_inv_freq(cfg, weights.get('rope_freqs.weight'))
                         if cfg.arch == 'llama' else None)
        if cfg.local_rope_layers:
            local = dataclasses.replace(cfg, rope_theta=cfg.local_rope_theta,
                                        rope_scaling=cfg.local_rope_scaling)
            self.local_inv_freq = rope_inv_freq(local, None)

    def lm_head(self):
        return self.w.get('output.weight', self.w['token_embd.weight'])

    def forward(self, tokens: List[int], cache: Optional[KVCache] = None):
        """Logits [len(tokens), vocab] for tokens appended after `cache`."""
        cfg, w = self.cfg, self.w
        cache = cache or KVCache(cfg.n_layers)
        start = cache.length
        tokens = np.asarray(tokens, dtype=np.int64)
        if tokens.min() < 0 or tokens.max() >= cfg.vocab_size:
            raise ValueError('token id out of range')
        n = len(tokens)
        positions = start + np.arange(n)
        if start + n > cfg.max_pos and cfg.arch == 'gpt2':
            raise ValueError('sequence longer than n_positions')
        x = w['token_embd.weight'][tokens] * cfg.embed_scale
        if cfg.arch == 'gpt2':
            x = x + w['position_embd.weight'][positions]
        hd, nh, nkv = cfg.head_dim, cfg.n_heads, cfg.n_kv_heads
        rope_dim = cfg.rope_dim or hd

        def rope_positions(scaling):
            # Linear rope scaling is plain position interpolation.
            pos = positions.astype(np.float64)
            if scaling and scaling['type'] == 'linear':
                pos = pos / scaling['factor']
            return pos

        for i in range(cfg.n_layers):
            p = f'blk.{i}.'
            if cfg.arch == 'gpt2':
                h = layer_norm(x, w[p + 'attn_norm.weight'], w[p + 'attn_norm.bias'], cfg.norm_eps)
                qkv = linear(h, w, p + 'attn_qkv')
                q, k, v = np.split(qkv, 3, axis=-1)
                q = q.reshape(n, nh, hd)
                k = k.reshape(n, nkv, hd)
                v = v.reshape(n, nkv, hd)
            else:
                h = rms_norm(x, w[p + 'attn_norm.weight'] + cfg.norm_offset, cfg.norm_eps)
                q = linear(h, w, p + 'attn_q').reshape(n, nh, hd)
                k = linear(h, w, p + 'attn_k').reshape(n, nkv, hd)
                v = linear(h, w, p + 'attn_v').reshape(n, nkv, hd)
                if p + 'attn_q_norm.weight' in w:  # Qwen3, Gemma 3
                    q = rms_norm(q, w[p + 'attn_q_norm.weight'] + cfg.norm_offset, cfg.norm_eps)
                    k = rms_norm(k, w[p + 'attn_k_norm.weight'] + cfg.norm_offset, cfg.norm_eps)
                if cfg.uses_local_rope(i):
                    inv_freq = self.local_inv_freq
                    rope_pos = rope_positions(cfg.local_rope_scaling)
                else:
                    inv_freq, rope_pos = self.inv_freq, rope_positions(cfg.rope_scaling)
                mscale = (cfg.rope_scaling or {}).get('mscale', 1.0)
                q = apply_rope(q, rope_pos, inv_freq, cfg.rope_pairing, rope_dim, mscale)
                k = apply_rope(k, rope_pos, inv_freq, cfg.rope_pairing, rope_dim, mscale)
            k_all, v_all = cache.extend(i, k, v)
            a = linear(attention(q, k_all, v_all, start, cfg.layer_window(i), cfg.attn_scale,
                                 cfg.attn_softcap), w, p + 'attn_output')
            if p + 'post_attention_norm.weight' in w:  # Gemma 2
                a = rms_norm(a, w[p + 'post_attention_norm.weight'] + cfg.norm_offset, cfg.norm_eps)
            x = x + a

            if cfg.arch == 'gpt2':
                h = layer_norm(x, w[p + 'ffn_norm.weight'], w[p + 'ffn_norm.bias'], cfg.norm_eps)
                x = x + linear(gelu_new(linear(h, w, p + 'ffn_up')), w, p + 'ffn_down')
            else:
                h = rms_norm(x, w[p + 'ffn_norm.weight'] + cfg.norm_offset, cfg.norm_eps)
                if p + 'ffn_gate_inp.weight' in w:
                    f = self.moe(h, p)
                else:
                    act = gelu_new if cfg.act == 'gelu_tanh' else silu
                    g = act(linear(h, w, p + 'ffn_gate')) * linear(h, w, p + 'ffn_up')
                    f = linear(g, w, p + 'ffn_down')
                if p + 'post_ffw_norm.weight' in w:  # Gemma 2
                    f = rms_norm(f, w[p + 'post_ffw_norm.weight'] + cfg.norm_offset, cfg.norm_eps)
                x = x + f
        cache.length = start + n

        if cfg.arch == 'gpt2':
            x = layer_norm(x, w['output_norm.weight'], w['output_norm.bias'], cfg.norm_eps)
        else:
            x = rms_norm(x, w['output_norm.weight'] + cfg.norm_offset, cfg.norm_eps)
        if start == 0:
            self.prompt_hidden = x  # Final hidden states of the prompt (--pool-out).
        logits = x @ self.lm_head().T
        if cfg.final_softcap:
            logits = cfg.final_softcap * np.tanh(logits / cfg.final_softcap)
        return logits

    def moe(self, h, p):
        """Mixture-of-experts MLP of layer prefix p over rows h [n, hidden]."""
        cfg, w = self.cfg, self.w
        logits = h @ w[p + 'ffn_gate_inp.weight'].T  # [n, experts]
        probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
        probs /= probs.sum(axis=-1, keepdims=True)
        k = cfg.n_experts_used
        # Top k by probability; a stable sort puts the lower index first on ties.
        top = np.argsort(-probs, axis=-1, kind='stable')[:, :k]
        weights = np.take_along_axis(probs, top, axis=-1)
        if cfg.moe_norm:
            weights = weights / weights.sum(axis=-1, keepdims=True)
        gate, up, down = (w[p + f'ffn_{m}_exps.weight'] for m in ('gate', 'up', 'down'))
        out = np.zeros_like(h)
        for t in range(h.shape[0]):
            for j in range(k):
                e = top[t, j]
                g = silu(gate[e] @ h[t]) * (up[e] @ h[t])
                out[t] += weights[t, j] * (down[e] @ g)
        if p + 'ffn_gate_inp_shexp.weight' in w:  # Qwen2-MoE's shared expert
            g = silu(linear(h, w, p + 'ffn_gate_shexp')) * linear(h, w, p + 'ffn_up_shexp')
            gate_shared = 1.0 / (1.0 + np.exp(-(h @ w[p + 'ffn_gate_inp_shexp.weight'])))
            out = out + gate_shared[:, None] * linear(g, w, p + 'ffn_down_shexp')
        return out

    def greedy(self, tokens: List[int], n_new: int, use_cache: bool = True):
        """(prompt logits, n_new argmax continuation tokens)."""
        cache = KVCache(self.cfg.n_layers)
        logits = self.forward(tokens, cache)
        out = []
        last = logits[-1]
        seq = list(tokens)
        for _ in range(n_new):
            nxt = int(np.argmax(last))
            out.append(nxt)
            seq.append(nxt)
            if len(out) == n_new:
                break
            if use_cache:
                last = self.forward([nxt], cache)[-1]
            else:
                last = self.forward(seq)[-1]
        return logits, out


# ----------------------------------------------------------------------------
# Logits files (format documented in README.md)
# ----------------------------------------------------------------------------

def write_logits(path: str, logits: np.ndarray, meta: dict):
    """.npy -> numpy file; anything else -> raw little-endian float32.

    Either way a sidecar PATH.json holds {"shape", "dtype", "tokens",
    "greedy", ...}; for the raw form the sidecar is what gives the shape.
    """
    logits = np.ascontiguousarray(logits, dtype='<f4')
    if path.endswith('.npy'):
        np.save(path, logits)
    else:
        logits.tofile(path)
    side = dict(meta)
    side.update({'shape': list(logits.shape), 'dtype': 'float32'})
    with open(path + '.json', 'w') as f:
        json.dump(side, f)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--model', required=True, help='.gguf file or HF directory')
    ap.add_argument('--tokens', required=True, help='comma-separated token ids')
    ap.add_argument('--greedy', type=int, default=0, help='greedy tokens to generate')
    ap.add_argument('--out', help='logits output (.npy, or raw float32 + .json sidecar)')
    ap.add_argument('--dtype', default='float64', choices=['float64', 'float32'])
    ap.add_argument('--no-cache', action='store_true',
                    help='recompute the full sequence for each greedy step')
    ap.add_argument('--pool', default='mean', choices=['mean', 'last', 'cls'],
                    help='pooling of the prompt hidden states for --pool-out')
    ap.add_argument('--pool-out', help='L2-normalized pooled prompt embedding (raw float32)')
    args = ap.parse_args(argv)

    tokens = [int(t) for t in args.tokens.split(',') if t.strip()]
    if not tokens:
        ap.error('--tokens is empty')
    t0 = time.time()
    model, vocab = load(args.model, np.dtype(args.dtype))
    t1 = time.time()
    logits, cont = model.greedy(tokens, args.greedy, use_cache=not args.no_cache)
    t2 = time.time()
    top5 = [int(i) for i in np.argsort(-logits[-1])[:5]]
    summary = {'tokens': tokens, 'greedy': cont, 'top5_last': top5,
               'n_positions': len(tokens), 'vocab': int(logits.shape[1]),
               'arch': model.cfg.source_arch,
               'load_s': round(t1 - t0, 3), 'forward_s': round(t2 - t1, 3)}
    if vocab is not None:
        summary['top5_last_str'] = [vocab[i] for i in top5]
    if args.out:
        write_logits(args.out, logits, {'tokens': tokens, 'greedy': cont,
                                        'model': os.path.abspath(args.model)})
    if args.pool_out:
        h = model.prompt_hidden
        v = {'mean': h.mean(axis=0), 'last': h[-1], 'cls': h[0]}[args.pool]
        (v / np.linalg.norm(v)).astype('<f4').tofile(args.pool_out)
    json.dump(summary, sys.stdout)
    sys.stdout.write('\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
