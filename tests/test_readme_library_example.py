"""The README's library example, run as a user would run it: a script, with worker processes."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import ROOT


def test_the_readme_library_example_runs_as_a_script_with_no_error_rows(tmp_path):
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Library use"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert 'if __name__ == "__main__":' in code
    script = tmp_path / "example.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    # tilepack and tileunpack:blend, two backends, fp32 on the CPU: four cells, each with a p50
    assert len(lines) == 4 and all(" p50 " in line and "GB/s" in line for line in lines), done.stdout
