#!/usr/bin/env python3
"""Generates tiny random models, each in HF (safetensors) and GGUF forms.

Why: loader/engine tests need small, fast, fully known models covering the
features the real checkpoint does not exercise (GQA with tied and untied
heads, llama3 and linear RoPE scaling, Qwen2 q/k/v biases, GPT-2). Each model
is generated once in its HF layout (the source of truth) and converted here
to GGUF the way llama.cpp's converter does it, so both forms describe THE
SAME model; `selftest.py` checks that the reference gives equal logits for
both.

Weights are rounded to bfloat16-representable values (and tiny magnitudes
flushed to zero) so that the F32, F16 and BF16 safetensors variants and the
F32/F16 GGUF variants hold bit-identical weights. The Q8_0 / Q4_1 GGUF
variants are genuinely lossy (quantized with gguf.quants.quantize).

Usage: python make_tiny_models.py --out DIR [--seed N]
Writes DIR/manifest.json listing every file (layout in README.md).
"""

import argparse
import json
import os
import sys

import numpy as np

import gguf

VOCAB = 300
SPECIAL = '<|endoftext|>'

# Each spec is an HF config (what goes into config.json) plus generator knobs.
LLAMA_BASE = dict(
    architectures=['LlamaForCausalLM'], model_type='llama', hidden_size=64,
    intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
    num_hidden_layers=2, rms_norm_eps=1e-5, rope_theta=10000.0,
    rope_scaling=None, tie_word_embeddings=True, vocab_size=VOCAB,
    max_position_embeddings=128, hidden_act='silu', torch_dtype='float32',
    bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1)


def model_specs():
    specs = {}
    specs['llama_gqa'] = dict(LLAMA_BASE)
    specs['llama_llama3'] = dict(
        LLAMA_BASE, tie_word_embeddings=False,
        # original_max_position_embeddings=64 puts the 8 frequencies of a
        # head_dim-16 model into all three bands (kept, smoothed, divided).
        rope_scaling={'rope_type': 'llama3', 'factor': 8.0,
                      'low_freq_factor': 1.0, 'high_freq_factor': 4.0,
                      'original_max_position_embeddings': 64})
    specs['llama_linear'] = dict(
        LLAMA_BASE, tie_word_embeddings=False,
        rope_scaling={'type': 'linear', 'factor': 4.0})
    specs['qwen2_bias'] = dict(
        LLAMA_BASE, architectures=['Qwen2ForCausalLM'], model_type='qwen2',
        tie_word_embeddings=False, rope_theta=1000000.0, rms_norm_eps=1e-6)
    # Mistral: every layer attends only its last 8 positions, shorter than
    # the tests' prompts, so a window that is ignored changes the logits.
    specs['mistral_window'] = dict(
        LLAMA_BASE, architectures=['MistralForCausalLM'], model_type='mistral',
        tie_word_embeddings=False, sliding_window=8)
    # A config as transformers 5 writes it: no top-level rope_theta or
    # rope_scaling, one rope_parameters object (llama3 scaling, theta 5e5).
    tf5 = dict(LLAMA_BASE, tie_word_embeddings=False)
    del tf5['rope_theta'], tf5['rope_scaling']
    tf5['rope_parameters'] = {
        'rope_type': 'llama3', 'rope_theta': 500000.0, 'factor': 8.0,
        'low_freq_factor': 1.0, 'high_freq_factor': 4.0,
        'original_max_position_embeddings': 64}
    specs['llama_tf5'] = tf5
    # Qwen2 with use_sliding_window: layer 0 full, layer 1 windowed (6).
    # HF form only: GGUF has no per-layer window.
    specs['qwen2_window'] = dict(
        LLAMA_BASE, architectures=['Qwen2ForCausalLM'], model_type='qwen2',
        tie_word_embeddings=False, rope_theta=1000000.0, rms_norm_eps=1e-6,
        use_sliding_window=True, sliding_window=6, max_window_layers=1)
    # Qwen3: per-head q/k RMSNorm, no biases, head_dim (24) not hidden/heads.
    specs['qwen3'] = dict(
        LLAMA_BASE, architectures=['Qwen3ForCausalLM'], model_type='qwen3',
        head_dim=24, attention_bias=False, tie_word_embeddings=True,
        rope_theta=1000000.0, rms_norm_eps=1e-6)
    # Gemma 2: (1 + w) norms, post norms, GeGLU, scaled embeddings, layer 0
    # sliding (window 8); soft-caps that change the logits (the final one as
    # large as the real 30: a smaller one saturates every top logit to a tie).
    gemma2 = dict(
        LLAMA_BASE, architectures=['Gemma2ForCausalLM'], model_type='gemma2',
        head_dim=24, query_pre_attn_scalar=24, hidden_activation='gelu_pytorch_tanh',
        attn_logit_softcapping=2.0, final_logit_softcapping=30.0, sliding_window=8,
        tie_word_embeddings=True, rms_norm_eps=1e-6)
    del gemma2['hidden_act']
    specs['gemma2'] = gemma2
    # query_pre_attn_scalar != head_dim (as Gemma 2 27B): HF form only, since
    # GGUF does not carry it.
    specs['gemma2_scalar'] = dict(gemma2, query_pre_attn_scalar=16)
    # Mixture of experts: 4 experts, 2 per token, GQA, untied head.
    # Mixtral renormalizes the top-2 weights.
    moe = dict(LLAMA_BASE, tie_word_embeddings=False, output_router_logits=False,
               router_aux_loss_coef=0.001)
    specs['mixtral'] = dict(
        moe, architectures=['MixtralForCausalLM'], model_type='mixtral',
        num_local_experts=4, num_experts_per_tok=2, intermediate_size=64,
        router_jitter_noise=0.0, sliding_window=None)
    # As transformers 5 saves a Mixtral: rope_parameters, the router under
    # mlp.gate, and the experts fused (mlp.experts.gate_up_proj / down_proj).
    # HF form only.
    tf5_moe = dict(specs['mixtral'])
    del tf5_moe['rope_theta'], tf5_moe['rope_scaling']
    tf5_moe['rope_parameters'] = {'rope_type': 'default', 'rope_theta': 10000.0}
    specs['mixtral_tf5'] = tf5_moe
    # Qwen2-MoE: q/k/v biases, a shared expert behind a sigmoid gate, top-2
    # weights not renormalized.
    specs['qwen2_moe'] = dict(
        moe, architectures=['Qwen2MoeForCausalLM'], model_type='qwen2_moe',
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
        shared_expert_intermediate_size=96, norm_topk_prob=False,
        decoder_sparse_step=1, mlp_only_layers=[], rope_theta=1000000.0,
        rms_norm_eps=1e-6, use_sliding_window=False)
    # mlp_only_layers: layer 0 has the dense MLP (HF form only: GGUF
    # qwen2moe has no dense layers).
    specs['qwen2_moe_dense0'] = dict(specs['qwen2_moe'], mlp_only_layers=[0])
    # Qwen3-MoE: per-head q/k norms, head_dim 24, renormalized top-2.
    specs['qwen3_moe'] = dict(
        moe, architectures=['Qwen3MoeForCausalLM'], model_type='qwen3_moe',
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
        norm_topk_prob=True, head_dim=24, attention_bias=False,
        decoder_sparse_step=1, mlp_only_layers=[], rope_theta=1000000.0,
        rms_norm_eps=1e-6)
    specs['gpt2'] = dict(
        architectures=['GPT2LMHeadModel'], model_type='gpt2', n_embd=64,
        n_head=4, n_layer=2, n_positions=128, n_ctx=128, n_inner=None,
        layer_norm_epsilon=1e-5, vocab_size=VOCAB,
        activation_function='gelu_new', tie_word_embeddings=True,
        torch_dtype='float32', bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1)
    # Gemma 3: as Gemma 2 plus (1 + w) q/k norms, no soft-caps, five sliding
    # layers (window 8) then a global one (the pattern GGUF fixes), dual RoPE
    # bases (global 1e6 with linear scaling 4, local 1e4 unscaled), untied
    # head (a tied one with scaled embeddings repeats the last token).
    gemma3 = dict(
        LLAMA_BASE, architectures=['Gemma3ForCausalLM'], model_type='gemma3_text',
        num_hidden_layers=6, head_dim=24, query_pre_attn_scalar=24,
        hidden_activation='gelu_pytorch_tanh', sliding_window=8, rope_theta=1000000.0,
        rope_local_base_freq=10000.0, rope_scaling={'rope_type': 'linear', 'factor': 4.0},
        tie_word_embeddings=False, rms_norm_eps=1e-6)
    del gemma3['hidden_act']
    specs['gemma3'] = gemma3
    # Gemma 3 as transformers 5 writes it (HF form only: GGUF carries neither
    # layer_types nor a second scaling): explicit layer_types, per-layer-type
    # rope_parameters, query_pre_attn_scalar != head_dim, a final soft-cap.
    gemma3_tf5 = dict(
        gemma3, num_hidden_layers=3, query_pre_attn_scalar=16, final_logit_softcapping=30.0,
        layer_types=['sliding_attention', 'full_attention', 'sliding_attention'],
        rope_parameters={
            'full_attention': {'rope_type': 'linear', 'factor': 2.0, 'rope_theta': 1000000.0},
            'sliding_attention': {'rope_type': 'default', 'rope_theta': 10000.0}})
    for key in ('rope_theta', 'rope_local_base_freq', 'rope_scaling'):
        del gemma3_tf5[key]
    specs['gemma3_tf5'] = gemma3_tf5
    # The multimodal wrapper (model_type gemma3): the text model nested in
    # text_config and under model.language_model.*, a vision tensor to drop;
    # rope bases, pattern and query_pre_attn_scalar (256) from the defaults.
    text = {k: v for k, v in gemma3.items()
            if k not in ('architectures', 'rope_theta', 'rope_local_base_freq', 'rope_scaling',
                         'query_pre_attn_scalar', 'torch_dtype', 'bos_token_id',
                         'eos_token_id')}
    specs['gemma3_mm'] = dict(
        architectures=['Gemma3ForConditionalGeneration'], model_type='gemma3',
        text_config=text, vision_config={'model_type': 'siglip_vision_model'},
        torch_dtype='float32', bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1)
    # Phi-3 (mini-4k style): fused qkv_proj and gate_up_proj, MHA, a window
    # of 8 on every layer, untied head.
    phi3 = dict(
        LLAMA_BASE, architectures=['Phi3ForCausalLM'], model_type='phi3',
        num_key_value_heads=4, tie_word_embeddings=False, sliding_window=8,
        original_max_position_embeddings=128, pad_token_id=VOCAB - 1)
    specs['phi3'] = phi3
    # Phi-3 128k / Phi-4-mini style: LongRoPE (served past the original
    # context of 32, so the long factors and an attention factor of
    # sqrt(1 + ln 4 / ln 32) apply), partial rotary 0.75 (12 of 16 dims), GQA.
    pairs = 6
    specs['phi3_longrope'] = dict(
        phi3, num_key_value_heads=2, sliding_window=None, partial_rotary_factor=0.75,
        original_max_position_embeddings=32,
        rope_scaling={'type': 'longrope',
                      'short_factor': [1.0 + 0.25 * i for i in range(pairs)],
                      'long_factor': [1.0 + 3.0 * i for i in range(pairs)]})
    # Gemma 3 with every third layer global (HF: sliding_window_pattern 3;
    # GGUF: attention.sliding_window_pattern, as a period or one flag per
    # layer), so that a reader ignoring the key gets other logits.
    specs['gemma3_pattern'] = dict(gemma3, sliding_window_pattern=3)
    return specs


def text_config(cfg):
    """The text model's config (a gemma3 config nests it in text_config)."""
    return dict(cfg, **cfg.get('text_config', {}))


# ----------------------------------------------------------------------------
# Weights
# ----------------------------------------------------------------------------

def bf16_exact(x):
    """Rounds float32 to the nearest bfloat16 value (ties to even), and
    flushes |x| < 2^-14 to zero so every value is also exact in float16."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    y = bits.astype(np.uint32).view(np.float32).copy()
    y[np.abs(y) < 2.0 ** -14] = 0.0
    assert np.array_equal(y.astype(np.float16).astype(np.float32), y)
    return y


class Gen:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def normal(self, shape, std, mean=0.0):
        return bf16_exact(mean + std * self.rng.standard_normal(shape))


def llama_hf_weights(cfg, g: Gen):
    """HF LlamaForCausalLM / Qwen2ForCausalLM tensors ([out, in] Linear)."""
    h, f, v = cfg['hidden_size'], cfg['intermediate_size'], cfg['vocab_size']
    nh, nkv = cfg['num_attention_heads'], cfg['num_key_value_heads']
    hd = cfg.get('head_dim') or h // nh
    s = 1.0 / np.sqrt(h)
    w = {'model.embed_tokens.weight': g.normal((v, h), 1.0),
         'model.norm.weight': g.normal((h,), 0.2, 1.0)}
    bias = cfg['model_type'] in ('qwen2', 'qwen2_moe')
    for i in range(cfg['num_hidden_layers']):
        p = f'model.layers.{i}.'
        w[p + 'input_layernorm.weight'] = g.normal((h,), 0.2, 1.0)
        w[p + 'post_attention_layernorm.weight'] = g.normal((h,), 0.2, 1.0)
        w[p + 'self_attn.q_proj.weight'] = g.normal((nh * hd, h), s)
        w[p + 'self_attn.k_proj.weight'] = g.normal((nkv * hd, h), s)
        w[p + 'self_attn.v_proj.weight'] = g.normal((nkv * hd, h), s)
        w[p + 'self_attn.o_proj.weight'] = g.normal((h, nh * hd), s)
        if cfg['model_type'] in ('qwen3', 'qwen3_moe'):
            w[p + 'self_attn.q_norm.weight'] = g.normal((hd,), 0.2, 1.0)
            w[p + 'self_attn.k_norm.weight'] = g.normal((hd,), 0.2, 1.0)
        if cfg['model_type'] == 'gemma3_text':  # applied as (1 + w)
            w[p + 'self_attn.q_norm.weight'] = g.normal((hd,), 0.2)
            w[p + 'self_attn.k_norm.weight'] = g.normal((hd,), 0.2)
        if bias:
            w[p + 'self_attn.q_proj.bias'] = g.normal((nh * hd,), 0.5)
            w[p + 'self_attn.k_proj.bias'] = g.normal((nkv * hd,), 0.5)
            w[p + 'self_attn.v_proj.bias'] = g.normal((nkv * hd,), 0.5)
        if is_moe_layer(cfg, i):
            w.update(moe_hf_weights(cfg, g, p))
            continue
        w[p + 'mlp.gate_proj.weight'] = g.normal((f, h), s)
        w[p + 'mlp.up_proj.weight'] = g.normal((f, h), s)
        w[p + 'mlp.down_proj.weight'] = g.normal((h, f), 1.0 / np.sqrt(f))
    if cfg['model_type'] in ('gemma2', 'gemma3_text'):
        # Gemma's norms are applied as (1 + w): weights near 0.
        for name in list(w):
            if name.endswith('layernorm.weight') or name == 'model.norm.weight':
                w[name] = g.normal(w[name].shape, 0.2)
        for i in range(cfg['num_hidden_layers']):
            p = f'model.layers.{i}.'
            w[p + 'pre_feedforward_layernorm.weight'] = g.normal((h,), 0.2)
            w[p + 'post_feedforward_layernorm.weight'] = g.normal((h,), 0.2)
    if not cfg.get('tie_word_embeddings', True):
        w['lm_head.weight'] = g.normal((v, h), 4.0 * s)
    if cfg['model_type'] == 'phi3':  # fused as Phi3ForCausalLM stores them
        for i in range(cfg['num_hidden_layers']):
            p = f'model.layers.{i}.'
            w[p + 'self_attn.qkv_proj.weight'] = np.concatenate(
                [w.pop(p + f'self_attn.{x}_proj.weight') for x in 'qkv'])
            w[p + 'mlp.gate_up_proj.weight'] = np.concatenate(
                [w.pop(p + 'mlp.gate_proj.weight'), w.pop(p + 'mlp.up_proj.weight')])
    return w


def is_moe_layer(cfg, i):
    """transformers' rule: a MoE layer unless in mlp_only_layers or off the
    decoder_sparse_step (Mixtral: every layer)."""
    if cfg['model_type'] == 'mixtral':
        return True
    if cfg['model_type'] not in ('qwen2_moe', 'qwen3_moe'):
        return False
    return (i not in (cfg.get('mlp_only_layers') or [])
            and (i + 1) % cfg.get('decoder_sparse_step', 1) == 0)


def moe_hf_weights(cfg, g: Gen, p):
    """One MoE layer's router, experts and shared expert, HF names."""
    h = cfg['hidden_size']
    s = 1.0 / np.sqrt(h)
    if cfg['model_type'] == 'mixtral':
        n, f = cfg['num_local_experts'], cfg['intermediate_size']
        names, block = ('w1', 'w3', 'w2'), 'block_sparse_moe.'
    else:
        n, f = cfg['num_experts'], cfg['moe_intermediate_size']
        names, block = ('gate_proj', 'up_proj', 'down_proj'), 'mlp.'
    # The router's logits spread over a few units so routing is decisive.
    w = {p + block + 'gate.weight': g.normal((n, h), 2.0 * s)}
    for e in range(n):
        q = f'{p}{block}experts.{e}.'
        w[q + names[0] + '.weight'] = g.normal((f, h), s)
        w[q + names[1] + '.weight'] = g.normal((f, h), s)
        w[q + names[2] + '.weight'] = g.normal((h, f), 1.0 / np.sqrt(f))
    fs = cfg.get('shared_expert_intermediate_size', 0)
    if cfg['model_type'] == 'qwen2_moe':
        w[p + 'mlp.shared_expert.gate_proj.weight'] = g.normal((fs, h), s)
        w[p + 'mlp.shared_expert.up_proj.weight'] = g.normal((fs, h), s)
        w[p + 'mlp.shared_expert.down_proj.weight'] = g.normal((h, fs), 1.0 / np.sqrt(fs))
        w[p + 'mlp.shared_expert_gate.weight'] = g.normal((1, h), s)
    return w


def fuse_experts(cfg, hf):
    """transformers 5's Mixtral layout: the router renamed to mlp.gate and
    each layer's experts fused into mlp.experts.gate_up_proj [experts,
    2 ffn, hidden] (gate rows first) and mlp.experts.down_proj [experts,
    hidden, ffn]."""
    out = {}
    n = cfg['num_local_experts']
    for name, t in hf.items():
        if '.block_sparse_moe.experts.' not in name:
            out[name.replace('.block_sparse_moe.gate.', '.mlp.gate.')] = t
    for i in range(cfg['num_hidden_layers']):
        p = f'model.layers.{i}.'
        e = [p + f'block_sparse_moe.experts.{j}.' for j in range(n)]
        out[p + 'mlp.experts.gate_up_proj'] = np.stack(
            [np.concatenate([hf[x + 'w1.weight'], hf[x + 'w3.weight']]) for x in e])
        out[p + 'mlp.experts.down_proj'] = np.stack([hf[x + 'w2.weight'] for x in e])
    return out


def gpt2_hf_weights(cfg, g: Gen):
    """HF GPT2LMHeadModel tensors; Conv1D weights are [in, out]."""
    h, v, n = cfg['n_embd'], cfg['vocab_size'], cfg['n_positions']
    s = 1.0 / np.sqrt(h)
    w = {'transformer.wte.weight': g.normal((v, h), 1.0),
         'transformer.wpe.weight': g.normal((n, h), 0.5),
         'transformer.ln_f.weight': g.normal((h,), 0.2, 1.0),
         'transformer.ln_f.bias': g.normal((h,), 0.1)}
    for i in range(cfg['n_layer']):
        p = f'transformer.h.{i}.'
        w[p + 'ln_1.weight'] = g.normal((h,), 0.2, 1.0)
        w[p + 'ln_1.bias'] = g.normal((h,), 0.1)
        w[p + 'attn.c_attn.weight'] = g.normal((h, 3 * h), s)
        w[p + 'attn.c_attn.bias'] = g.normal((3 * h,), 0.1)
        w[p + 'attn.c_proj.weight'] = g.normal((h, h), s)
        w[p + 'attn.c_proj.bias'] = g.normal((h,), 0.1)
        w[p + 'ln_2.weight'] = g.normal((h,), 0.2, 1.0)
        w[p + 'ln_2.bias'] = g.normal((h,), 0.1)
        w[p + 'mlp.c_fc.weight'] = g.normal((h, 4 * h), s)
        w[p + 'mlp.c_fc.bias'] = g.normal((4 * h,), 0.1)
        w[p + 'mlp.c_proj.weight'] = g.normal((4 * h, h), 0.5 * s)
        w[p + 'mlp.c_proj.bias'] = g.normal((h,), 0.1)
    return w


# ----------------------------------------------------------------------------
# Tokenizer (byte-level BPE, GPT-2 style)
# ----------------------------------------------------------------------------

def bytes_to_unicode():
    """GPT-2's byte -> printable unicode char map (bytes that are printable
    latin-1 map to themselves, the rest to U+0100 upwards)."""
    keep = (list(range(ord('!'), ord('~') + 1)) + list(range(0xA1, 0xAD))
            + list(range(0xAE, 0x100)))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def tiny_vocab():
    """256 byte tokens (id = byte value), then merges, then one special.

    Returns (tokens, token_types, merges) with len(tokens) == VOCAB.
    """
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]
    pairs = [('Ġ', 't'), ('h', 'e'), ('i', 'n'), ('Ġ', 'a'), ('e', 'r'),
             ('o', 'n'), ('Ġt', 'he'), ('r', 'e'), ('a', 't'), ('e', 'n'),
             ('o', 'r'), ('Ġ', 's'), ('Ġ', 'w'), ('Ġ', 'c'), ('i', 's'),
             ('Ġ', 'o'), ('i', 't'), ('e', 's'), ('Ġ', 'b'), ('a', 'n'),
             ('Ġ', 'f'), ('Ġ', 'p'), ('Ġ', 'm'), ('a', 'r'), ('o', 'u'),
             ('Ġ', 'd'), ('l', 'l'), ('Ġ', 'h'), ('e', 'd'), ('in', 'g'),
             ('Ġ', 'i'), ('Ġo', 'f'), ('Ġa', 'n'), ('Ġan', 'd'), ('Ġ', 'T'),
             ('Ġt', 'o'), ('Ġ', 'l'), ('a', 'l'), ('Ġ', 'n'), ('l', 'e'),
             ('Ġ', 'e'), ('Ġ', 'g'), ('i', 'c'), ('Ġ', 'r'), ('Ġ', 'u')]
    pairs = pairs[:VOCAB - 256 - 1]
    merges = []
    for a, b in pairs:
        assert a in tokens and b in tokens and a + b not in tokens, (a, b)
        tokens.append(a + b)
        merges.append(f'{a} {b}')
    tokens.append(SPECIAL)
    assert len(tokens) == VOCAB
    types = [1] * (VOCAB - 1) + [3]  # 1 = normal, 3 = control
    return tokens, types, merges


def write_hf_tokenizer(path, tokens, merges):
    """tokenizer.json via the `tokenizers` package (optional dependency)."""
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers
        from tokenizers import AddedToken
    except ImportError:
        return False
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab,
                               merges=[tuple(m.split(' ')) for m in merges]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(SPECIAL, special=True)])
    tok.save(os.path.join(path, 'tokenizer.json'))
    return True


# ----------------------------------------------------------------------------
# Writers
# ----------------------------------------------------------------------------

def to_bf16_bits(x):
    # Exact: values were generated bf16-representable.
    return (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def write_safetensors(path, tensors, dtype):
    """Hand-rolled writer (numpy has no bfloat16). dtype: F32, F16 or BF16."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        arr = np.asarray(tensors[name], np.float32)
        if dtype == 'F32':
            raw = arr.astype('<f4').tobytes()
        elif dtype == 'F16':
            raw = arr.astype('<f2').tobytes()
        else:
            raw = to_bf16_bits(arr).astype('<u2').tobytes()
        header[name] = {'dtype': dtype, 'shape': list(arr.shape),
                        'data_offsets': [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header['__metadata__'] = {'format': 'pt'}
    hbytes = json.dumps(header, separators=(',', ':')).encode()
    hbytes += b' ' * (-len(hbytes) % 8)  # keep data 8-byte aligned
    with open(path, 'wb') as f:
        f.write(len(hbytes).to_bytes(8, 'little'))
        f.write(hbytes)
        for b in blobs:
            f.write(b)


def write_hf_dir(path, cfg, tensors, dtype, tokens, merges, shards=1):
    os.makedirs(path, exist_ok=True)
    cfg = dict(cfg, torch_dtype={'F32': 'float32', 'F16': 'float16',
                                 'BF16': 'bfloat16'}[dtype])
    with open(os.path.join(path, 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=2)
    if shards == 1:
        write_safetensors(os.path.join(path, 'model.safetensors'), tensors, dtype)
    else:
        names = sorted(tensors)
        weight_map = {}
        for s in range(shards):
            fn = f'model-{s + 1:05d}-of-{shards:05d}.safetensors'
            part = {n: tensors[n] for n in names[s::shards]}
            write_safetensors(os.path.join(path, fn), part, dtype)
            weight_map.update({n: fn for n in part})
        with open(os.path.join(path, 'model.safetensors.index.json'), 'w') as f:
            json.dump({'metadata': {}, 'weight_map': weight_map}, f, indent=2)
    write_hf_tokenizer(path, tokens, merges)


def permute_qk(w, n_head):
    """llama.cpp's converter permutation: HF q/k rows are laid out for
    rotate_half rope; after this, rope on adjacent pairs is equivalent."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def resolved_rope(cfg):
    """(theta, scaling dict) from either config form (transformers 5's
    rope_parameters, or rope_theta + rope_scaling)."""
    params = cfg.get('rope_parameters')
    if params:
        return params['rope_theta'], params
    return cfg['rope_theta'], cfg.get('rope_scaling') or {}


def llama3_rope_factors(cfg):
    """Per-frequency divisors as llama.cpp's converter writes rope_freqs."""
    base, rs = resolved_rope(cfg)
    hd = cfg['hidden_size'] // cfg['num_attention_heads']
    factor, lo, hi = rs['factor'], rs['low_freq_factor'], rs['high_freq_factor']
    old = rs['original_max_position_embeddings']
    out = []
    for i in range(0, hd, 2):
        wavelen = 2 * np.pi / (1.0 / base ** (i / hd))
        if wavelen < old / hi:
            out.append(1.0)
        elif wavelen > old / lo:
            out.append(factor)
        else:
            smooth = (old / wavelen - lo) / (hi - lo)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, np.float32)


def hf_to_gguf_tensors(cfg, hf):
    """HF tensors -> {gguf name: float32 array in row-major [out, in]}."""
    out = {}
    if cfg['model_type'] == 'gpt2':
        def g(name):
            return hf['transformer.' + name]
        out['token_embd.weight'] = g('wte.weight')
        out['position_embd.weight'] = g('wpe.weight')
        out['output_norm.weight'] = g('ln_f.weight')
        out['output_norm.bias'] = g('ln_f.bias')
        for i in range(cfg['n_layer']):
            p, q = f'h.{i}.', f'blk.{i}.'
            for src, dst in (('ln_1', 'attn_norm'), ('ln_2', 'ffn_norm')):
                out[q + dst + '.weight'] = g(p + src + '.weight')
                out[q + dst + '.bias'] = g(p + src + '.bias')
            for src, dst in (('attn.c_attn', 'attn_qkv'), ('attn.c_proj', 'attn_output'),
                             ('mlp.c_fc', 'ffn_up'), ('mlp.c_proj', 'ffn_down')):
                # Conv1D [in, out] -> [out, in] (GGUF ne = [in, out]).
                out[q + dst + '.weight'] = np.ascontiguousarray(g(p + src + '.weight').T)
                out[q + dst + '.bias'] = g(p + src + '.bias')
        return out

    # llama.cpp converts Mistral as arch llama (permuted); qwen2 GGUF stays
    # unpermuted (NEOX).
    permute = cfg['model_type'] in ('llama', 'mistral', 'mixtral')
    nh, nkv = cfg['num_attention_heads'], cfg['num_key_value_heads']
    out['token_embd.weight'] = hf['model.embed_tokens.weight']
    out['output_norm.weight'] = hf['model.norm.weight']
    if 'lm_head.weight' in hf:
        out['output.weight'] = hf['lm_head.weight']
    gemma = cfg['model_type'] in ('gemma2', 'gemma3_text')
    if gemma:  # llama.cpp stores Gemma's norms (q/k norms too) as w + 1
        out['output_norm.weight'] = hf['model.norm.weight'] + 1.0
    if cfg['model_type'] == 'phi3':
        rs = cfg.get('rope_scaling') or {}
        if rs:  # as llama.cpp's converter writes LongRoPE
            out['rope_factors_long.weight'] = np.array(rs['long_factor'], np.float32)
            out['rope_factors_short.weight'] = np.array(rs['short_factor'], np.float32)
    names = {'input_layernorm': 'attn_norm', 'post_attention_layernorm': 'ffn_norm',
             # Phi-3: llama.cpp keeps qkv fused and names gate_up ffn_up.
             'self_attn.qkv_proj': 'attn_qkv', 'mlp.gate_up_proj': 'ffn_up',
             'self_attn.q_proj': 'attn_q', 'self_attn.k_proj': 'attn_k',
             'self_attn.v_proj': 'attn_v', 'self_attn.o_proj': 'attn_output',
             'self_attn.q_norm': 'attn_q_norm', 'self_attn.k_norm': 'attn_k_norm',
             'mlp.gate_proj': 'ffn_gate', 'mlp.up_proj': 'ffn_up',
             'mlp.down_proj': 'ffn_down'}
    if gemma:
        names.update({'post_attention_layernorm': 'post_attention_norm',
                      'pre_feedforward_layernorm': 'ffn_norm',
                      'post_feedforward_layernorm': 'post_ffw_norm'})
    for i in range(cfg['num_hidden_layers']):
        for src, dst in names.items():
            for kind in ('weight', 'bias'):
                t = hf.get(f'model.layers.{i}.{src}.{kind}')
                if t is None:
                    continue
                if permute and dst == 'attn_q':
                    t = permute_qk(t, nh)
                elif permute and dst == 'attn_k':
                    t = permute_qk(t, nkv)
                if gemma and dst.endswith('norm'):
                    t = t + 1.0
                out[f'blk.{i}.{dst}.{kind}'] = t
    for i in range(cfg['num_hidden_layers']):
        if is_moe_layer(cfg, i):
            out.update(moe_gguf_tensors(cfg, hf, i))
    rs = resolved_rope(cfg)[1]
    if rs.get('rope_type', rs.get('type')) == 'llama3':
        out['rope_freqs.weight'] = llama3_rope_factors(cfg)
    return out


def moe_gguf_tensors(cfg, hf, i):
    """Layer i's MoE tensors as llama.cpp's converter writes them: the
    experts stacked into [experts, out, in] (ne [in, out, experts])."""
    p = f'model.layers.{i}.'
    q = f'blk.{i}.'
    if cfg['model_type'] == 'mixtral':
        n, block = cfg['num_local_experts'], 'block_sparse_moe.'
        names = {'w1': 'ffn_gate_exps', 'w3': 'ffn_up_exps', 'w2': 'ffn_down_exps'}
    else:
        n, block = cfg['num_experts'], 'mlp.'
        names = {'gate_proj': 'ffn_gate_exps', 'up_proj': 'ffn_up_exps',
                 'down_proj': 'ffn_down_exps'}
    out = {q + 'ffn_gate_inp.weight': hf[p + block + 'gate.weight']}
    for src, dst in names.items():
        out[q + dst + '.weight'] = np.stack(
            [hf[f'{p}{block}experts.{e}.{src}.weight'] for e in range(n)])
    if cfg['model_type'] == 'qwen2_moe':
        for src, dst in (('gate_proj', 'ffn_gate_shexp'), ('up_proj', 'ffn_up_shexp'),
                         ('down_proj', 'ffn_down_shexp')):
            out[q + dst + '.weight'] = hf[f'{p}mlp.shared_expert.{src}.weight']
        out[q + 'ffn_gate_inp_shexp.weight'] = hf[p + 'mlp.shared_expert_gate.weight'].reshape(-1)
    return out


GGUF_TYPES = {'f32': (gguf.GGMLQuantizationType.F32, 0),
              'f16': (gguf.GGMLQuantizationType.F16, 1),
              'q8_0': (gguf.GGMLQuantizationType.Q8_0, 7),
              'q4_1': (gguf.GGMLQuantizationType.Q4_1, 3)}


def write_gguf(path, cfg, tensors, qtype_name, tokens, types, merges):
    qtype, file_type = GGUF_TYPES[qtype_name]
    is_gpt2 = cfg['model_type'] == 'gpt2'
    # 'llama', 'qwen2' or 'gpt2'; Mistral is written as llama.cpp does, as
    # llama with the window in attention.sliding_window.
    # Mixtral is llama with expert keys; qwen2_moe -> qwen2moe.
    arch = {'mistral': 'llama', 'mixtral': 'llama', 'gemma3_text': 'gemma3'}.get(
        cfg['model_type'], cfg['model_type'].replace('_', ''))
    w = gguf.GGUFWriter(path, arch)  # writes general.architecture
    w.add_string('general.name', f'rill-tiny-{arch}')
    w.add_uint32('general.file_type', file_type)
    w.add_uint32('general.quantization_version', 2)
    if is_gpt2:
        h = cfg['n_embd']
        w.add_uint32(f'{arch}.context_length', cfg['n_positions'])
        w.add_uint32(f'{arch}.embedding_length', h)
        w.add_uint32(f'{arch}.feed_forward_length', 4 * h)
        w.add_uint32(f'{arch}.block_count', cfg['n_layer'])
        w.add_uint32(f'{arch}.attention.head_count', cfg['n_head'])
        w.add_float32(f'{arch}.attention.layer_norm_epsilon', cfg['layer_norm_epsilon'])
    else:
        h = cfg['hidden_size']
        nh = cfg['num_attention_heads']
        w.add_uint32(f'{arch}.context_length', cfg['max_position_embeddings'])
        w.add_uint32(f'{arch}.embedding_length', h)
        w.add_uint32(f'{arch}.feed_forward_length', cfg['intermediate_size'])
        w.add_uint32(f'{arch}.block_count', cfg['num_hidden_layers'])
        w.add_uint32(f'{arch}.attention.head_count', nh)
        w.add_uint32(f'{arch}.attention.head_count_kv', cfg['num_key_value_heads'])
        theta, rs = resolved_rope(cfg)
        w.add_float32(f'{arch}.rope.freq_base', theta)
        if cfg.get('sliding_window'):
            w.add_uint32(f'{arch}.attention.sliding_window', cfg['sliding_window'])
        if cfg.get('sliding_window_pattern'):
            # Both forms llama.cpp reads: a period (f16, q4_1 files) and one
            # bool per layer, as its model saver writes it (f32, q8_0).
            n = cfg['sliding_window_pattern']
            key = f'{arch}.attention.sliding_window_pattern'
            if qtype_name in ('f32', 'q8_0'):
                w.add_array(key, [i % n < n - 1 for i in range(cfg['num_hidden_layers'])])
            else:
                w.add_uint32(key, n)
        for key in ('attn_logit_softcapping', 'final_logit_softcapping'):
            if cfg.get(key):
                w.add_float32(f'{arch}.{key}', cfg[key])
        w.add_float32(f'{arch}.attention.layer_norm_rms_epsilon', cfg['rms_norm_eps'])
        hd = cfg.get('head_dim') or h // nh
        if arch != 'phi3':
            w.add_uint32(f'{arch}.rope.dimension_count', hd)
        if hd != h // nh:
            w.add_uint32(f'{arch}.attention.key_length', hd)
            w.add_uint32(f'{arch}.attention.value_length', hd)
        if cfg['model_type'] == 'mixtral':
            w.add_uint32(f'{arch}.expert_count', cfg['num_local_experts'])
            w.add_uint32(f'{arch}.expert_used_count', cfg['num_experts_per_tok'])
        elif cfg['model_type'] in ('qwen2_moe', 'qwen3_moe'):
            w.add_uint32(f'{arch}.expert_count', cfg['num_experts'])
            w.add_uint32(f'{arch}.expert_used_count', cfg['num_experts_per_tok'])
            w.add_uint32(f'{arch}.expert_feed_forward_length', cfg['moe_intermediate_size'])
            if cfg['model_type'] == 'qwen2_moe':
                w.add_uint32(f'{arch}.expert_shared_feed_forward_length',
                             cfg['shared_expert_intermediate_size'])
        if rs.get('rope_type', rs.get('type')) == 'linear':
            w.add_string(f'{arch}.rope.scaling.type', 'linear')
            w.add_float32(f'{arch}.rope.scaling.factor', rs['factor'])
        if arch == 'phi3':
            orig = cfg['original_max_position_embeddings']
            w.add_uint32(f'{arch}.rope.scaling.original_context_length', orig)
            w.add_uint32(f'{arch}.rope.dimension_count',
                         int(hd * cfg.get('partial_rotary_factor', 1.0)))
            if rs:
                scale = cfg['max_position_embeddings'] / orig
                w.add_float32(f'{arch}.rope.scaling.attn_factor',
                              np.sqrt(1 + np.log(scale) / np.log(orig)) if scale > 1 else 1.0)
    w.add_uint32(f'{arch}.vocab_size', cfg['vocab_size'])
    w.add_string('tokenizer.ggml.model', 'gpt2')
    w.add_string('tokenizer.ggml.pre', 'gpt-2')
    w.add_array('tokenizer.ggml.tokens', tokens)
    w.add_array('tokenizer.ggml.token_type', types)
    w.add_array('tokenizer.ggml.merges', merges)
    w.add_uint32('tokenizer.ggml.bos_token_id', VOCAB - 1)
    w.add_uint32('tokenizer.ggml.eos_token_id', VOCAB - 1)
    w.add_bool('tokenizer.ggml.add_bos_token', False)

    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr, np.float32)
        # Like llama.cpp: 1-D tensors (norms, biases, rope_freqs) and MoE
        # routers stay F32.
        if (arr.ndim >= 2 and qtype != gguf.GGMLQuantizationType.F32
                and not name.endswith('ffn_gate_inp.weight')):
            if qtype == gguf.GGMLQuantizationType.F16:
                w.add_tensor(name, arr.astype(np.float16))
            else:
                assert arr.shape[-1] % 32 == 0, name
                w.add_tensor(name, gguf.quants.quantize(arr, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def generate(out_dir, seed):
    os.makedirs(out_dir, exist_ok=True)
    tokens, types, merges = tiny_vocab()
    manifest = {'seed': seed, 'vocab_size': VOCAB, 'models': {}}
    for idx, (name, cfg) in enumerate(model_specs().items()):
        # mixtral_tf5 holds mixtral's weights in the fused layout, so the
        # two forms can be compared (selftest.py).
        same_as = list(model_specs()).index('mixtral') if name == 'mixtral_tf5' else idx
        g = Gen(seed * 1000 + same_as)
        if cfg['model_type'] == 'gpt2':
            hf = gpt2_hf_weights(cfg, g)
        else:
            hf = llama_hf_weights(text_config(cfg), g)
        if cfg['model_type'] == 'gemma3':
            hf = {n.replace('model.', 'model.language_model.', 1): t for n, t in hf.items()}
            hf['model.vision_tower.patch_embedding.weight'] = g.normal((4, 4), 1.0)
        if name == 'mixtral_tf5':
            hf = fuse_experts(cfg, hf)
        mdir = os.path.join(out_dir, name)
        entry = {'config': cfg, 'hf': {}, 'gguf': {}}
        for dtype in ('F32', 'F16', 'BF16'):
            d = os.path.join(mdir, f'hf-{dtype.lower()}')
            write_hf_dir(d, cfg, hf, dtype, tokens, merges)
            entry['hf'][dtype.lower()] = d
        if name == 'llama_gqa':
            d = os.path.join(mdir, 'hf-f32-sharded')
            write_hf_dir(d, cfg, hf, 'F32', tokens, merges, shards=2)
            entry['hf']['f32_sharded'] = d
        if cfg.get('use_sliding_window') or name in ('gemma2_scalar', 'gemma3_tf5', 'gemma3_mm',
                                                      'qwen2_moe_dense0', 'mixtral_tf5'):
            manifest['models'][name] = entry  # no GGUF form for these
            continue
        gt = hf_to_gguf_tensors(cfg, hf)
        for q in GGUF_TYPES:
            if q == 'q4_1' and (name == 'mixtral' or 'moe' in name):
                continue  # MoE forms: f32, f16 and q8_0 are enough
            p = os.path.join(mdir, f'model.{q}.gguf')
            write_gguf(p, cfg, gt, q, tokens, types, merges)
            entry['gguf'][q] = p
        manifest['models'][name] = entry
    with open(os.path.join(out_dir, 'manifest.json'), 'w') as f:
        json.dump(manifest, f, indent=2)
    return manifest


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--out', required=True, help='output directory')
    ap.add_argument('--seed', type=int, default=1234)
    args = ap.parse_args(argv)
    m = generate(args.out, args.seed)
    print(json.dumps({'out': os.path.abspath(args.out), 'seed': args.seed,
                      'models': sorted(m['models'])}))
    return 0


if __name__ == '__main__':
    sys.exit(main())
