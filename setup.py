"""Only the package's long description; all other metadata is in pyproject.toml (`dynamic = ["readme"]`).

README.md links to the lessons and files of the repository with relative links, which break on PyPI (the
long description has no repository around it): here they become absolute GitHub links.
"""
import re
from pathlib import Path

from setuptools import setup

REPO = "https://github.com/minigrad-course/minigrad"
# ](target) and ![alt](target) of inline Markdown links; targets with a scheme (https:, mailto:) stay
LINK = re.compile(r"(?P<bang>!?)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")


def absolute_links(markdown: str, repo: str = REPO, ref: str = "main") -> str:
    """README text with relative link targets made absolute on GitHub.

    >>> absolute_links("[l](notebooks/a.ipynb) [s](#x) [w](https://a.b)", "https://g/r")
    '[l](https://g/r/blob/main/notebooks/a.ipynb) [s](https://g/r#x) [w](https://a.b)'
    """
    def fix(m):
        target = m["target"]
        if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):
            return m[0]
        if target.startswith("#"):
            url = repo + target
        else:  # images load from the raw file, links open GitHub's page for it
            url = f"{repo}/{'raw' if m['bang'] else 'blob'}/{ref}/{target.removeprefix('./')}"
        return f"{m['bang']}[{m['text']}]({url})"
    return LINK.sub(fix, markdown)


if __name__ == "__main__":
    setup(long_description=absolute_links((Path(__file__).parent / "README.md").read_text(encoding="utf-8")),
          long_description_content_type="text/markdown")
