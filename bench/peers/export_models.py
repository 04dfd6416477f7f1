# More real models for `make bench-peers` than ../shared/models holds: torchvision's EfficientNet-B0,
# MobileNetV3-small, ConvNeXt-tiny, ResNet-50 and a small ViT, and a GPT-2-style decoder block (causal mask by
# masked_fill, tanh GELU written out), with random weights (nothing is downloaded), each exported at opset 17 with
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
