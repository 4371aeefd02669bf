"""`minigrad.bench` is minigrad/course/bench.py: lesson 08 imports it and `python -m minigrad.bench` runs it."""
import sys

from .course import bench

if __name__ == '__main__':
    bench.main()
else:
    sys.modules[__name__] = bench
