# More real models for `make bench-peers` than ../shared/models holds: torchvision's EfficientNet-B0,
# MobileNetV3-small, ConvNeXt-tiny, ResNet-50 and a small ViT, and a GPT-2-style decoder block (causal mask by
# masked_fill, tanh GELU written out) and more listed below, with random weights (nothing is downloaded), each exported at opset 17 with
# one input and its reference output beside it:
#
#   sudo apt-get install python3-torch python3-torchvision python3-onnx
#   /usr/bin/python3 bench/peers/export_models.py /tmp/more_models [NAME ...]
#   MODELS=/tmp/more_models make bench-peers
import math
import os
import sys

import torch
import torch.nn as nn
import torchvision
from onnx import numpy_helper

torch.manual_seed(0)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)

class GPTBlock(nn.Module):
    def __init__(s, d=768, h=12, L=256):
        super().__init__()
        s.h = h; s.ln1 = nn.LayerNorm(d); s.ln2 = nn.LayerNorm(d)
        s.qkv = nn.Linear(d, 3 * d); s.proj = nn.Linear(d, d)
        s.fc = nn.Linear(d, 4 * d); s.fc2 = nn.Linear(4 * d, d)
        s.register_buffer("mask", torch.tril(torch.ones(L, L)).view(1, 1, L, L))
    def gelu(s, x):  # GPT-2's tanh approximation, written out
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
    def forward(s, x):
        B, T, C = x.shape
        q, k, v = s.qkv(s.ln1(x)).split(C, dim=2)
        q = q.view(B, T, s.h, C // s.h).transpose(1, 2)
        k = k.view(B, T, s.h, C // s.h).transpose(1, 2)
        v = v.view(B, T, s.h, C // s.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(s.mask[:, :, :T, :T] == 0, float('-inf'))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + s.proj(y)
        return x + s.fc2(s.gelu(s.fc(s.ln2(x))))

class LlamaBlock(nn.Module):
    """A LLaMA-style decoder block as Hugging Face writes it: RMSNorm, rotary embeddings (rotate_half by slicing and
    Concat), a causal mask added to the scores, a SiLU-gated MLP; no biases."""
    def __init__(s, d=512, h=8, L=256, ff=1376):
        super().__init__()
        s.h = h; s.dh = d // h
        s.n1 = nn.Parameter(torch.ones(d) + 0.1 * torch.randn(d)); s.n2 = nn.Parameter(torch.ones(d) + 0.1 * torch.randn(d))
        s.q = nn.Linear(d, d, bias=False); s.k = nn.Linear(d, d, bias=False); s.v = nn.Linear(d, d, bias=False)
        s.o = nn.Linear(d, d, bias=False)
        s.gate = nn.Linear(d, ff, bias=False); s.up = nn.Linear(d, ff, bias=False); s.down = nn.Linear(ff, d, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, s.dh, 2).float() / s.dh))
        f = torch.outer(torch.arange(L).float(), inv)
        emb = torch.cat((f, f), dim=-1)
        s.register_buffer("cos", emb.cos()[None, None]); s.register_buffer("sin", emb.sin()[None, None])
        s.register_buffer("mask", torch.full((L, L), torch.finfo(torch.float32).min).triu(1)[None, None])
    def rms(s, x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
    def rot(s, x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
        return torch.cat((-x2, x1), dim=-1)
    def forward(s, x):
        B, T, C = x.shape
        hs = s.rms(x, s.n1)
        q = s.q(hs).view(B, T, s.h, s.dh).transpose(1, 2)
        k = s.k(hs).view(B, T, s.h, s.dh).transpose(1, 2)
        v = s.v(hs).view(B, T, s.h, s.dh).transpose(1, 2)
        q = q * s.cos + s.rot(q) * s.sin
        k = k * s.cos + s.rot(k) * s.sin
        att = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(s.dh) + s.mask
        att = torch.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(B, T, C)
        x = x + s.o(y)
        hs = s.rms(x, s.n2)
        return x + s.down(nn.functional.silu(s.gate(hs)) * s.up(hs))

class BertEncoder(nn.Module):
    """Two post-norm encoder layers of nn.TransformerEncoder (nn.MultiheadAttention: one [3d, d] in-projection,
    chunked), a batch padded after 200 of its 256 tokens (key padding mask)."""
    def __init__(s, d=768, h=12, L=256, valid=200):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, h, 4 * d, dropout=0.0, activation="gelu", batch_first=True)
        s.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        s.register_buffer("pad", torch.arange(L)[None] >= valid)
    def forward(s, x):
        return s.enc(x, src_key_padding_mask=s.pad)

models = {
    "efficientnet_b0": (lambda: torchvision.models.efficientnet_b0(), (1, 3, 224, 224)),
    "mobilenet_v3_small": (lambda: torchvision.models.mobilenet_v3_small(), (1, 3, 224, 224)),
    "convnext_tiny": (lambda: torchvision.models.convnext_tiny(), (1, 3, 224, 224)),
    "resnet50": (lambda: torchvision.models.resnet50(), (1, 3, 224, 224)),
    "vit_small": (lambda: torchvision.models.VisionTransformer(image_size=224, patch_size=16, num_layers=4, num_heads=6,
                                                              hidden_dim=384, mlp_dim=1536), (1, 3, 224, 224)),
    "gpt_block": (lambda: GPTBlock(), (1, 256, 768)),
    # Graph shapes the six above do not have: channel shuffles (Reshape/Transpose), Concat-heavy blocks, inception
    # branches, ceil-mode pools, grouped convolutions with squeeze-excitation.
    "shufflenet_v2": (lambda: torchvision.models.shufflenet_v2_x1_0(), (1, 3, 224, 224)),
    "squeezenet": (lambda: torchvision.models.squeezenet1_1(), (1, 3, 224, 224)),
    "googlenet": (lambda: torchvision.models.googlenet(init_weights=True, aux_logits=False), (1, 3, 224, 224)),
    "densenet121": (lambda: torchvision.models.densenet121(), (1, 3, 224, 224)),
    "regnet_y_400mf": (lambda: torchvision.models.regnet_y_400mf(), (1, 3, 224, 224)),
    # Transformers of other shapes: shifted-window attention with a relative position bias (torch.roll, patch
    # merging by strided slices); a LLaMA-style block (RMSNorm, rotary embeddings, SiLU-gated MLP); an encoder with
    # a key padding mask.
    "swin_t": (lambda: torchvision.models.swin_t(), (1, 3, 224, 224)),
    "llama_block": (lambda: LlamaBlock(), (1, 256, 512)),
    "bert_encoder": (lambda: BertEncoder(), (1, 256, 768)),
}
only = sys.argv[2:] or list(models)
for name in only:
    make, shape = models[name]
    m = make().eval()
    if name == "vit_small":  # torchvision zero-initialises the classifier head
        torch.nn.init.normal_(m.heads.head.weight, std=0.02)
    x = torch.randn(*shape)
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    torch.onnx.export(m, x, os.path.join(d, "model.onnx"), opset_version=17, input_names=["input"], output_names=["output"])
    with torch.no_grad():
        y = m(x)
    open(os.path.join(d, "test_data_set_0", "input_0.pb"), "wb").write(numpy_helper.from_array(x.numpy(), "input").SerializeToString())
    open(os.path.join(d, "test_data_set_0", "output_0.pb"), "wb").write(numpy_helper.from_array(y.numpy(), "output").SerializeToString())
    print("exported", name, flush=True)
