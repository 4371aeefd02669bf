"""Transformations of functions, built on the core's value kinds and graphs.

forward.py (forward mode: Duals, mg.jvp), batching.py (mg.vmap: Batched values), func.py (mg.grad,
value_and_grad, hessian, mg.jacfwd / jacrev in one batched pass, functional_call), trace.py (mg.trace:
symbolic tracing and a tape turned into a graph), jit.py (mg.jit: guards, graph breaks, the cache; guards.py:
what fn reads besides its arguments; call.py: the call node), checkpoint.py (mg.checkpoint and
checkpoint_sequential: a block's values recomputed in backward).
"""
