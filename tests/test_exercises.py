"""Exercises: exercises/ is generated from solutions/, and every check teaches.

A *check cell* is the code cell that follows a cell holding a ``### BEGIN SOLUTION``
marker (see scripts/make_exercises.py). For every task, in one kernel per notebook,
``test_every_check_teaches`` runs the check cell after

1. the stub from exercises/ (it must fail with a CheckError saying the task is not done, and no hint yet),
2. each typical wrong answer listed in WRONG (it must fail with a hint that names the mistake), judged as the
   task's first failure (the hint ladder of minigrad.checks is reset before each),
3. each correct-but-different answer listed in CORRECT (it must pass),
4. the solution (it must pass and print its ✓ line),

and every failure message must be short: at most six lines, no traceback.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
ANSI = re.compile(r"\x1b\[[0-9;]*m")
TASK = re.compile(r"Task\s+([0-9]+(?:\.[0-9]+)?)")
BEGIN = re.compile(r"^([ \t]*)###\s*BEGIN SOLUTION\s*$")
END = re.compile(r"^[ \t]*###\s*END SOLUTION\s*$")

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

# Typical wrong answers: notebook -> task -> [(replacement, words the hint must contain[, code run before,
# code run after])]. A replacement is the code of the first BEGIN..END block, or {block number: code} for
# tasks with several blocks; it is indented like the block it replaces.
WRONG = {
    "01_computational_graphs_exercises": {
        "1.1": [({0: "u, v = a + b, a * b\nreturn v * 1"}, "only the path through u"),
                ({1: "u, v = a + b, a * b\nreturn u * a"}, "only the path through v")],
        "1.2": [("return (f(x + eps) - f(x)) / eps", "one-sided"),
                ("return (f(x + eps) - f(x - eps)) / eps", "2 eps apart"),
                ("return (f(x + 1e-5) - f(x - 1e-5)) / 2e-5", "use the eps you are given")],
        "1.3": [("return sum(local * derivative_by_paths(edges, p, wrt) for p, local in edges.get(out, []))",
                 "out == wrt"),
                ("if out == wrt:\n    return 1.0\nreturn sum(local * derivative_by_paths(edges, p, wrt) "
                 "for p, local in dict(edges.get(out, [])).items())", "TWO edges")],
        "1.4": [("grad = {name: 0.0 for name in order}\ngrad[out] = 1.0\nfor node in order:\n"
                 "    for parent, local in edges.get(node, []):\n        grad[parent] = local * grad[node]\n"
                 "return grad[wrt]", "+="),
                ("grad = {name: 0.0 for name in order}\nfor node in order:\n"
                 "    for parent, local in edges.get(node, []):\n        grad[parent] += local * grad[node]\n"
                 "return grad[wrt]", "grad[out] must start at 1.0"),
                ("grad = {name: 0.0 for name in order}\ngrad[out] = 1.0\nfor node in reversed(order):\n"
                 "    for parent, local in edges.get(node, []):\n        grad[parent] += local * grad[node]\n"
                 "return grad[wrt]", "visit the nodes in the order given")],
        "1.5": [("inputs = [mg.tensor(v, dtype=mg.float64, requires_grad=True) for v in values]\n"
                 "with mg.Tape() as tape:\n    out = fn(*inputs)\nout.backward()\n"
                 "return [x.grad.item() for x in inputs], [e.output.grad.item() for e in tape.entries]",
                 "retain_grad()"),
                ("inputs = [mg.tensor(v, dtype=mg.float64, requires_grad=True) for v in values]\n"
                 "with mg.Tape() as tape:\n    out = fn(*inputs)\nfor e in tape.entries:\n    e.output.retain_grad()\n"
                 "out.backward()\n"
                 "return [x.grad.item() for x in inputs], [e.output.grad.item() for e in reversed(tape.entries)]",
                 "tape order")],
    },
    "02_dynamic_tape_exercises": {
        "2.1": [({1: "return Value(self.data * other.data, ((self, self.data), (other, other.data)))"}, "OTHER value"),
                ({0: "return Value(self.data + other.data)"}, "pass the edges")],
        "2.2": [("order, visited, stack = [], set(), [root]\nwhile stack:\n    node = stack.pop()\n"
                 "    if id(node) in visited:\n        continue\n    visited.add(id(node))\n    order.append(node)\n"
                 "    stack.extend(p for p, _ in node.parents)\nreturn order", "after all of its parents"),
                ("order, seen = [], set()\ndef visit(v):\n    if id(v) in seen:\n        return\n    seen.add(id(v))\n"
                 "    for p, _ in v.parents:\n        visit(p)\n    order.append(v)\nvisit(root)\nreturn order",
                 "recursion")],
        "2.3": [("root.grad = 1.0\nfor node in reversed(topo_order(root)):\n    for parent, local in node.parents:\n"
                 "        parent.grad = local * node.grad", "add up"),
                ("root.grad = 1.0\nfor node in topo_order(root):\n    for parent, local in node.parents:\n"
                 "        parent.grad += local * node.grad", "reversed")],
        "2.4": [("t = np.tanh(v.data)\nreturn Value(t, ((v, 1.0 - v.data ** 2),))", "tanh's own output")],
        "2.5": [("for p in params:\n    p -= lr * p.grad\nfor p in params:\n    p.grad = None", "no_grad"),
                ("with mg.no_grad():\n    for p in params:\n        p += lr * p.grad\nfor p in params:\n"
                 "    p.grad = None", "minus"),
                ("with mg.no_grad():\n    for p in params:\n        p -= lr * p.grad", "p.grad to None")],
    },
    "03_tensors_and_vjps_exercises": {
        "3.1": [("extra = g.ndim - len(shape)\nreturn g.sum(axis=tuple(range(extra))) if extra else g", "keepdims=True"),
                ("stretched = tuple(i for i, d in enumerate(shape) if d == 1 and g.shape[i] != 1)\n"
                 "return g.sum(axis=stretched, keepdims=True) if stretched else g", "leading axes")],
        "3.2": [({0: "return np.log(1 + np.exp(x))"}, "logaddexp"),
                ({1: "return g * mg.sigmoid(x)"}, "tuple"),
                ({1: "return (g * mg.exp(x),)"}, "chain rule also divides"),
                ({1: "return (g / (1 + np.exp(-x)),)"}, "minigrad ops on g and x")],
        "3.3": [("d = g * (x - y) * 2\nreturn (d, -d)", "sum_to_like"),
                ("d = g * (x - y) * 2\nreturn (mg.ops.sum_to_like(d, x) if needs[0] else None,\n"
                 "        mg.ops.sum_to_like(d, y) if needs[1] else None)", "NEGATIVE")],
        "3.4": [("return G @ B, A @ G", "transpose one factor"),
                ("return G @ B.T, G.T @ A", "shape of B's transpose")],
        "3.5": [("x = mg.tensor(x0, dtype=mg.float64, requires_grad=True)\nf(x).backward(create_graph=True)\n"
                 "d1 = x.grad\nd1.backward()\nreturn x.grad.item()", "reset x.grad"),
                ("x = mg.tensor(x0, dtype=mg.float64, requires_grad=True)\nf(x).backward()\nd1 = x.grad\n"
                 "x.grad = None\nd1.backward()\nreturn x.grad.item()", "create_graph=True"),
                # a correct 3.5 on top of a 3.2 whose VJP is numpy: the message points at task 3.2
                ("x = mg.tensor(x0, dtype=mg.float64, requires_grad=True)\nf(x).backward(create_graph=True)\n"
                 "d1 = x.grad\nx.grad = None\nd1.backward()\nreturn x.grad.item()", "task 3.2",
                 "saved_softplus = softplus\nsoftplus = register_primitive('softplus_np', softplus_impl, "
                 "elementwise_rule, lambda needs, g, out, x: (g / (1 + np.exp(-x)),), elementwise=True)",
                 "softplus = saved_softplus")],
    },
    "04_static_graphs_exercises": {
        "4.1": [("env = {}\nfor node in graph.nodes:\n    if node.op == 'placeholder':\n"
                 "        results = [feeds[node.outputs[0].name]]\n    elif node.op == 'constant':\n"
                 "        results = [node.params['value']]\n    elif node.op == 'variable':\n"
                 "        results = [node.params['initial_value']]\n    else:\n"
                 "        res = node.prim.impl(*[env[id(i)] for i in node.inputs])\n"
                 "        results = res if node.prim.multiple_results else [res]\n"
                 "    for sym, value in zip(node.outputs, results):\n        env[id(sym)] = value\n"
                 "return [env[id(f)] for f in fetches]", "params to impl as keyword arguments"),
                ("env = {}\nfor node in graph.nodes:\n    if node.op == 'placeholder':\n"
                 "        results = [feeds[node.outputs[0]]]\n    elif node.op == 'constant':\n"
                 "        results = [node.params['value']]\n    else:\n"
                 "        res = node.prim.impl(*[env[id(i)] for i in node.inputs], **node.params)\n"
                 "        results = res if node.prim.multiple_results else [res]\n"
                 "    for sym, value in zip(node.outputs, results):\n        env[id(sym)] = value\n"
                 "return [env[id(f)] for f in fetches]", "keyed by the placeholder's name")],
        "4.2": [("marked = {id(f.node) for f in fetches}\nfor f in fetches:\n"
                 "    marked.update(id(i.node) for i in f.node.inputs)\n"
                 "return [n for n in graph.nodes if id(n) in marked]", "transitively"),
                ("marked = {id(f.node) for f in fetches}\nfor node in reversed(graph.nodes):\n"
                 "    if id(node) in marked:\n        marked.update(id(i.node) for i in node.inputs)\n"
                 "return [n for n in reversed(graph.nodes) if id(n) in marked]", "graph order"),
                ("return list(graph.nodes)", "extra: [")],       # the message shows the difference
        "4.3": [("def body(a, b):\n    if a > b:\n        return a - b, b\n    return a, b - a\n"
                 "a_end, b_end = mg.while_loop(lambda a, b: a != b, body, [a, b])\nreturn a_end", "mg.where"),
                ("return mg.where(a > b, a - b, b - a)", "mg.while_loop")],
        "4.4": [("h = mg.where(mg.abs(x) <= 1, 0.5 * x * x, mg.abs(x) - 0.5)\n(dh,) = mg.gradients(h, [x])\n"
                 "return h, dh", "mg.cond")],
        "4.5": [("stack, v = [], v0\nfor _ in range(n):\n    stack.append(v)\n    v = np.tanh(a * v)\n"
                 "g, g_a = 1.0, 0.0\nwhile stack:\n    v_in = stack.pop()\n    t = np.tanh(a * v_in)\n"
                 "    g_a = g * v_in * (1 - t * t)\n    g *= a * (1 - t * t)\nreturn v, g, g_a", "add up"),
                ("stack, v = [], v0\nfor _ in range(n):\n    stack.append(v)\n    v = np.tanh(a * v)\n"
                 "g, g_a = 1.0, 0.0\nwhile stack:\n    v_in = stack.pop()\n    t = np.tanh(a * v_in)\n"
                 "    g *= a * (1 - t * t)\n    g_a += g * v_in * (1 - t * t)\nreturn v, g, g_a", "BEFORE")],
    },
    "05_graph_compiler_exercises": {
        "1": [("if node.op in ('placeholder', 'variable', 'constant', 'assign') or not ins:\n    return None\n"
               "if any(i.op == 'constant' for i in ins):\n"
               "    value = node.prim.impl(*[i.node.params['value'] for i in ins], **node.params)\n"
               "    return [mg.constant(np.asarray(value), name=node.outputs[0].name, graph=new)]\nreturn None",
               "ALL of a node's inputs"),
              ("if node.op in ('variable', 'constant', 'assign'):\n    return None\n"
               "if all(i.op == 'constant' for i in ins):\n"
               "    value = node.prim.impl(*[i.node.params['value'] for i in ins], **node.params)\n"
               "    return [mg.constant(np.asarray(value), name=node.outputs[0].name, graph=new)]\nreturn None",
               "has inputs"),
              ("if node.op in ('placeholder', 'variable', 'constant', 'assign') or not ins:\n    return None\n"
               "if all(i.op == 'constant' for i in node.inputs):\n"
               "    value = node.prim.impl(*[i.node.params['value'] for i in node.inputs], **node.params)\n"
               "    return [mg.constant(np.asarray(value), name=node.outputs[0].name, graph=new)]\nreturn None",
               "not node.inputs"),
              ("if node.op in ('placeholder', 'variable', 'constant', 'assign') or not ins:\n    return None\n"
               "if all(i.op == 'constant' for i in ins):\n"
               "    value = node.prim.impl(*[i.node.params['value'] for i in ins], **node.params)\n"
               "    return mg.constant(np.asarray(value), name=node.outputs[0].name, graph=new)\nreturn None",
               "a list")],
        "2": [("if node.op in ('placeholder', 'variable', 'constant', 'assign'):\n    return None\n"
               "key = (node.op, tuple(id(i) for i in node.inputs), repr(sorted(node.params.items())))\n"
               "if key in seen:\n    return seen[key]\nouts = copy_node(new, node, ins)\nseen[key] = outs\n"
               "return outs", "new inputs"),
              ("key = (node.op, tuple(id(i) for i in ins), repr(sorted(node.params.items())))\n"
               "if key in seen:\n    return seen[key]\nouts = copy_node(new, node, ins)\nseen[key] = outs\n"
               "return outs", "never merge placeholder"),
              ("if node.op in ('placeholder', 'variable', 'constant', 'assign'):\n    return None\n"
               "key = (node.op, tuple(id(i) for i in ins))\n"
               "if key in seen:\n    return seen[key]\nouts = copy_node(new, node, ins)\nseen[key] = outs\n"
               "return outs", "params belong in the key")],
        "3": [("def rewrite(node, ins, new):\n    if node.op != 'add':\n        return None\n"
               "    for k in (0, 1):\n        if node.inputs[k].op == 'mul':\n"
               "            a, b = ins[k].node.inputs\n"
               "            return [emit(new, FMA, [a, b, ins[1 - k]], name=node.outputs[0].name)]\n"
               "    return None\nreturn prune(rebuild(graph, rewrite))", "exactly one use"),
              ("uses = {}\nfor node in graph.nodes:\n    for s in node.inputs:\n"
               "        uses[id(s)] = uses.get(id(s), 0) + 1\n\ndef rewrite(node, ins, new):\n"
               "    if node.op != 'add':\n        return None\n    for k in (0, 1):\n"
               "        if node.inputs[k].op == 'mul' and uses[id(node.inputs[k])] == 1:\n"
               "            a, b = ins[k].node.inputs\n"
               "            return [emit(new, FMA, [a, b, ins[1 - k]], name=node.outputs[0].name)]\n"
               "    return None\nreturn prune(rebuild(graph, rewrite))", "graph.outputs"),
              ("uses = {}\nfor node in graph.nodes:\n    for s in node.inputs:\n"
               "        uses[id(s)] = uses.get(id(s), 0) + 1\nfor s in graph.outputs:\n"
               "    uses[id(s)] = uses.get(id(s), 0) + 1\n\ndef rewrite(node, ins, new):\n"
               "    if node.op == 'add' and node.inputs[0].op == 'mul' and uses[id(node.inputs[0])] == 1:\n"
               "        a, b = ins[0].node.inputs\n"
               "        return [emit(new, FMA, [a, b, ins[1]], name=node.outputs[0].name)]\n"
               "    return None\nreturn prune(rebuild(graph, rewrite))", "either input of the add")],
        "4": [("ranges = {name: [0, 0] for name in inputs}\nfor step, (out, op, ins) in enumerate(schedule):\n"
               "    for i in ins:\n        ranges[i][1] = max(ranges[i][1], step)\n    ranges[out] = [step, step]\n"
               "for o in outputs:\n    ranges[o][1] = len(schedule)\nreturn {k: tuple(v) for k, v in ranges.items()}",
               "first step is -1"),
              ("ranges = {name: [-1, -1] for name in inputs}\nfor step, (out, op, ins) in enumerate(schedule):\n"
               "    for i in ins:\n        ranges[i][1] = max(ranges[i][1], step)\n    ranges[out] = [step, step]\n"
               "return {k: tuple(v) for k, v in ranges.items()}", "len(schedule)"),
              ("ranges = {name: [-1, -1] for name in inputs}\nfor step, (out, op, ins) in enumerate(schedule):\n"
               "    for i in ins:\n        ranges[i][1] = max(ranges[i][1], step)\n    ranges[out] = [step, step]\n"
               "for o in outputs:\n    ranges[o][1] = None\nreturn {k: tuple(v) for k, v in ranges.items()}",
               "writes None"),
              ("ranges = {name: [-1, None] for name in inputs}\nfor step, (out, op, ins) in enumerate(schedule):\n"
               "    for i in ins:\n        if ranges[i][1] is None:\n            ranges[i][1] = step\n"
               "    ranges[out] = [step, None]\nfor o in outputs:\n    ranges[o][1] = len(schedule)\n"
               "return {k: tuple(v) for k, v in ranges.items()}", "the LATER one")],
        "5": [("buf = {name: k for k, name in enumerate(inputs)}\nn_buffers = len(inputs)\n"
               "for step, (out, op, ins) in enumerate(schedule):\n    buf[out], n_buffers = n_buffers, n_buffers + 1\n"
               "return buf", "p's buffer"),
              ("buf = {name: k for k, name in enumerate(inputs)}\nn_buffers, free = len(inputs), []\n"
               "for step, (out, op, ins) in enumerate(schedule):\n"
               "    dying = [i for i in ins if ranges[i][1] == step]\n    if dying:\n        buf[out] = buf[dying[0]]\n"
               "    elif free:\n        buf[out] = free.pop()\n    else:\n"
               "        buf[out], n_buffers = n_buffers, n_buffers + 1\nreturn buf", "caller")],
    },
    "06_tracing_exercises": {
        "1": [("graph = mg.Graph()\nphs = [mg.placeholder(e.dtype, e.shape, name=f'arg{i}') for i, e in enumerate(examples)]\n"
               "out = fn(*phs)\nreturn graph, phs, out", "as_default() block")],
        "2": [("tensors = [mg.tensor(e) for e in examples]\nwith mg.Tape() as tape:\n    result = fn(*tensors)\n"
               "graph = mg.Graph()\nenv = {}\nwith graph.as_default():\n"
               "    phs = [mg.placeholder(e.dtype, e.shape, name=f'arg{i}') for i, e in enumerate(examples)]\n"
               "    def sym(a):\n        if isinstance(a, mg.Tensor):\n"
               "            return env[id(a)] if id(a) in env else mg.constant(a.numpy())\n        return a\n"
               "    for entry in tape.entries:\n        prim = mg.core.PRIMITIVES[entry.op]\n"
               "        env[id(entry.output)] = mg.core.apply(prim, *[sym(a) for a in entry.inputs], **entry.params)\n"
               "return graph, phs, env[id(result)]", "placeholder, not a constant"),
              # inputs become placeholders, but unseen tensors are dropped: not the placeholder diagnosis
              ("tensors = [mg.tensor(e) for e in examples]\nwith mg.Tape() as tape:\n    result = fn(*tensors)\n"
               "graph = mg.Graph()\nwith graph.as_default():\n"
               "    phs = [mg.placeholder(e.dtype, e.shape, name=f'arg{i}') for i, e in enumerate(examples)]\n"
               "    env = {id(t): p for t, p in zip(tensors, phs)}\n"
               "    def sym(a):\n        return env.get(id(a), 0.0) if isinstance(a, mg.Tensor) else a\n"
               "    for entry in tape.entries:\n        prim = mg.core.PRIMITIVES[entry.op]\n"
               "        env[id(entry.output)] = mg.core.apply(prim, *[sym(a) for a in entry.inputs], **entry.params)\n"
               "return graph, phs, env[id(result)]", "replay the tape")],
        "3": [("traced = mg.trace(fn, example)\nreturn [i for i, p in enumerate(probes)\n"
               "        if not np.allclose(traced(p), fn(mg.tensor(p)).numpy(), atol=1e-6)]", "symbolic=False")],
        "4": [("norm = (x * x).sum() ** 0.5\nif norm > 1.0:\n    return x / norm\nreturn x", "mg.cond")],
        "5": [("sig = tuple(a.shape for a in arrays)\nif sig not in self.cache:\n"
               "    self.cache[sig] = mg.trace(self.fn, *arrays)\n    self.trace_count += 1\n"
               "return self.cache[sig](*arrays)", "dtype is part of the signature"),
              ("self.trace_count += 1\nreturn mg.trace(self.fn, *arrays)(*arrays)", "signature is new")],
        "6": [("return [1, 1, 1, 2, 3, 3]", "branch outcome is guarded"),
              ("return [1, 1, 2, 3, 3, 3]", "value of a Python scalar is guarded")],
    },
    "07_training_exercises": {
        "1": [("d = pred - target\nreturn (d * d).mean()", "do not average"),
              ("d = pred.numpy() - target.numpy()\nreturn (d * d).sum()", "Tensor operators")],
        "2": [({0: "bound = 1.0 / np.sqrt(in_features)\n"
                   "self.weight = nn.Parameter(np.random.uniform(-bound, bound, (in_features, out_features))"
                   ".astype(np.float32))\nself.bias = nn.Parameter(np.zeros(out_features, np.float32))",
                1: "return x @ self.weight + self.bias"}, "(out, in)"),
              ({1: "return x @ self.weight.T"}, "forward must add self.bias"),
              ({0: "bound = 1.0 / np.sqrt(in_features)\n"
                   "self.weight = mg.tensor(np.random.uniform(-bound, bound, (out_features, in_features)), "
                   "requires_grad=True)\nself.bias = mg.zeros(out_features, requires_grad=True)"}, "nn.Parameter")],
        "3": [("for p in params:\n    p.data = p.data - lr * p.grad.data", "skip parameters whose .grad is None"),
              ("for p in params:\n    if p.grad is not None:\n        p.data = p.data + lr * p.grad.data", "minus")],
        "4": [("if not state:\n    state.update(t=0, m=np.zeros_like(p.data), v=np.zeros_like(p.data))\n"
               "g = p.grad.data\nstate['m'] = b1 * state['m'] + (1 - b1) * g\n"
               "state['v'] = b2 * state['v'] + (1 - b2) * g * g\nm_hat = state['m'] / (1 - b1 ** state['t'])\n"
               "v_hat = state['v'] / (1 - b2 ** state['t'])\nstate['t'] += 1\n"
               "p.data = (p.data - lr * m_hat / (np.sqrt(v_hat) + eps)).astype(p.dtype)", "count the step first"),
              ("if not state:\n    state.update(t=0, m=np.zeros_like(p.data), v=np.zeros_like(p.data))\n"
               "g = p.grad.data\nstate['t'] += 1\nstate['m'] = b1 * state['m'] + (1 - b1) * g\n"
               "state['v'] = b2 * state['v'] + (1 - b2) * g * g\n"
               "p.data = (p.data - lr * state['m'] / (np.sqrt(state['v']) + eps)).astype(p.dtype)",
               "bias correction")],
        "5": [("return nn.Sequential(nn.Linear(2, 2))", "hidden layer")],
    },
    "08_performance_exercises": {
        "1": [("times = []\nfor _ in range(repeat):\n    t0 = time.perf_counter()\n    fn()\n"
               "    times.append(time.perf_counter() - t0)\nreturn float(np.median(times))", "warm-up"),
              ("fn()\ntimes = []\nfor _ in range(repeat):\n    t0 = time.perf_counter()\n    fn()\n"
               "    times.append(time.perf_counter() - t0)\nreturn float(np.median(times)) * 1e3", "milliseconds")],
        "2": [("out[:] = w * x + b\nreturn out", "write into out"),
              ("np.multiply(w, x, out=out)\nnp.add(out, b, out=out)", "give back the `out` array")],
        "3": [("return 6 * n * itemsize, 3 * n * itemsize", "WRITES"),
              ("return 6 * n * 4, 4 * n * 4", "itemsize")],
        "4": [("def unfused():\n    np.multiply(w, x, out=p)\n    np.add(p, b, out=y)\n"
               "res = {'naive': median_time(lambda: w * x + b, repeat),\n"
               "       'unfused': median_time(unfused, repeat),\n"
               "       'fused': median_time(lambda: fma_into(w, x, b, y), repeat)}\n"
               "res['speedup'] = res['fused'] / res['unfused']\nreturn res", "unfused time divided by the fused")],
        "5": [("saving = eager_s - compiled_s\nif saving <= 0:\n    return float('inf')\nreturn compile_s / saving",
               "math.ceil"),
              ("return math.ceil(compile_s / (eager_s - compiled_s))", "infinity")],
        "6": [({1: "on_numpy, on_numba = chain_program(n_ops, n, 'numpy'), chain_program(n_ops, n, 'numba')\n"
                   "return median_time(lambda: on_numba(x), repeat) / median_time(lambda: on_numpy(x), repeat)"},
               "the slower by the faster"),
              ({1: "on_numpy, on_numba = chain_program(n_ops, n, 'numpy'), chain_program(n_ops, n, 'numpy')\n"
                   "return median_time(lambda: on_numpy(x), repeat) / median_time(lambda: on_numba(x), repeat)"},
               "one program per backend"),
              ({0: "return '16'"}, "a positive number")],
    },
    "09_higher_order_exercises": {
        "9.1": [("return 3.0 * x * x", "times the tangent of x"),
                ("return dx * 3.0 * x", "power rule")],
        "9.2": [("y, _ = mg.jvp(f, (x,), (v,))\nreturn y.item()", "the second thing it returns")],
        "9.3": [("return np.stack([mg.jvp(f, (x,), (e,))[1].numpy() for e in np.eye(len(x))])", "axis=1"),
                ({1: "rows = []\nfor e in np.eye(m):\n    leaf = mg.tensor(x, requires_grad=True)\n"
                     "    f(leaf).backward(gradient=e)\n    rows.append(leaf.grad.numpy())\nreturn np.stack(rows, axis=1)"},
                 "axis 0"),
                ({1: "leaf = mg.tensor(x, requires_grad=True)\nrows = []\nfor e in np.eye(m):\n"
                     "    f(leaf).backward(gradient=e)\n    rows.append(leaf.grad.numpy().copy())\nreturn np.stack(rows)"},
                 "fresh leaf"),
                ({1: "leaf = mg.tensor(x, requires_grad=True)\ny = f(leaf)\nrows = []\nfor e in np.eye(m):\n"
                     "    leaf.grad = None\n    y.backward(gradient=e)\n    rows.append(leaf.grad.numpy())\n"
                     "return np.stack(rows)"}, "frees the tape")],
        "9.4": [({0: "return 'forward' if n_inputs > n_outputs else 'reverse'"}, "one pass per output"),
                ({1: "return len(x), m"}, "adds one to a counter"),
                ({1: "jf, jr = mg.jacfwd(f), mg.jacrev(f)\njf(x), jr(x)\nreturn jf.passes, jr.passes"},
                 "your own two functions"),
                ({1: "calls = [0]\ndef counted(v):\n    calls[0] += 1\n    return f(v)\n"
                     "jacobian_by_columns(counted, x)\nby_columns = calls[0]\njacobian_by_rows(counted, x, m)\n"
                     "return by_columns, calls[0]"}, "from 0")],
        "9.5": [("x = mg.tensor(x_value, dtype=mg.float64, requires_grad=True)\nf(x).backward(create_graph=True)\n"
                 "(x.grad * mg.tensor(v)).sum().backward()\nreturn x.grad.numpy()", "clear x.grad"),
                ("x = mg.tensor(x_value, dtype=mg.float64, requires_grad=True)\nf(x).backward()\ng = x.grad\n"
                 "x.grad = None\n(g * mg.tensor(v)).sum().backward()\nreturn x.grad.numpy()", "create_graph=True"),
                ("x = mg.tensor(x_value, dtype=mg.float64, requires_grad=True)\nf(x).backward()\n"
                 "return x.grad.numpy()", "not H v")],
        "9.6": [("G = mg.vmap(mg.grad(loss))(w, X, Y)\nreturn np.sqrt((G.numpy().reshape(len(X), -1) ** 2).sum(1))",
                 "in_axes is None"),
                ("return np.linalg.norm(mg.grad(lambda w: sum(loss(w, X[i], Y[i]) for i in range(len(X))))(w).numpy())",
                 "whole batch"),
                ("G = mg.vmap(mg.grad(loss), in_axes=(None, 0, 0))(w, X, Y)\n"
                 "return (G.numpy().reshape(len(X), -1) ** 2).sum(1)", "square root")],
    },
    "11_deployment_exercises": {
        "11.1": [("buf = io.BytesIO()\nmg.export_onnx(y, buf, inputs=[x])\nreturn buf", "getvalue()")],
        "11.2": [("return [t.name for t in model.graph.initializer]", "initializer names")],
        "11.3": [("return b.op('Exp', xs, name=node.outputs[0].name)", "Tanh"),
                 ("return b.op('Tanh', xs, name=node.outputs[0].name)[0]", "list of output names")],
        "11.4": [("m = mg.export_onnx(net, io.BytesIO(), example_inputs=[xv])\n"
                  "return sum(n.op_type == 'MatMul' for n in m.graph.node)", "depth=depth"),
                 ("m = mg.export_onnx(lambda x: net(x, depth=depth), io.BytesIO(), example_inputs=[xv])\n"
                  "return len(m.graph.node)", "count the MatMul nodes")],
    },
}


# Correct answers written differently from the solution: notebook -> task -> [replacement]; each must pass.
CORRECT = {
    "01_computational_graphs_exercises": {
        "1.2": ["return (f(x + eps) - f(x - eps)) / eps / 2"],
        "1.4": ["grad = dict.fromkeys(order, 0.0)\ngrad[out] = 1.0\nfor node in order:\n"
                "    for parent, local in edges.get(node, ()):\n        grad[parent] = grad[parent] + grad[node] * local\n"
                "return grad[wrt]"]},
    "04_static_graphs_exercises": {
        "4.1": ["env = {}\nfor node in graph.nodes:\n    if node.op == 'placeholder':\n"
                "        results = [feeds[node.outputs[0].name]]\n    elif node.op == 'constant':\n"
                "        results = [node.params['value']]\n    elif node.op == 'variable':\n"
                "        results = [node.params['initial_value']]\n    else:\n"
                "        res = node.prim.impl(*[env[id(i)] for i in node.inputs], **node.params)\n"
                "        results = res if node.prim.multiple_results else [res]\n"
                "    for sym, value in zip(node.outputs, results):\n        env[id(sym)] = value\n"
                "return tuple(env[id(f)] for f in fetches)"]},
    "05_graph_compiler_exercises": {
        "4": ["ranges = {name: (-1, -1) for name in inputs}\nfor step, (out, op, ins) in enumerate(schedule):\n"
              "    ranges[out] = (step, step)\n    for i in ins:\n        ranges[i] = (ranges[i][0], step)\n"
              "for o in outputs:\n    ranges[o] = (ranges[o][0], len(schedule))\nreturn ranges"]},
    "08_performance_exercises": {
        "5": ["saving = eager_s - compiled_s\nreturn math.ceil(compile_s / saving) if saving > 0 else math.inf"]},
}


def _load_script():
    spec = importlib.util.spec_from_file_location("make_exercises", ROOT / "scripts" / "make_exercises.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def check_cells(nb) -> list[int]:
    """Indices of the check cells: the first code cell after each task cell."""
    cells, out = nb["cells"], []
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "code" and "### BEGIN SOLUTION" in _source(cell):
            nxt = next((j for j in range(i + 1, len(cells)) if cells[j]["cell_type"] == "code"), None)
            assert nxt is not None and "### BEGIN SOLUTION" not in _source(cells[nxt]), \
                f"cell {i}: a task cell must be followed by its check cell"
            out.append(nxt)
    return out


def task_label(nb, i) -> str:
    """'1.2' for the task cell i: from its '# Task ...' comment, else the nearest 'Task' heading above."""
    m = TASK.search(_source(nb["cells"][i]).split("### BEGIN")[0])
    if m:
        return m.group(1)
    for j in range(i - 1, -1, -1):
        if nb["cells"][j]["cell_type"] == "markdown" and TASK.search(_source(nb["cells"][j])):
            return TASK.findall(_source(nb["cells"][j]))[-1]
    raise AssertionError(f"cell {i}: no task name")


def with_answer(source: str, replacement) -> str:
    """The task cell with its solution block(s) replaced (the markers go too)."""
    repl = {0: replacement} if isinstance(replacement, str) else dict(replacement)
    out, block, inside = [], -1, False
    for line in source.split("\n"):
        m = BEGIN.match(line)
        if m:
            block, inside = block + 1, True
            if block in repl:
                out += [m.group(1) + code_line for code_line in repl[block].split("\n")]
            else:
                out.append(line)
        elif END.match(line):
            inside = False
            if block not in repl:
                out.append(line)
        elif not inside or block not in repl:
            out.append(line)
    return "\n".join(out)


def test_with_answer_replaces_blocks():
    src = "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n\ndef g():\n" \
          "    ### BEGIN SOLUTION\n    return 2\n    ### END SOLUTION"
    assert with_answer(src, "return 5") == "def f():\n    return 5\n\ndef g():\n" \
        "    ### BEGIN SOLUTION\n    return 2\n    ### END SOLUTION"
    assert "return 6" in with_answer(src, {1: "x = 1\nreturn 6"}) and "    x = 1" in with_answer(src, {1: "x = 1"})


def test_exercises_are_generated_from_solutions():
    mod = _load_script()
    wanted = mod.build(ROOT)
    assert wanted, "no solution notebooks found in solutions/"
    stale = [p.name for p, text in wanted.items() if not p.exists() or p.read_text(encoding="utf-8") != text]
    assert not stale, f"exercises/ is out of date for {stale}: run python3 scripts/make_exercises.py"
    extra = sorted(p.name for p in (ROOT / "exercises").glob("*.ipynb") if p not in wanted)
    assert not extra, f"exercises/ has notebooks with no solution: {extra}"


def test_course_has_enough_tasks():
    counts = {p.name: len(check_cells(json.loads(p.read_text(encoding="utf-8")))) for p in SOLUTIONS}
    assert all(n >= 4 for n in counts.values()), f"every exercise notebook needs >= 4 tasks: {counts}"


def test_every_task_has_a_typical_wrong_answer():
    missing = []
    for p in SOLUTIONS:
        nb = json.loads(p.read_text(encoding="utf-8"))
        for i in [j for j, c in enumerate(nb["cells"]) if "### BEGIN SOLUTION" in _source(c)
                  and c["cell_type"] == "code"]:
            if not WRONG.get(p.stem, {}).get(task_label(nb, i)):
                missing.append(f"{p.stem} task {task_label(nb, i)}")
    assert not missing, f"no typical wrong answer listed in WRONG for: {missing}"


def test_check_cells_use_the_check_helper():
    for p in SOLUTIONS:
        nb = json.loads(p.read_text(encoding="utf-8"))
        for i in check_cells(nb):
            src = _source(nb["cells"][i])
            assert "with task(" in src and not re.search(r"^\s*assert\b", src, re.M), \
                f"{p.name} cell {i}: a check cell tests inside `with task(...)` (no bare assert)"


def _errors(cell):
    return [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]


def _stdout(cell):
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def _message(err) -> str:
    return ANSI.sub("", "\n".join(err["traceback"]))


@pytest.mark.slow
@pytest.mark.parametrize("solution", SOLUTIONS, ids=lambda p: p.stem)
def test_every_check_teaches(solution, monkeypatch, notebook_kernel):  # the learner's kernel (conftest.py)
    exercise = ROOT / "exercises" / solution.name
    assert exercise.exists(), f"{exercise.name} missing: run python3 scripts/make_exercises.py"
    sol = nbformat.read(solution, as_version=4)
    ex = nbformat.read(exercise, as_version=4)
    assert len(ex.cells) == len(sol.cells)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    client = nbclient.NotebookClient(nbformat.read(solution, as_version=4), timeout=300, kernel_name=notebook_kernel,
                                     allow_errors=True, resources={"metadata": {"path": str(solution.parent)}})
    checks = set(check_cells(sol))
    problems = []

    def run(source, i):
        cell = nbformat.v4.new_code_cell(source)
        client.execute_cell(cell, i)
        return cell

    def expect_failure(check, i, label, what, needle):
        errs = _errors(run(check, i))
        if not errs:
            problems.append(f"task {label}: the check passes on {what}")
            return ""
        err, text = errs[0], _message(errs[0])
        if err["ename"] != "CheckError":
            problems.append(f"task {label}, {what}: failed with {err['ename']}, not a CheckError:\n{text}")
        elif len(text.splitlines()) > 6:
            problems.append(f"task {label}, {what}: the message has {len(text.splitlines())} lines:\n{text}")
        elif " ".join(needle.lower().split()) not in " ".join(text.lower().split()):
            problems.append(f"task {label}, {what}: the message does not say {needle!r}:\n{text}")
        return text

    with client.setup_kernel():
        for i, cell in enumerate(sol.cells):
            if cell.cell_type != "code" or i in checks:
                continue
            if "### BEGIN SOLUTION" not in cell.source:
                errs = _errors(run(cell.source, i))
                assert not errs, f"cell {i} fails: {_message(errs[0]) if errs else ''}"
                continue
            label = task_label(sol, i)
            check = next(j for j in range(i + 1, len(sol.cells)) if sol.cells[j].cell_type == "code")
            check_src = sol.cells[check].source
            stub = run(ex.cells[i].source, i)
            assert not _errors(stub), f"task {label}: the stub cell itself fails"
            text = expect_failure(check_src, check, label, "the stub", "not done yet")
            if "hint" in text.lower():
                problems.append(f"task {label}: the not-done-yet message gives a hint:\n{text}")
            for replacement, needle, *around in WRONG.get(solution.stem, {}).get(label, []):
                run("import minigrad.checks\nminigrad.checks._SEEN.clear()", i)   # judged as a first failure
                if around:
                    run(around[0], i)
                wrong = run(with_answer(cell.source, replacement), i)
                assert not _errors(wrong), f"task {label}: the wrong answer cell itself fails: {wrong.outputs}"
                expect_failure(check_src, check, label, f"the wrong answer {replacement!r}", needle)
                if around:
                    run(around[1], i)
            for replacement in CORRECT.get(solution.stem, {}).get(label, []):
                run(with_answer(cell.source, replacement), i)
                if _errors(run(check_src, check)):
                    problems.append(f"task {label}: the check fails on the correct answer {replacement!r}")
            solved = run(cell.source, i)
            assert not _errors(solved), f"task {label}: the solution cell fails"
            result = run(check_src, check)
            if _errors(result):
                problems.append(f"task {label}: the check fails on the solution:\n{_message(_errors(result)[0])}")
            elif f"✓ Task {label}" not in _stdout(result):
                problems.append(f"task {label}: a passing check prints '✓ Task {label}', got {_stdout(result)!r}")
    assert not problems, "\n\n".join(problems)
