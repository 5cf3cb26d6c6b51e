#!/usr/bin/python3
"""tandem's params.safetensors (engine/train/record/safetensors.hpp) in PyTorch.

read_safetensors(path) parses the file with the standard library and numpy (the format
is an 8-byte little-endian header length, a JSON header, then the data; Debian has no
python3-safetensors). sequential(path) builds the nn.Sequential that the file's
__metadata__ "layers" (the model file's layer list) describes and loads the tensors
into it with load_state_dict (strict: every name and shape must match).

The mapping, one module per layer of the model file: flatten -> nn.Flatten, relu ->
nn.ReLU, dropout -> nn.Dropout, maxpool2d -> nn.MaxPool2d, avgpool -> global average
pooling, linear -> nn.Linear, conv2d -> nn.Conv2d, batchnorm -> nn.BatchNorm2d after a
convolution (nn.BatchNorm1d on features), residual -> relu(body(x) + shortcut(x)) with
body and shortcut Sequentials (an empty shortcut is the identity). Tensor "<i>.weight"
belongs to layer i; "<i>.body.<j>.weight" to layer j of block i's body.

usage: /usr/bin/python3 tools/golden/safetensors_model.py RUN_DIR/params.safetensors  (prints the model)
"""
import json
import struct
import sys

import numpy as np
import torch

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def read_safetensors(path):
    """(tensors: name -> numpy array, metadata: dict) of a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    metadata = header.pop("__metadata__", {})
    data = blob[8 + n:]
    tensors = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        a = np.frombuffer(data[begin:end], dtype=DTYPES[t["dtype"]])
        tensors[name] = a.reshape(t["shape"]).copy()
    return tensors, metadata


class GlobalAvgPool(torch.nn.Module):
    def forward(self, x):
        return x.mean(dim=(2, 3))


class Residual(torch.nn.Module):
    """y = relu(body(x) + shortcut(x)), the shortcut the identity when empty
    (engine/nn/residual.hpp)."""

    def __init__(self, body, shortcut):
        super().__init__()
        self.body = body
        self.shortcut = shortcut

    def forward(self, x):
        return torch.relu(self.body(x) + self.shortcut(x))


def build(layers, tensors, prefix="", spatial=True):
    """The nn.Sequential of a layer list whose tensors are named "<prefix><i>.": one
    module per layer; a residual block's body and shortcut are Sequentials of their own
    ("<prefix><i>.body.<j>.", "<prefix><i>.shortcut.<j>.")."""
    modules = []
    for i, layer in enumerate(layers):
        kind, a = layer["type"], layer["args"]
        w = tensors.get(f"{prefix}{i}.weight")
        if kind == "linear":
            m = torch.nn.Linear(w.shape[1], w.shape[0], bias=f"{prefix}{i}.bias" in tensors)
            spatial = False
        elif kind == "conv2d":
            m = torch.nn.Conv2d(w.shape[1], w.shape[0], w.shape[2], stride=int(a.get("stride", 1)),
                                padding=int(a.get("padding", 0)), bias=f"{prefix}{i}.bias" in tensors)
        elif kind == "batchnorm":
            norm = torch.nn.BatchNorm2d if spatial else torch.nn.BatchNorm1d
            m = norm(w.shape[0], eps=a.get("eps", 1e-5), momentum=a.get("momentum", 0.1))
        elif kind == "relu":
            m = torch.nn.ReLU()
        elif kind == "flatten":
            m, spatial = torch.nn.Flatten(), False
        elif kind == "dropout":
            m = torch.nn.Dropout(a["p"])
        elif kind == "maxpool2d":
            m = torch.nn.MaxPool2d(int(a["kernel"]), int(a.get("stride", a["kernel"])))
        elif kind == "avgpool":
            m, spatial = GlobalAvgPool(), False
        elif kind == "residual":
            m = Residual(build(layer["body"], tensors, f"{prefix}{i}.body.", spatial),
                         build(layer["shortcut"], tensors, f"{prefix}{i}.shortcut.", spatial))
        else:
            raise ValueError(f"layer {prefix}{i}: {kind} has no nn.Sequential equivalent here")
        modules.append(m)
    return torch.nn.Sequential(*modules)


def sequential(path):
    """The equivalent nn.Sequential with the file's tensors loaded, and the metadata."""
    tensors, metadata = read_safetensors(path)
    model = build(json.loads(metadata["layers"]), tensors)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in tensors.items()}, strict=True)
    return model, metadata


if __name__ == "__main__":
    print(sequential(sys.argv[1])[0])
