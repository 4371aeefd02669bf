"""`minigrad.checks` is minigrad/course/checks.py: the exercise notebooks import it by this name."""
import sys

from .course import checks

sys.modules[__name__] = checks
