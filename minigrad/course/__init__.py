"""The course's apparatus, not the engine: check cells and their hints (checks.py, hints.py), the notebook
checker (check_notebook.py), the benchmark helpers lesson 08 imports (bench.py) and the testing helpers
(testing.py: numerical_grad, gradcheck, assert_modes_agree)."""
