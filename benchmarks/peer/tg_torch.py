#!/usr/bin/python3
"""PyTorch reference implementation of tgraph's Transformer (docs/model.md).

Two uses, never a test-time dependency of the C code:
  * generating the committed reference fixtures of the C tests
    (tests/fixtures/make_model_fixtures.py);
  * the speed peer of the benchmarks (benchmarks/peer/train_step.py).

It follows docs/model.md literally; section numbers below refer to it.
  §1  encoder-decoder Transformer, post-LN (default) or pre-LN with final norms, interleaved
      sinusoidal or learned positions, token embedding scaled by sqrt(d), tied output
      projection logits = dec_out . E^T (no bias), ReLU or GELU-tanh FFN, dropout placements,
      label-smoothed cross-entropy, Adam + Noam schedule, greedy and beam decoding.
  §2  attention variants mha, fixed_head, talking_heads, interacting (literal all-pairs form
      and summed-query form), interacting_pairwise.
  §4  parameter names, token conventions, safetensors checkpoints (written and read with the
      standard library + torch only; the `safetensors` package is not needed).

Run `python3 tg_torch.py --selftest` to check the identities of §2 numerically (float64).
Requires torch >= 1.12 (GELU tanh form); written against Debian's torch 1.13.
"""

import json
import math
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPECIALS = ["<pad>", "<unk>", "<s>", "</s>"]
ATTENTIONS = ("mha", "fixed_head", "talking_heads", "interacting", "interacting_pairwise")
CONFIG_KEYS = ("d_model", "heads", "enc_layers", "dec_layers", "d_ff", "attention", "head_dim",
               "norm", "pos", "max_len", "share_embeddings", "activation", "dropout",
               "label_smoothing")


# ---------------------------------------------------------------------------------------------
# Configuration and vocabularies (§4)
# ---------------------------------------------------------------------------------------------

class Config:
    """Model configuration; the keys are exactly those of the checkpoint's `config` (§4)."""

    def __init__(self, d_model=512, heads=8, enc_layers=6, dec_layers=6, d_ff=2048,
                 attention="mha", head_dim=None, norm="post", pos="sinusoidal", max_len=1024,
                 share_embeddings=False, activation="relu", dropout=0.1, label_smoothing=0.1):
        self.d_model = int(d_model)
        self.heads = int(heads)
        self.enc_layers = int(enc_layers)
        self.dec_layers = int(dec_layers)
        self.d_ff = int(d_ff)
        self.attention = attention
        self.head_dim = None if head_dim is None else int(head_dim)
        self.norm = norm
        self.pos = pos
        self.max_len = int(max_len)
        self.share_embeddings = bool(share_embeddings)
        self.activation = activation
        self.dropout = float(dropout)
        self.label_smoothing = float(label_smoothing)
        self.validate()

    def validate(self):
        if self.attention not in ATTENTIONS:
            raise ValueError("config: attention must be one of %s, got %r"
                             % (", ".join(ATTENTIONS), self.attention))
        if self.attention == "fixed_head":
            if self.head_dim is None or self.head_dim <= 0:
                raise ValueError("config: fixed_head needs a positive head_dim")
        else:
            if self.d_model % self.heads != 0:
                raise ValueError("config: d_model %d is not divisible by heads %d"
                                 % (self.d_model, self.heads))
        if self.norm not in ("post", "pre"):
            raise ValueError("config: norm must be post or pre, got %r" % self.norm)
        if self.pos not in ("sinusoidal", "learned"):
            raise ValueError("config: pos must be sinusoidal or learned, got %r" % self.pos)
        if self.activation not in ("relu", "gelu"):
            raise ValueError("config: activation must be relu or gelu, got %r" % self.activation)
        if min(self.d_model, self.heads, self.d_ff, self.max_len) <= 0:
            raise ValueError("config: d_model, heads, d_ff and max_len must be positive")
        if self.enc_layers < 0 or self.dec_layers < 0:
            raise ValueError("config: layer counts must not be negative")

    def to_dict(self):
        d = {k: getattr(self, k) for k in CONFIG_KEYS}
        if self.attention != "fixed_head":
            d["head_dim"] = None
        return d

    @classmethod
    def from_dict(cls, d):
        missing = [k for k in CONFIG_KEYS if k not in d and k != "head_dim"]
        if missing:
            raise ValueError("config: missing required keys %s" % ", ".join(missing))
        return cls(**{k: d.get(k) for k in CONFIG_KEYS})  # unknown keys are ignored (§4)

    def __repr__(self):
        return "Config(%s)" % ", ".join("%s=%r" % kv for kv in self.to_dict().items())


class Vocab:
    """Token strings indexed by id; the four specials come first (§4)."""

    def __init__(self, tokens):
        tokens = list(tokens)
        if tokens[:4] != SPECIALS:
            raise ValueError("vocabulary must start with %s, got %s" % (SPECIALS, tokens[:4]))
        self.itos = tokens
        self.stoi = {}
        for i, t in enumerate(tokens):
            if t in self.stoi:
                raise ValueError("vocabulary: duplicate token %r" % t)
            self.stoi[t] = i

    @classmethod
    def build(cls, words):
        """Specials, then the given words in first-seen order (duplicates and specials dropped)."""
        seen = list(SPECIALS)
        have = set(seen)
        for w in words:
            if w not in have:
                have.add(w)
                seen.append(w)
        return cls(seen)

    def __len__(self):
        return len(self.itos)

    def __eq__(self, other):
        return isinstance(other, Vocab) and self.itos == other.itos

    def ids(self, sentence):
        """Whitespace-split a sentence (or take a token list); unknown tokens map to <unk>."""
        toks = sentence.split() if isinstance(sentence, str) else sentence
        return [self.stoi.get(t, UNK) for t in toks]

    def tokens(self, ids):
        return [self.itos[i] for i in ids]


def pad_batch(seqs, device=None):
    """Right-pad lists of ids with <pad> into a [B, max_len] int64 tensor."""
    n = max(1, max(len(s) for s in seqs))
    out = torch.full((len(seqs), n), PAD, dtype=torch.long, device=device)
    for b, s in enumerate(seqs):
        if s:
            out[b, :len(s)] = torch.tensor(s, dtype=torch.long)
    return out


def make_batch(src_vocab, tgt_vocab, src_sentences, tgt_sentences=None, device=None):
    """Token conventions of §4: source ids = tokens + </s>; decoder input = <s> + tokens;
    targets = tokens + </s>; right-padded with <pad>. Returns (src, tgt_in, tgt_out)."""
    src = pad_batch([src_vocab.ids(s) + [EOS] for s in src_sentences], device)
    if tgt_sentences is None:
        return src, None, None
    t = [tgt_vocab.ids(s) for s in tgt_sentences]
    tgt_in = pad_batch([[BOS] + x for x in t], device)
    tgt_out = pad_batch([x + [EOS] for x in t], device)
    return src, tgt_in, tgt_out


# ---------------------------------------------------------------------------------------------
# Masks (§1): key padding in every attention, causal in decoder self-attention. A masked logit
# is -inf; a row whose keys are all masked gives zero probabilities (not NaN).
# ---------------------------------------------------------------------------------------------

class AttnMask:
    """Additive mask `add` [B, 1, n or 1, m] (0 or -inf; None when nothing is masked) and
    `dead` [B, 1, n or 1, 1] (True where a query row has every key masked; None if no row is).

    Dead rows get an additive 0 instead of -inf, so the softmax stays finite in the forward
    and backward pass; their probabilities are then overwritten with zeros by masked_fill,
    whose gradient is exactly zero there (an additive -inf would send NaN into Q and K)."""

    def __init__(self, masked_bool, dtype):
        # masked_bool: bool [B, 1, n or 1, m], True = masked key; or None.
        self.add = None
        self.dead = None
        if masked_bool is None or not bool(masked_bool.any()):
            return
        dead = masked_bool.all(dim=-1, keepdim=True)
        if bool(dead.any()):
            self.dead = dead
            masked_bool = masked_bool & ~dead
        self.add = torch.zeros(masked_bool.shape, dtype=dtype,
                               device=masked_bool.device).masked_fill(masked_bool, float("-inf"))

    @staticmethod
    def padding(key_ids, dtype):
        return AttnMask((key_ids == PAD)[:, None, None, :], dtype)

    @staticmethod
    def causal_padding(tgt_ids, dtype):
        n = tgt_ids.shape[1]
        future = torch.triu(torch.ones(n, n, dtype=torch.bool, device=tgt_ids.device), 1)
        return AttnMask(future[None, None] | (tgt_ids == PAD)[:, None, None, :], dtype)


def masked_softmax(logits, mask, extra_dims=0):
    """softmax over the last axis of logits + mask; `extra_dims` axes are inserted after the
    batch axis of the mask (interacting_pairwise has [B, h_i, h_j, n, m] logits)."""
    add, dead = mask.add, mask.dead
    for _ in range(extra_dims):
        add = None if add is None else add.unsqueeze(1)
        dead = None if dead is None else dead.unsqueeze(1)
    if add is not None:
        logits = logits + add
    p = torch.softmax(logits, dim=-1)
    if dead is not None:
        p = p.masked_fill(dead, 0.0)
    return p


# ---------------------------------------------------------------------------------------------
# Attention variants (§2). Shapes: q [B, h, n, d_k], k [B, h, m, d_k], v [B, h, m, d_v].
# ---------------------------------------------------------------------------------------------

class Attention(nn.Module):
    """attend(X_q [B, n, d], X_kv [B, m, d], mask) -> [B, n, d] for every §2 variant.

    Parameters (§4): q_proj, k_proj, v_proj ([h*d_k, d] + bias), out_proj ([d, h*d_k] + bias;
    [d, h*h*d_k] for interacting_pairwise), pre_softmax_proj / post_softmax_proj ([h, h],
    talking_heads only). Head i owns rows [i*d_k, (i+1)*d_k) of q/k/v_proj.

    interacting_form selects how `interacting` is computed: "summed" ((sum_i Q_i) K_j^T, the
    cheap identity) or "literal" (all h^2 products Q_i K_j^T, then summed: the paper's cost)."""

    def __init__(self, d_model, heads, kind="mha", head_dim=None, attn_dropout=0.0,
                 interacting_form="summed"):
        super().__init__()
        if kind not in ATTENTIONS:
            raise ValueError("attention: unknown kind %r" % kind)
        if interacting_form not in ("summed", "literal"):
            raise ValueError("attention: interacting_form must be summed or literal")
        self.kind = kind
        self.heads = heads
        self.d_k = head_dim if kind == "fixed_head" else d_model // heads
        self.attn_dropout = attn_dropout
        self.interacting_form = interacting_form
        inner = heads * self.d_k
        self.q_proj = nn.Linear(d_model, inner)
        self.k_proj = nn.Linear(d_model, inner)
        self.v_proj = nn.Linear(d_model, inner)
        # interacting_pairwise: head_i = Concat_j O_ij has width h*d_v, so W_O is [d, h*h*d_v]
        # = [d, h*d]. This reading is a reconstruction from the paper's prose ("sub-sub-outputs"),
        # with h times MHA's output-projection parameters (docs/model.md §2.4).
        self.out_proj = nn.Linear(heads * inner if kind == "interacting_pairwise" else inner,
                                  d_model)
        if kind == "talking_heads":
            self.pre_softmax_proj = nn.Parameter(torch.eye(heads))
            self.post_softmax_proj = nn.Parameter(torch.eye(heads))

    def _split(self, x):
        B, n, _ = x.shape
        return x.view(B, n, self.heads, self.d_k).transpose(1, 2)  # [B, h, n, d_k]

    def forward(self, xq, xkv, mask):
        return self.attend(self._split(self.q_proj(xq)), self._split(self.k_proj(xkv)),
                           self._split(self.v_proj(xkv)), mask)

    # One query row (a decoding step) with one_query_products set: the products as broadcast
    # multiply + sum, which torch 1.13 runs ~2x faster on CPU than bmm's loop over tiny matrices
    # (benchmarks/peer/translate.py sets it; the reference keeps matmul).
    one_query_products = False

    def _qk(self, q, k):
        """q [..., n, d] . k [..., m, d]^T -> [..., n, m] (broadcasting the leading dims)."""
        if self.one_query_products and q.shape[-2] == 1:
            return (q * k).sum(-1).unsqueeze(-2)
        return torch.matmul(q, k.transpose(-1, -2))

    def _pv(self, p, v):
        """p [..., n, m] . v [..., m, d] -> [..., n, d]."""
        if self.one_query_products and p.shape[-2] == 1:
            return (p.transpose(-1, -2) * v).sum(-2, keepdim=True)
        return torch.matmul(p, v)

    def attend(self, q, k, v, mask):
        """The variant's core on projected, split q [B, h, n, d_k], k and v [B, h, m, d_k],
        through the output projection: forward() after its projections, and what a decoder
        with cached keys/values calls (benchmarks/peer/translate.py)."""
        B, h, n, dk = q.shape
        scale = 1.0 / math.sqrt(dk)
        drop = self.attn_dropout if self.training else 0.0

        if self.kind in ("mha", "fixed_head"):
            # head_i = softmax(Q_i K_i^T / sqrt(d_k) + mask) V_i   (§2.1, §2.2)
            p = masked_softmax(self._qk(q, k) * scale, mask)
            heads = self._pv(F.dropout(p, drop, True), v)
        elif self.kind == "talking_heads":
            # J_i = Q_i K_i^T / sqrt(d_k); L_j = sum_i J_i P_l[i, j]; mask added to L (after
            # mixing); W_j = softmax(L_j); U_k = sum_j W_j P_w[j, k] (no renormalisation);
            # dropout on U; head_k = U_k V_k   (§2.3)
            j = self._qk(q, k) * scale
            l = torch.einsum("binm,ij->bjnm", j, self.pre_softmax_proj)
            w = masked_softmax(l, mask)
            u = torch.einsum("bjnm,jk->bknm", w, self.post_softmax_proj)
            heads = self._pv(F.dropout(u, drop, True), v)
        elif self.kind == "interacting":
            # S_j = sum_i Q_i K_j^T / sqrt(d_k); P_j = softmax(S_j + mask); O_j = P_j V_j (§2.4)
            if self.interacting_form == "literal":
                # every (i, j) pair: [B, h_i, 1, n, d] x [B, 1, h_j, d, m] -> [B, h_i, h_j, n, m]
                pairs = self._qk(q.unsqueeze(2), k.unsqueeze(1))
                s = pairs.sum(dim=1) * scale
            else:
                # identity sum_i Q_i K_j^T = (sum_i Q_i) K_j^T
                s = self._qk(q.sum(dim=1, keepdim=True), k) * scale
            p = masked_softmax(s, mask)
            heads = self._pv(F.dropout(p, drop, True), v)
        else:  # interacting_pairwise
            # A_ij = softmax(Q_i K_j^T / sqrt(d_k) + mask); O_ij = A_ij V_j;
            # out = Concat_i Concat_j O_ij, i-major: column (i*h + j)*d_v + c is channel c of O_ij
            a = masked_softmax(self._qk(q.unsqueeze(2), k.unsqueeze(1)) * scale, mask,
                               extra_dims=1)
            o = self._pv(F.dropout(a, drop, True), v.unsqueeze(1))  # [B, i, j, n, d_v]
            return self.out_proj(o.permute(0, 3, 1, 2, 4).reshape(B, n, h * h * dk))

        return self.out_proj(heads.transpose(1, 2).reshape(B, n, h * dk))


# ---------------------------------------------------------------------------------------------
# Layers and the encoder-decoder (§1)
# ---------------------------------------------------------------------------------------------

class FFN(nn.Module):
    """FFN(x) = act(x W1^T + b1) W2^T + b2; act = ReLU or GELU (tanh form); optional dropout on
    the hidden activation (default 0, §1)."""

    def __init__(self, d_model, d_ff, activation="relu", dropout=0.0):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.activation = activation
        self.dropout = dropout

    def forward(self, x):
        x = self.fc1(x)
        x = F.relu(x) if self.activation == "relu" else F.gelu(x, approximate="tanh")
        return self.fc2(F.dropout(x, self.dropout, self.training))


def _sublayer(x, norm, fn, pre, p, training):
    """post-LN: LayerNorm(x + Dropout(f(x)));  pre-LN: x + Dropout(f(LayerNorm(x)))."""
    if pre:
        return x + F.dropout(fn(norm(x)), p, training)
    return norm(x + F.dropout(fn(x), p, training))


class EncoderLayer(nn.Module):
    def __init__(self, cfg, attn_kw, ffn_dropout):
        super().__init__()
        d = cfg.d_model
        self.self_attn = Attention(d, cfg.heads, cfg.attention, cfg.head_dim, **attn_kw)
        self.ffn = FFN(d, cfg.d_ff, cfg.activation, ffn_dropout)
        self.norm1 = nn.LayerNorm(d, eps=1e-5)
        self.norm2 = nn.LayerNorm(d, eps=1e-5)
        self.pre = cfg.norm == "pre"
        self.p = cfg.dropout

    def forward(self, x, mask):
        x = _sublayer(x, self.norm1, lambda y: self.self_attn(y, y, mask), self.pre, self.p,
                      self.training)
        return _sublayer(x, self.norm2, self.ffn, self.pre, self.p, self.training)


class DecoderLayer(nn.Module):
    def __init__(self, cfg, attn_kw, ffn_dropout):
        super().__init__()
        d = cfg.d_model
        self.self_attn = Attention(d, cfg.heads, cfg.attention, cfg.head_dim, **attn_kw)
        self.cross_attn = Attention(d, cfg.heads, cfg.attention, cfg.head_dim, **attn_kw)
        self.ffn = FFN(d, cfg.d_ff, cfg.activation, ffn_dropout)
        self.norm1 = nn.LayerNorm(d, eps=1e-5)
        self.norm2 = nn.LayerNorm(d, eps=1e-5)
        self.norm3 = nn.LayerNorm(d, eps=1e-5)
        self.pre = cfg.norm == "pre"
        self.p = cfg.dropout

    def forward(self, x, memory, self_mask, cross_mask):
        x = _sublayer(x, self.norm1, lambda y: self.self_attn(y, y, self_mask), self.pre,
                      self.p, self.training)
        x = _sublayer(x, self.norm2, lambda y: self.cross_attn(y, memory, cross_mask),
                      self.pre, self.p, self.training)
        return _sublayer(x, self.norm3, self.ffn, self.pre, self.p, self.training)


class Stack(nn.Module):
    """`layers` plus, for pre-LN only, the final `norm` (names encoder.norm / decoder.norm)."""

    def __init__(self, layers, d_model, pre):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        if pre:
            self.norm = nn.LayerNorm(d_model, eps=1e-5)


_PE_CACHE = {}


def sinusoidal(n, d, dtype=torch.float32, device=None):
    """Interleaved encoding, positions 0..n-1 (§1):
    PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
    Computed in float64, then cast."""
    key = (n, d, dtype, device)
    pe = _PE_CACHE.get(key)
    if pe is None:
        pos = torch.arange(n, dtype=torch.float64)[:, None]
        two_i = torch.arange(0, d, 2, dtype=torch.float64)
        angle = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64), two_i / d)
        pe64 = torch.zeros(n, d, dtype=torch.float64)
        pe64[:, 0::2] = torch.sin(angle)
        pe64[:, 1::2] = torch.cos(angle[:, : d // 2])
        pe = pe64.to(dtype=dtype, device=device)
        _PE_CACHE[key] = pe
    return pe


class Transformer(nn.Module):
    """The §1 encoder-decoder. state_dict() names are exactly the checkpoint names of §4.

    Options that are not part of the checkpoint config:
      tie_output       (default True): logits use the target embedding; False adds out_proj.weight
      attn_dropout     (default cfg.dropout): dropout on attention probabilities
      ffn_dropout      (default 0): dropout on the FFN hidden activation
      interacting_form ("summed" default, or "literal"): see Attention.
    src_vocab / tgt_vocab are Vocab objects (kept on the model for score / decoding)."""

    def __init__(self, cfg, src_vocab, tgt_vocab, tie_output=True, attn_dropout=None,
                 ffn_dropout=0.0, interacting_form="summed"):
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        self.src_vocab = src_vocab
        self.tgt_vocab = tgt_vocab
        d = cfg.d_model
        if cfg.share_embeddings:
            if src_vocab != tgt_vocab:
                raise ValueError("share_embeddings needs one joint vocabulary for both sides")
            self.embed = nn.Embedding(len(src_vocab), d)
        else:
            self.src_embed = nn.Embedding(len(src_vocab), d)
            self.tgt_embed = nn.Embedding(len(tgt_vocab), d)
        if cfg.pos == "learned":
            self.pos_embed = nn.Embedding(cfg.max_len, d)
        attn_kw = dict(attn_dropout=cfg.dropout if attn_dropout is None else attn_dropout,
                       interacting_form=interacting_form)
        pre = cfg.norm == "pre"
        self.encoder = Stack([EncoderLayer(cfg, attn_kw, ffn_dropout)
                              for _ in range(cfg.enc_layers)], d, pre)
        self.decoder = Stack([DecoderLayer(cfg, attn_kw, ffn_dropout)
                              for _ in range(cfg.dec_layers)], d, pre)
        self.tie_output = tie_output
        if not tie_output:
            self.out_proj = nn.Linear(d, len(tgt_vocab), bias=False)
        init_parameters(self)

    # -- pieces ---------------------------------------------------------------------------------
    def src_table(self):
        return self.embed if self.cfg.share_embeddings else self.src_embed

    def tgt_table(self):
        return self.embed if self.cfg.share_embeddings else self.tgt_embed

    def output_matrix(self):
        return self.tgt_table().weight if self.tie_output else self.out_proj.weight

    def set_interacting_form(self, form):
        for m in self.modules():
            if isinstance(m, Attention):
                m.interacting_form = form

    def embed_tokens(self, ids, table):
        """Dropout(E[ids] * sqrt(d) + PE[pos])   (§1)"""
        n = ids.shape[1]
        if n > self.cfg.max_len and self.cfg.pos == "learned":
            raise ValueError("sequence length %d exceeds max_len %d" % (n, self.cfg.max_len))
        x = table(ids) * math.sqrt(self.cfg.d_model)
        if self.cfg.pos == "learned":
            x = x + self.pos_embed.weight[:n]
        else:
            x = x + sinusoidal(n, self.cfg.d_model, x.dtype, x.device)
        return F.dropout(x, self.cfg.dropout, self.training)

    def _dtype(self):
        return self.src_table().weight.dtype

    def encode(self, src):
        """src [B, m] ids -> (memory [B, m, d], cross/self padding mask)."""
        mask = AttnMask.padding(src, self._dtype())
        x = self.embed_tokens(src, self.src_table())
        for layer in self.encoder.layers:
            x = layer(x, mask)
        if self.cfg.norm == "pre":
            x = self.encoder.norm(x)
        return x, mask

    def decode(self, tgt_in, memory, src_mask):
        """tgt_in [B, n] ids -> decoder output [B, n, d] (before the output projection)."""
        self_mask = AttnMask.causal_padding(tgt_in, self._dtype())
        x = self.embed_tokens(tgt_in, self.tgt_table())
        for layer in self.decoder.layers:
            x = layer(x, memory, self_mask, src_mask)
        if self.cfg.norm == "pre":
            x = self.decoder.norm(x)
        return x

    def project(self, hidden):
        """logits = decoder_out . E^T, no bias (§1)."""
        return F.linear(hidden, self.output_matrix())

    def forward(self, src, tgt_in):
        memory, src_mask = self.encode(src)
        return self.project(self.decode(tgt_in, memory, src_mask))


def init_parameters(model):
    """Default initialisation (§1): Xavier-uniform for every matrix, zero biases, ones for the
    LayerNorm gain, embeddings (token and learned-position tables) N(0, std = d^-0.5),
    talking-heads mixing matrices the identity. Uses the global torch RNG."""
    d = model.cfg.d_model
    for name, p in model.named_parameters():
        with torch.no_grad():
            leaf = name.rsplit(".", 1)[-1]
            if name in ("embed.weight", "src_embed.weight", "tgt_embed.weight",
                        "pos_embed.weight"):
                nn.init.normal_(p, 0.0, d ** -0.5)
            elif leaf in ("pre_softmax_proj", "post_softmax_proj"):
                p.copy_(torch.eye(p.shape[0], dtype=p.dtype))
            elif leaf == "bias":
                p.zero_()
            elif ".norm" in name or name.startswith("norm"):
                p.fill_(1.0)  # LayerNorm gain (its bias is caught above)
            elif p.dim() == 2:
                nn.init.xavier_uniform_(p)
            else:
                raise AssertionError("init: unhandled parameter %s" % name)


def param_count(model):
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------------------------------------
# Checkpoints: safetensors (§4), written with struct + json only
# ---------------------------------------------------------------------------------------------

_ST_DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16,
              "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
              "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8}
_ST_NAMES = {v: k for k, v in _ST_DTYPES.items()}


def _tensor_bytes(t):
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        raw = t.view(torch.int16).numpy().tobytes()
    else:
        raw = t.numpy().tobytes()
    if sys.byteorder != "little":
        raise RuntimeError("safetensors writer: big-endian hosts are not supported")
    return raw


def write_safetensors(path, tensors, metadata=None):
    """Write {name: tensor} as safetensors: u64 little-endian header length N, N bytes of JSON
    header (space-padded to a multiple of 8), then the tensors back to back in name order.
    metadata values must be strings."""
    header = {}
    if metadata:
        for k, v in metadata.items():
            if not isinstance(v, str):
                raise TypeError("safetensors metadata %r must be a string" % k)
        header["__metadata__"] = dict(metadata)
    blobs, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name]
        if t.dtype not in _ST_NAMES:
            raise TypeError("safetensors: unsupported dtype %s for %s" % (t.dtype, name))
        raw = _tensor_bytes(t)
        header[name] = {"dtype": _ST_NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    hb = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for raw in blobs:
            f.write(raw)


def read_safetensors(path):
    """Read a safetensors file -> ({name: tensor}, metadata dict). Checks the header length,
    dtypes, and that every tensor's byte range matches its shape and lies inside the file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("%s: too short for a safetensors header" % path)
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError("%s: header length %d exceeds file size %d" % (path, n, len(data)))
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError("%s: bad safetensors JSON header: %s" % (path, e))
    meta = header.pop("__metadata__", {}) or {}
    body = bytearray(data[8 + n:])
    out = {}
    for name, info in header.items():
        dt = _ST_DTYPES.get(info.get("dtype"))
        if dt is None:
            raise ValueError("%s: tensor %s has unsupported dtype %r" % (path, name,
                                                                        info.get("dtype")))
        shape = [int(s) for s in info["shape"]]
        b, e = info["data_offsets"]
        count = math.prod(shape)
        item = torch.empty((), dtype=dt).element_size()
        if not (0 <= b <= e <= len(body)) or e - b != count * item:
            raise ValueError("%s: tensor %s: byte range [%d, %d) does not fit shape %s in a "
                             "%d-byte body" % (path, name, b, e, shape, len(body)))
        if count == 0:
            t = torch.empty(shape, dtype=dt)
        else:
            t = torch.frombuffer(body, dtype=dt, count=count, offset=b).clone().view(shape)
        out[name] = t
    return out, meta


def save_checkpoint(path, model):
    """Write the model (as float32) with the §4 metadata: format, config, src_vocab, tgt_vocab."""
    meta = {
        "format": "tgraph",
        "config": json.dumps(model.cfg.to_dict()),
        "src_vocab": json.dumps(model.src_vocab.itos, ensure_ascii=False),
        "tgt_vocab": json.dumps(model.tgt_vocab.itos, ensure_ascii=False),
    }
    tensors = {k: v.detach().to(torch.float32) for k, v in model.state_dict().items()}
    write_safetensors(path, tensors, meta)


def load_checkpoint(path, dtype=torch.float32, **model_kw):
    """Read a §4 checkpoint into a fresh Transformer (in `dtype`, eval mode). Unknown tensors and
    config keys are ignored; missing tensors or shapes that disagree with the config raise
    ValueError naming the tensor. The output projection is untied iff out_proj.weight exists.
    model_kw: attn_dropout / ffn_dropout / interacting_form for the Transformer."""
    tensors, meta = read_safetensors(path)
    if meta.get("format") != "tgraph":
        raise ValueError("%s: __metadata__.format is %r, expected \"tgraph\""
                         % (path, meta.get("format")))
    for key in ("config", "src_vocab", "tgt_vocab"):
        if key not in meta:
            raise ValueError("%s: __metadata__ lacks %s" % (path, key))
    cfg = Config.from_dict(json.loads(meta["config"]))
    src_vocab = Vocab(json.loads(meta["src_vocab"]))
    tgt_vocab = Vocab(json.loads(meta["tgt_vocab"]))
    model = Transformer(cfg, src_vocab, tgt_vocab, tie_output="out_proj.weight" not in tensors,
                        **model_kw)
    state = model.state_dict()
    for name, want in state.items():
        if name not in tensors:
            raise ValueError("%s: missing tensor %s" % (path, name))
        if list(tensors[name].shape) != list(want.shape):
            raise ValueError("%s: tensor %s has shape %s, config wants %s"
                             % (path, name, list(tensors[name].shape), list(want.shape)))
        state[name] = tensors[name].to(want.dtype)
    model.load_state_dict(state)
    return model.to(dtype).eval()


# ---------------------------------------------------------------------------------------------
# Scoring, loss, optimiser (§1, §4)
# ---------------------------------------------------------------------------------------------

@torch.no_grad()
def score(model, src_sentences, tgt_sentences):
    """Per pair: sum over target positions of log_softmax(logits)[target], natural log, </s>
    included, softmax over the whole target vocabulary, dropout off (§4). Returns floats."""
    was_training = model.training
    model.eval()
    try:
        src, tgt_in, tgt_out = make_batch(model.src_vocab, model.tgt_vocab, src_sentences,
                                          tgt_sentences)
        lp = torch.log_softmax(model(src, tgt_in), dim=-1)
        tok = lp.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1)
        tok = tok.masked_fill(tgt_out == PAD, 0.0)
        return [float(x) for x in tok.sum(dim=1)]
    finally:
        model.train(was_training)


def label_smoothed_ce(logits, targets, eps=0.1, pad=PAD):
    """Mean over non-pad targets of -sum_k q(k) log p(k), q(k) = (1-eps)[k=y] + eps/V (§1).
    The explicit form; F.cross_entropy(label_smoothing=eps, ignore_index=pad) is the same
    quantity (checked in the self-test) and is what the benchmark uses."""
    lp = torch.log_softmax(logits.float() if logits.dtype == torch.float16 else logits, dim=-1)
    V = lp.shape[-1]
    nll = -lp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    uniform = -lp.sum(dim=-1) / V
    per_tok = (1.0 - eps) * nll + eps * uniform
    keep = targets != pad
    return per_tok[keep].sum() / keep.sum().clamp(min=1)


def fast_label_smoothed_ce(logits, targets, eps=0.1, pad=PAD):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                           ignore_index=pad, label_smoothing=eps)


def noam_lr(step, d_model, warmup=4000, factor=1.0):
    """lr(step) = factor * d^-0.5 * min(step^-0.5, step * warmup^-1.5), step from 1 (§1)."""
    step = max(int(step), 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def make_optimizer(model, warmup=4000, factor=1.0, foreach=None):
    """Adam(0.9, 0.98, eps 1e-9), no weight decay, Noam schedule (§1). Call sched.step() after
    every opt.step(); the first optimiser step uses lr(1)."""
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9,
                           weight_decay=0.0, foreach=foreach)
    d = model.cfg.d_model
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: noam_lr(s + 1, d, warmup, factor))
    return opt, sched


# ---------------------------------------------------------------------------------------------
# Decoding (§1). Reference implementations: every step re-runs the decoder over the whole
# prefix (exact, O(n^2)); the KV-cached incremental form must give the same result.
# ---------------------------------------------------------------------------------------------

def max_output_len(n_src_tokens, extra=50):
    """Maximum output length, counting </s>: source length (tokens, without </s>) + 50."""
    return n_src_tokens + extra


@torch.no_grad()
def greedy(model, src_sentences, extra=50, return_margins=False):
    """Greedy decoding, one sentence at a time: start from <s>, append the argmax over the whole
    target vocabulary (no token excluded) until </s> or max_output_len tokens. Returns token-id
    lists without </s>; with return_margins also the smallest top1 - top2 logit gap seen."""
    model.eval()
    outs, margins = [], []
    for s in src_sentences:
        ids = model.src_vocab.ids(s)
        src = torch.tensor([ids + [EOS]], dtype=torch.long)
        memory, src_mask = model.encode(src)
        ys = [BOS]
        margin = float("inf")
        for _ in range(max_output_len(len(ids), extra)):
            h = model.decode(torch.tensor([ys], dtype=torch.long), memory, src_mask)
            logits = model.project(h[:, -1])[0]
            top = torch.topk(logits, 2).values
            margin = min(margin, float(top[0] - top[1]))
            nxt = int(torch.argmax(logits))
            ys.append(nxt)
            if nxt == EOS:
                break
        out = ys[1:]
        if out and out[-1] == EOS:
            out = out[:-1]
        outs.append(out)
        margins.append(margin)
    return (outs, margins) if return_margins else outs


def gnmt_lp(length, alpha=0.6):
    """GNMT length penalty ((5 + |Y|) / 6)^alpha, |Y| counting </s> (§1)."""
    return ((5.0 + length) / 6.0) ** alpha


@torch.no_grad()
def beam_search(model, src_sentences, beam=4, alpha=0.6, extra=50):
    """Beam search per sentence: hypothesis score = log P(Y|X) / lp(Y). At each step the live
    hypotheses are expanded over the whole vocabulary; of the best 2*beam candidates by log P,
    those ending in </s> and ranked within the first `beam` are finished (scored with the
    penalty), the others refill the beam up to `beam`. Stops when `beam` hypotheses have
    finished or at max_output_len; if none finished, the live hypotheses compete with their
    penalty. Returns ids without </s>."""
    model.eval()
    results = []
    for s in src_sentences:
        ids = model.src_vocab.ids(s)
        src = torch.tensor([ids + [EOS]], dtype=torch.long)
        memory, src_mask = model.encode(src)
        live = [([BOS], 0.0)]
        finished = []
        limit = max_output_len(len(ids), extra)
        for _ in range(limit):
            tgt = torch.tensor([h for h, _ in live], dtype=torch.long)
            hid = model.decode(tgt, memory.expand(len(live), -1, -1), _expand_mask(src_mask,
                                                                              len(live)))
            lp = torch.log_softmax(model.project(hid[:, -1]), dim=-1)
            total = lp + torch.tensor([sc for _, sc in live], dtype=lp.dtype)[:, None]
            V = total.shape[1]
            vals, idx = torch.topk(total.reshape(-1), min(2 * beam, total.numel()))
            new_live = []
            for rank, (v, i) in enumerate(zip(vals.tolist(), idx.tolist())):
                b, tok = divmod(i, V)
                hyp = live[b][0] + [tok]
                if tok == EOS:
                    if rank < beam:  # only a top-`beam` candidate may finish
                        finished.append((hyp, v / gnmt_lp(len(hyp) - 1, alpha)))
                elif len(new_live) < beam:
                    new_live.append((hyp, v))
                if len(new_live) >= beam and len(finished) >= beam:
                    break
            if len(finished) >= beam or not new_live:
                break
            live = new_live
        if not finished:
            finished = [(h, sc / gnmt_lp(len(h) - 1, alpha)) for h, sc in live]
        best = max(finished, key=lambda x: x[1])[0][1:]
        if best and best[-1] == EOS:
            best = best[:-1]
        results.append(best)
    return results


def _expand_mask(mask, n):
    out = AttnMask(None, torch.float32)
    out.add = None if mask.add is None else mask.add.expand(n, -1, -1, -1)
    out.dead = None if mask.dead is None else mask.dead.expand(n, -1, -1, -1)
    return out


# ---------------------------------------------------------------------------------------------
# Self-test: identities of §2 and the conventions of §1/§4, in float64
# ---------------------------------------------------------------------------------------------

def _copy_common(dst, src):
    """Copy q/k/v/out projections of Attention src into dst (same shapes)."""
    with torch.no_grad():
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            getattr(dst, n).weight.copy_(getattr(src, n).weight)
            getattr(dst, n).bias.copy_(getattr(src, n).bias)


def _perturb(model, scale=0.1, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or ".norm" in name or "norm." in name:
                p.add_(scale * torch.randn(p.shape, generator=g, dtype=p.dtype))


def _torch_nn_scores(model, src_sentences, tgt_sentences):
    """Scores of an `mha` model recomputed with torch.nn.TransformerEncoderLayer /
    DecoderLayer (weights copied; our embeddings and output projection): an oracle for the
    layer wiring, masks, LayerNorm placement and activation that shares no code with ours."""
    cfg = model.cfg
    assert cfg.attention == "mha"
    dt = model._dtype()
    act = F.relu if cfg.activation == "relu" else (lambda x: F.gelu(x, approximate="tanh"))
    kw = dict(d_model=cfg.d_model, nhead=cfg.heads, dim_feedforward=cfg.d_ff, dropout=0.0,
              activation=act, batch_first=True, norm_first=cfg.norm == "pre")

    def attn(dst, src):
        dst.in_proj_weight.copy_(torch.cat([src.q_proj.weight, src.k_proj.weight,
                                            src.v_proj.weight]))
        dst.in_proj_bias.copy_(torch.cat([src.q_proj.bias, src.k_proj.bias, src.v_proj.bias]))
        dst.out_proj.weight.copy_(src.out_proj.weight)
        dst.out_proj.bias.copy_(src.out_proj.bias)

    def common(dst, src, norms):
        dst.linear1.load_state_dict(src.ffn.fc1.state_dict())
        dst.linear2.load_state_dict(src.ffn.fc2.state_dict())
        for nm in norms:
            getattr(dst, nm).load_state_dict(getattr(src, nm).state_dict())

    enc_layers, dec_layers = [], []
    with torch.no_grad():
        for lay in model.encoder.layers:
            t = nn.TransformerEncoderLayer(**kw).to(dt)
            attn(t.self_attn, lay.self_attn)
            common(t, lay, ("norm1", "norm2"))
            enc_layers.append(t.eval())
        for lay in model.decoder.layers:
            t = nn.TransformerDecoderLayer(**kw).to(dt)
            attn(t.self_attn, lay.self_attn)
            attn(t.multihead_attn, lay.cross_attn)
            common(t, lay, ("norm1", "norm2", "norm3"))
            dec_layers.append(t.eval())
    model.eval()
    src, tgt_in, tgt_out = make_batch(model.src_vocab, model.tgt_vocab, src_sentences,
                                      tgt_sentences)
    spad, tpad = src == PAD, tgt_in == PAD
    n = tgt_in.shape[1]
    causal = torch.triu(torch.full((n, n), float("-inf"), dtype=dt), 1)
    with torch.no_grad():
        x = model.embed_tokens(src, model.src_table())
        for t in enc_layers:
            x = t(x, src_key_padding_mask=spad)
        if cfg.norm == "pre":
            x = model.encoder.norm(x)
        y = model.embed_tokens(tgt_in, model.tgt_table())
        for t in dec_layers:
            y = t(y, x, tgt_mask=causal, tgt_key_padding_mask=tpad,
                  memory_key_padding_mask=spad)
        if cfg.norm == "pre":
            y = model.decoder.norm(y)
        lp = torch.log_softmax(model.project(y), dim=-1)
        tok = lp.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1).masked_fill(tgt_out == PAD, 0.0)
    return tok.sum(dim=1)


def selftest():
    torch.manual_seed(1234)
    dt = torch.float64
    failures = []

    def check(name, ok, detail=""):
        print("%-4s %s %s" % ("ok" if ok else "FAIL", name, detail))
        if not ok:
            failures.append(name)

    def close(a, b, tol=1e-12):
        return float((a - b).abs().max()) <= tol * max(1.0, float(b.abs().max()))

    B, n, m, d, h = 3, 5, 7, 16, 4
    xq = torch.randn(B, n, d, dtype=dt)
    xkv = torch.randn(B, m, d, dtype=dt)
    keys = torch.randint(4, 9, (B, m))
    keys[0, 5:] = PAD
    keys[1, 2:] = PAD
    mask = AttnMask.padding(keys, dt)

    def randomise_biases(att):
        with torch.no_grad():
            for p in att.parameters():
                if p.dim() == 1:
                    p.normal_(0, 0.2)

    mha = Attention(d, h, "mha").to(dt)
    for mod in mha.modules():
        if isinstance(mod, nn.Linear):
            nn.init.xavier_uniform_(mod.weight)
    randomise_biases(mha)
    ref = mha(xq, xkv, mask)

    # 1. fixed_head with d_p = d/h equals MHA
    fh = Attention(d, h, "fixed_head", head_dim=d // h).to(dt)
    _copy_common(fh, mha)
    check("fixed_head(d_p=d/h) == mha", close(fh(xq, xkv, mask), ref))

    # 2. talking_heads with identity mixing equals MHA
    th = Attention(d, h, "talking_heads").to(dt)
    _copy_common(th, mha)
    check("talking_heads(P=I) == mha", close(th(xq, xkv, mask), ref))
    with torch.no_grad():
        th.pre_softmax_proj.add_(0.3 * torch.randn(h, h, dtype=dt))
    diff = float((th(xq, xkv, mask) - ref).abs().max())
    check("talking_heads(P!=I) != mha", diff > 1e-6, "(max diff %.3g)" % diff)
    # mask added after mixing: masked keys get exactly zero weight even with mixing
    with torch.no_grad():
        th.post_softmax_proj.copy_(torch.eye(h, dtype=dt))
    captured = {}
    orig = masked_softmax

    def spy(logits, msk, extra_dims=0):
        p = orig(logits, msk, extra_dims)
        captured["p"] = p
        return p
    globals()["masked_softmax"] = spy
    try:
        th(xq, xkv, mask)
    finally:
        globals()["masked_softmax"] = orig
    pad_w = captured["p"].masked_select((keys == PAD)[:, None, None, :].expand_as(captured["p"]))
    check("talking_heads: masked keys get zero weight", float(pad_w.abs().max()) == 0.0)

    # 3. interacting literal == summed (values and gradients)
    it = Attention(d, h, "interacting").to(dt)
    _copy_common(it, mha)
    xq1 = xq.clone().requires_grad_(True)
    it.interacting_form = "summed"
    y_s = it(xq1, xkv, mask)
    g_s = torch.autograd.grad(y_s.pow(2).sum(), [xq1] + list(it.parameters()))
    it.interacting_form = "literal"
    y_l = it(xq1, xkv, mask)
    g_l = torch.autograd.grad(y_l.pow(2).sum(), [xq1] + list(it.parameters()))
    check("interacting literal == summed (values)", close(y_l, y_s))
    check("interacting literal == summed (gradients)",
          all(close(a, b) for a, b in zip(g_l, g_s)))
    # and it equals MHA whose every head uses the summed query projection
    summ = Attention(d, h, "mha").to(dt)
    _copy_common(summ, mha)
    with torch.no_grad():
        dk = d // h
        wq = mha.q_proj.weight.view(h, dk, d).sum(0)
        bq = mha.q_proj.bias.view(h, dk).sum(0)
        summ.q_proj.weight.copy_(wq.repeat(h, 1))
        summ.q_proj.bias.copy_(bq.repeat(h))
    check("interacting == mha with summed query heads", close(summ(xq, xkv, mask), y_s))

    # 4. interacting_pairwise with h = 1 equals MHA with h = 1
    m1 = Attention(d, 1, "mha").to(dt)
    randomise_biases(m1)
    pw = Attention(d, 1, "interacting_pairwise").to(dt)
    _copy_common(pw, m1)
    check("interacting_pairwise(h=1) == mha(h=1)", close(pw(xq, xkv, mask), m1(xq, xkv, mask)))
    # i-major concatenation: build out from explicit O_ij and compare
    pw2 = Attention(d, h, "interacting_pairwise").to(dt)
    randomise_biases(pw2)
    with torch.no_grad():
        Q = pw2._split(pw2.q_proj(xq))
        K = pw2._split(pw2.k_proj(xkv))
        Vv = pw2._split(pw2.v_proj(xkv))
        cols = []
        for i in range(h):
            for j in range(h):
                a = masked_softmax(Q[:, i:i + 1] @ K[:, j:j + 1].transpose(-1, -2) / math.sqrt(dk),
                                   mask)
                cols.append((a @ Vv[:, j:j + 1])[:, 0])  # [B, n, d_v] = O_ij
        manual = pw2.out_proj(torch.cat(cols, dim=-1))
        check("interacting_pairwise i-major layout", close(pw2(xq, xkv, mask), manual))
    check("interacting_pairwise W_O shape [d, h*d]",
          list(pw2.out_proj.weight.shape) == [d, h * d])

    # parameter counts of §2
    dp = 6
    check("param count mha 4d^2+4d", param_count(mha) == 4 * d * d + 4 * d)
    check("param count fixed_head 4hd_pd+3hd_p+d",
          param_count(Attention(d, h, "fixed_head", head_dim=dp))
          == 4 * h * dp * d + 3 * h * dp + d)
    check("param count talking_heads +2h^2", param_count(th) == 4 * d * d + 4 * d + 2 * h * h)
    check("param count interacting == mha", param_count(it) == 4 * d * d + 4 * d)

    # masks: a fully masked row gives zeros, finite gradients
    keys_dead = keys.clone()
    keys_dead[2, :] = PAD
    dmask = AttnMask.padding(keys_dead, dt)
    for kind in ATTENTIONS:
        att = Attention(d, h, kind, head_dim=dp).to(dt)
        x1 = xq.clone().requires_grad_(True)
        x2 = xkv.clone().requires_grad_(True)
        att.out_proj.bias.data.zero_()
        y = att(x1, x2, dmask)
        y.sum().backward()
        fin = all(bool(torch.isfinite(t.grad).all()) for t in (x1, x2)) and \
            all(bool(torch.isfinite(p.grad).all()) for p in att.parameters())
        check("%s: fully masked row -> zeros, finite grads" % kind,
              float(y[2].abs().max()) == 0.0 and bool(torch.isfinite(y).all()) and fin)

    # whole-model checks
    V = Vocab.build("a b c d e f g".split())
    base = dict(d_model=d, heads=h, enc_layers=2, dec_layers=2, d_ff=24, max_len=32,
                dropout=0.1)
    src_s = ["a b c d", "e f", "g a b c d e f"]
    tgt_s = ["b c", "d e f g a", "c"]
    for norm in ("post", "pre"):
        cfg_m = Config(attention="mha", norm=norm, **base)
        mm = Transformer(cfg_m, V, V).to(dt)
        _perturb(mm)
        cfg_f = Config(attention="fixed_head", head_dim=d // h, norm=norm, **base)
        mf = Transformer(cfg_f, V, V).to(dt)
        mf.load_state_dict(mm.state_dict())
        cfg_t = Config(attention="talking_heads", norm=norm, **base)
        mt = Transformer(cfg_t, V, V).to(dt)
        mt.load_state_dict(mm.state_dict(), strict=False)
        sm = torch.tensor(score(mm, src_s, tgt_s), dtype=dt)
        check("model[%s] fixed_head(d/h) == mha" % norm,
              close(torch.tensor(score(mf, src_s, tgt_s), dtype=dt), sm))
        check("model[%s] talking_heads(I) == mha" % norm,
              close(torch.tensor(score(mt, src_s, tgt_s), dtype=dt), sm))
        # batched scores equal one-at-a-time scores (padding does not leak)
        single = torch.tensor([score(mm, [s], [t])[0] for s, t in zip(src_s, tgt_s)], dtype=dt)
        check("model[%s] batched score == single" % norm, close(single, sm))
        # causality: changing a later target token leaves earlier logits unchanged
        src, ti, _ = make_batch(V, V, src_s, tgt_s)
        mm.eval()
        with torch.no_grad():
            l1 = mm(src, ti)
            ti2 = ti.clone()
            ti2[1, 3] = 7
            l2 = mm(src, ti2)
        check("model[%s] causal" % norm, close(l1[1, :3], l2[1, :3]) and
              float((l1[1, 3:] - l2[1, 3:]).abs().max()) > 1e-9)
        # interacting literal == summed at model level
        cfg_i = Config(attention="interacting", norm=norm, **base)
        mi = Transformer(cfg_i, V, V).to(dt)
        _perturb(mi)
        s1 = torch.tensor(score(mi, src_s, tgt_s), dtype=dt)
        mi.set_interacting_form("literal")
        s2 = torch.tensor(score(mi, src_s, tgt_s), dtype=dt)
        check("model[%s] interacting literal == summed" % norm, close(s1, s2))

        # independent oracle: PyTorch's own nn.Transformer layers with the same weights
        oracle = _torch_nn_scores(mm, src_s, tgt_s)
        check("model[%s] == torch.nn.Transformer layers" % norm, close(oracle, sm, 1e-10))
        for act in ("gelu",):
            cfg_g = Config(attention="mha", norm=norm, activation=act, pos="learned",
                           share_embeddings=False, **base)
            mg = Transformer(cfg_g, V, Vocab.build("a b c d e f g h".split())).to(dt)
            _perturb(mg)
            check("model[%s, gelu, learned] == torch.nn.Transformer layers" % norm,
                  close(_torch_nn_scores(mg, src_s, tgt_s),
                        torch.tensor(score(mg, src_s, tgt_s), dtype=dt), 1e-10))

    # sinusoidal encoding: interleaved sin/cos
    pe = sinusoidal(11, 8, dt)
    pos, i = 7, 2
    ang = pos / 10000 ** (2 * i / 8)
    check("sinusoidal interleaved", abs(float(pe[pos, 2 * i]) - math.sin(ang)) < 1e-15 and
          abs(float(pe[pos, 2 * i + 1]) - math.cos(ang)) < 1e-15 and float(pe[0, 1]) == 1.0)

    # label smoothing: explicit form == F.cross_entropy form == hand value
    logits = torch.randn(2, 4, 9, dtype=dt)
    tg = torch.tensor([[4, 5, 3, 0], [6, 3, 0, 0]])
    a = label_smoothed_ce(logits, tg, 0.1)
    b = fast_label_smoothed_ce(logits, tg, 0.1)
    lp = torch.log_softmax(logits, -1)
    hand, cnt = 0.0, 0
    for bb in range(2):
        for t in range(4):
            y = int(tg[bb, t])
            if y == PAD:
                continue
            q = torch.full((9,), 0.1 / 9, dtype=dt)
            q[y] += 0.9
            hand += float(-(q * lp[bb, t]).sum())
            cnt += 1
    check("label smoothing explicit == F.cross_entropy == hand",
          abs(float(a - b)) < 1e-12 and abs(float(a) - hand / cnt) < 1e-12)

    # Noam schedule
    check("noam schedule", abs(noam_lr(4000, 512) - 512 ** -0.5 * 4000 ** -0.5) < 1e-15 and
          abs(noam_lr(1, 512) - 512 ** -0.5 * 4000 ** -1.5) < 1e-18 and
          noam_lr(100, 512) < noam_lr(4000, 512) > noam_lr(8000, 512))

    # checkpoint round trip (float32 file), including untied output and learned positions
    import tempfile
    import os
    with tempfile.TemporaryDirectory() as tmp:
        Vs = Vocab.build("a b c".split())
        Vt = Vocab.build("X Y Z W".split())
        cfg = Config(d_model=8, heads=2, enc_layers=1, dec_layers=1, d_ff=16,
                     attention="fixed_head", head_dim=6, norm="pre", pos="learned", max_len=16,
                     activation="gelu")
        mdl = Transformer(cfg, Vs, Vt, tie_output=False)
        _perturb(mdl)
        path = os.path.join(tmp, "m.safetensors")
        save_checkpoint(path, mdl)
        back = load_checkpoint(path)
        same = all(torch.equal(back.state_dict()[k], v) for k, v in mdl.state_dict().items())
        check("checkpoint round trip", same and back.cfg.to_dict() == cfg.to_dict() and
              not back.tie_output and back.src_vocab == Vs and back.tgt_vocab == Vt)
        try:
            from safetensors import safe_open  # optional cross-check, never required
            with safe_open(path, framework="pt") as f:
                ok = f.metadata()["format"] == "tgraph" and all(
                    torch.equal(f.get_tensor(k), v) for k, v in mdl.state_dict().items())
            check("checkpoint readable by the safetensors package", ok)
        except ImportError:
            print("note safetensors package not installed; cross-check skipped")
        tensors, meta = read_safetensors(path)
        del tensors["decoder.layers.0.ffn.fc1.bias"]
        write_safetensors(path, tensors, meta)
        try:
            load_checkpoint(path)
            check("missing tensor is an error", False)
        except ValueError as e:
            check("missing tensor is an error", "fc1.bias" in str(e), "(%s)" % e)

    # greedy == beam 1 (same argmax path)
    mm.eval()
    check("greedy == beam(1)", greedy(mm, src_s) == beam_search(mm, src_s, beam=1))

    print("selftest: %d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    if "--selftest" in sys.argv[1:]:
        sys.exit(selftest())
    print(__doc__)
