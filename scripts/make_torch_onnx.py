"""Regenerate tests/data/torch_*.onnx and tests/data/torch_reference.npz (issue 35): small PyTorch models
exported by torch.onnx.export, with torch's outputs and autograd gradients, so the import tests and lesson 11
run without torch.

    python scripts/make_torch_onnx.py

Uses the TorchScript exporter (dynamo=False) when onnxscript (which the dynamo exporter needs) is missing.
"""
import importlib.util
import io
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

OUT = Path(__file__).resolve().parent.parent / 'tests' / 'data'
DYNAMO = importlib.util.find_spec('onnxscript') is not None     # the dynamo exporter needs onnxscript


def models():
    torch.manual_seed(0)
    yield 'linear', nn.Linear(4, 3), (5, 4)
    yield 'mlp', nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.Sigmoid(), nn.Linear(8, 8),
                               nn.Tanh(), nn.Linear(8, 3), nn.Softmax(dim=-1)), (5, 4)
    yield 'mlp2', nn.Sequential(nn.Flatten(), nn.Linear(6, 8), nn.LeakyReLU(0.1), nn.Linear(8, 3),
                                nn.LogSoftmax(dim=1)), (5, 2, 3)


def main():
    ref = {}
    rng = np.random.default_rng(0)
    for name, model, shape in models():
        x = torch.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
        y = model(x)
        r = torch.tensor(rng.integers(1, 8, size=tuple(y.shape)).astype(np.float32) / 4)   # dyadic weights
        (y * r).sum().backward()
        buf = io.BytesIO()
        torch.onnx.export(model, (x,), buf, input_names=['x'], output_names=['y'], dynamo=DYNAMO,
                          dynamic_axes={'x': {0: 'batch'}, 'y': {0: 'batch'}}, opset_version=17)
        (OUT / f'torch_{name}.onnx').write_bytes(buf.getvalue())
        ref.update({f'{name}/x': x.detach().numpy(), f'{name}/y': y.detach().numpy(), f'{name}/r': r.numpy(),
                    f'{name}/grad_x': x.grad.numpy()})
        ref.update({f'{name}/grad_param/{k}': p.grad.numpy() for k, p in model.named_parameters()})
        ref.update({f'{name}/param/{k}': p.detach().numpy() for k, p in model.named_parameters()})
    np.savez(OUT / 'torch_reference.npz', **ref)
    print(f'wrote {len(ref)} arrays; torch {torch.__version__}, exporter: {"dynamo" if DYNAMO else "TorchScript"}',
          file=sys.stderr)


if __name__ == '__main__':
    main()
