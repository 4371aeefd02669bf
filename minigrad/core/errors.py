"""Errors raised by minigrad. Every message names the op, the tensors or symbols
involved with their shapes, and says what to do."""


class MinigradError(Exception):
    """Base class of every minigrad error."""


class ShapeError(MinigradError, ValueError):
    """Shapes (or dtypes) that an op cannot combine."""


class FeedError(MinigradError):
    """A feed_dict that does not fit the graph (missing, wrong shape, not a placeholder)."""


class GraphError(MinigradError):
    """A malformed graph, or Symbols of different graphs mixed together."""


class TraceError(MinigradError):
    """Asking a Symbol (which has no value yet) for a concrete value while tracing."""


class BackwardError(MinigradError, RuntimeError):
    """backward() cannot run: freed graph, non-scalar output, integer tensor, ..."""


class ForwardError(MinigradError, ValueError):
    """mg.jvp / jacfwd / jacrev given what they cannot differentiate (structure, dtype, a missing rule)."""


class InputError(MinigradError, TypeError, ValueError):
    """A value of the wrong kind given to a public function (None, a string, an object array, a negative
    learning rate, ...); also a TypeError and a ValueError, so code catching those keeps working."""
