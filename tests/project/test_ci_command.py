"""`.ci/run` runs the README's development command: the same install (extras included, so a
clean clone skips nothing it could run) and the same pytest invocation."""

from __future__ import annotations

import re

from conftest import REPO


def _readme_command() -> str:
    text = (REPO / "README.md").read_text()
    block = re.search(r"```bash\n(.+?)\n```", text.split("## Development", 1)[1], re.S)
    assert block is not None, "README's Development section has no bash block"
    return block.group(1).strip()


def test_ci_installs_and_tests_as_the_readme_says() -> None:
    setup, install, tests = (part.strip() for part in _readme_command().split("&&"))
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert f"{setup} && {install}" in ci
    assert tests in ci


def test_the_development_install_holds_the_torch_extra() -> None:
    """Without it the profiling recipe's and the sample generator's tests skip."""
    assert "'.[dev,torch]'" in _readme_command()
