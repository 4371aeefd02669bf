"""`python -m minigrad.check_notebook` runs minigrad/course/check_notebook.py (the README's command)."""
import sys

from .course import check_notebook

if __name__ == '__main__':
    sys.exit(check_notebook.main())
else:
    sys.modules[__name__] = check_notebook
