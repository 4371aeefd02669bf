"""Regenerate tests/data/torch_*.onnx and tests/data/torch_reference.npz: small PyTorch models exported by
torch.onnx.export, with torch's outputs and autograd gradients, so the import tests and lesson 11 run without
torch.

    .venv-test/bin/python scripts/make_torch_onnx.py

Writes torch_<model>.onnx with the TorchScript exporter (dynamo=False) at opset 17, torch_<model>_opset<N>.onnx
with it at the older opsets OLD_OPSETS (operators whose meaning changed: Softmax flattening at its axis, the
axes of Squeeze/Unsqueeze and the bounds of Slice as attributes, Split), and torch_<model>_dynamo.onnx with the
torch.export-based exporter (opset 18), which needs onnxscript (requirements-test.txt).
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
OLD_OPSETS = (9, 11, 13)


class Parts(nn.Module):
    """The operators whose ONNX form changed across opsets: unsqueeze, a slice, chunk (Split, or Slice with
    shape arithmetic), softmax / log_softmax over a middle axis, a mean, squeeze."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 6)

    def forward(self, x):
        h = self.lin(x).unsqueeze(1)                                    # (N, 1, 6)
        a, b = h[:, :, 1:5].chunk(2, dim=2)                             # (N, 1, 2) each
        s = torch.softmax(torch.cat([a, b * 2.0], dim=1), dim=1)        # (N, 2, 2), over the middle axis
        return torch.log_softmax(s, dim=1).mean(dim=2) + h.squeeze(1)[:, :2]


def models():
    torch.manual_seed(0)
    yield 'linear', nn.Linear(4, 3), (5, 4)
    yield 'mlp', nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.Sigmoid(), nn.Linear(8, 8),
                               nn.Tanh(), nn.Linear(8, 3), nn.Softmax(dim=-1)), (5, 4)
    yield 'mlp2', nn.Sequential(nn.Flatten(), nn.Linear(6, 8), nn.LeakyReLU(0.1), nn.Linear(8, 3),
                                nn.LogSoftmax(dim=1)), (5, 2, 3)
    yield 'parts', Parts(), (5, 4)


def main():
    ref = {}
    rng = np.random.default_rng(0)
    for name, model, shape in models():
        x = torch.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
        y = model(x)
        r = torch.tensor(rng.integers(1, 8, size=tuple(y.shape)).astype(np.float32) / 4)   # dyadic weights
        (y * r).sum().backward()
        for opset in OLD_OPSETS + (17,):
            buf = io.BytesIO()
            torch.onnx.export(model, (x,), buf, input_names=['x'], output_names=['y'], dynamo=False,
                              dynamic_axes={'x': {0: 'batch'}, 'y': {0: 'batch'}}, opset_version=opset)
            (OUT / f'torch_{name}{"" if opset == 17 else f"_opset{opset}"}.onnx').write_bytes(buf.getvalue())
        if DYNAMO:
            path = OUT / f'torch_{name}_dynamo.onnx'
            torch.onnx.export(model, (x.detach(),), str(path), input_names=['x'], output_names=['y'], dynamo=True,
                              dynamic_shapes=({0: torch.export.Dim('batch')},), opset_version=18,
                              external_data=False)
        ref.update({f'{name}/x': x.detach().numpy(), f'{name}/y': y.detach().numpy(), f'{name}/r': r.numpy(),
                    f'{name}/grad_x': x.grad.numpy()})
        ref.update({f'{name}/grad_param/{k}': p.grad.numpy() for k, p in model.named_parameters()})
        ref.update({f'{name}/param/{k}': p.detach().numpy() for k, p in model.named_parameters()})
    np.savez(OUT / 'torch_reference.npz', **ref)
    print(f'wrote {len(ref)} arrays; torch {torch.__version__}; exporters: TorchScript'
          + (' and dynamo' if DYNAMO else ' (no onnxscript: no dynamo files)'), file=sys.stderr)


if __name__ == '__main__':
    main()
